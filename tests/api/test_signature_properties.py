"""Property test: calls through generated signatures bind as Python binds them.

Hypothesis draws a helper signature (positional-only, ordinary parameters with and without
defaults, `*rest`, keyword-only parameters with and without defaults, `**kw` forwarded to an
inner function) and a call that passes each parameter in one of the ways Python allows
(positionally, by keyword, through `*tuple` or `**dict`, or not at all where a default
exists). Each parameter enters the result through its own smooth term, so a binding mistake
changes the value or the derivative. zymo's primal must equal Python's, and its forward and
reverse derivatives must match central differences and each other (`check_grad`).
"""
from __future__ import annotations

import importlib.util
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import zymo
from zymo import Active, Duplicated, ReverseWithPrimal
from zymo.testing import check_grad

_ids = itertools.count()
USE_DICT = True  # f(**d) with a dict display built in the function
TERMS = ["np.sin({p})", "np.cos({p}) * 0.5", "np.tanh({p})", "({p}) * ({p}) * 0.25", "np.exp(np.sin({p}))"]
VALUES = ["a", "b", "a * b", "np.sum(x) * 0.5", "np.sin(a)", "1.25", "b - 0.5"]


@st.composite
def programs(draw):
    n_posonly = draw(st.integers(0, 2))
    n_pos = draw(st.integers(0, 2))
    names = [f"p{k}" for k in range(n_posonly + n_pos)]
    n_def = draw(st.integers(0, len(names)))
    defaults = {p: draw(st.sampled_from(["0.5", "-1.0", "2.0"])) for p in names[len(names) - n_def:]}
    vararg = draw(st.booleans())
    kwonly = [f"k{k}" for k in range(draw(st.integers(0, 2)))]
    kw_defaults = {k: "0.75" for k in kwonly if draw(st.booleans())}
    kwarg = draw(st.booleans())

    params = ["x"] + [f"{p}={defaults[p]}" if p in defaults else p for p in names[:n_posonly]]
    if n_posonly:
        params.append("/")
    params += [f"{p}={defaults[p]}" if p in defaults else p for p in names[n_posonly:]]
    if vararg:
        params.append("*rest")
    elif kwonly:
        params.append("*")
    params += [f"{k}={kw_defaults[k]}" if k in kw_defaults else k for k in kwonly]
    if kwarg:
        params.append("**kw")
    body = ["    s = np.sum(np.sin(x))"]
    for p in names + kwonly:
        body.append(f"    s = s + {draw(st.sampled_from(TERMS)).format(p=p)} * np.sum(x)")
    if vararg:
        body += ["    for r in rest:", "        s = s + np.tanh(r) * 1.5"]
    if kwarg:
        body.append("    s = s + inner(x, **kw)")
    body.append("    return s")

    # the call: how each parameter is passed (always a valid call)
    pos, kws, dstar = [], [], []
    positional_ok = True  # after a keyword or an omitted parameter, nothing goes by position
    for i, p in enumerate(names):
        ways = (["pos"] if positional_ok else []) + (["kw"] if i >= n_posonly else []) + \
            (["omit"] if p in defaults else [])
        how = draw(st.sampled_from(ways))
        if how == "pos":
            pos.append(draw(st.sampled_from(VALUES)))
        else:
            positional_ok = False
            if how == "kw":
                kws.append(f"{p}={draw(st.sampled_from(VALUES))}")
    cut = draw(st.integers(0, len(pos)))  # a suffix of the positional arguments goes through *t
    pos, star = pos[:cut], pos[cut:]
    extras = [draw(st.sampled_from(VALUES)) for _ in range(draw(st.integers(0, 2)))] \
        if vararg and positional_ok else []
    for k in kwonly:
        if k not in kw_defaults or draw(st.booleans()):
            (dstar if USE_DICT and draw(st.booleans()) else kws).append(f"{k}={draw(st.sampled_from(VALUES))}")
    if kwarg:
        for q in draw(st.lists(st.sampled_from(["q", "r"]), unique=True)):
            (dstar if USE_DICT and draw(st.booleans()) else kws).append(f"{q}={draw(st.sampled_from(VALUES))}")
    return names, body, params, pos, star, extras, kws, dstar, draw


def _source(prog) -> str:
    names, body, params, pos, star, extras, kws, dstar, draw = prog
    lines = ["import numpy as np", "", "",
             "def inner(x, q=0.0, r=0.0):", "    return np.sum(x) * q + np.sin(r)", "", "",
             f"def helper({', '.join(params)}):", *body, "", "",
             "def prog(x, a, b):"]
    if star or extras:
        lines.append(f"    t = ({', '.join(star + extras)},)")
    if dstar:
        lines.append("    d = {" + ", ".join(f"'{kv.split('=', 1)[0]}': {kv.split('=', 1)[1]}" for kv in dstar) + "}")
    call = ["x"] + pos + (["*t"] if star or extras else []) + kws + (["**d"] if dstar else [])
    lines.append(f"    return helper({', '.join(call)})")
    return "\n".join(lines) + "\n"


def _load(src: str, directory):
    name = f"zymo_sig_{next(_ids)}"
    path = directory / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
@settings(max_examples=25, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(programs(), st.floats(-1.2, 1.2), st.floats(-1.2, 1.2))
def test_generated_signatures_bind_as_python(tmp_path, prog, a, b):
    src = _source(prog)
    note(src)
    mod = _load(src, tmp_path)
    x = np.array([0.3, -0.7, 1.1])
    expected = mod.prog(x.copy(), a, b)  # the drawn calls are valid Python
    (_, da, db), value = zymo.autodiff(ReverseWithPrimal, mod.prog, Active, Duplicated(x.copy(), np.zeros(3)),
                                       Active(a), Active(b))
    assert np.isclose(value, expected, rtol=1e-12, atol=1e-12)
    check_grad(mod.prog, x.copy(), a, b, eps=1e-5, rtol=1e-6, atol=1e-8, name="prog")
