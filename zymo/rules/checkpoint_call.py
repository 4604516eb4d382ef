"""A checkpointed call: `zymo.checkpoint(fn)` (issue 35, manual control).

Contract: `checkpoint(fn)` (also a decorator) returns a `CheckpointedCall`; run as plain Python,
calling it calls `fn`. In a function zymo differentiates, a call to it is one primitive (a rule
built here, as `custom_rule` builds one), not `fn`'s inlined body:
- reverse mode stores nothing of `fn`'s internals: the forward sweep runs `fn`'s primal only, and
  the caching analysis keeps the call's arguments as for any primitive (a copy when later code
  overwrites them); the adjoint sweep reruns `fn` under zymo's own reverse mode on copies of them
  (`zymo.autodiff(Reverse, ...)` of `sum(fn(*args) * g)`, `g` the result's adjoint), as
  `jax.checkpoint` / `torch.utils.checkpoint` do. All arguments' cotangents come from one rerun
  (`_Memo`), per result part;
- forward mode differentiates through: each tangent is zymo's forward mode of `fn` at the call.
- What `fn` may be: a Python function of positional arguments (float or int numbers, arrays;
  other arguments pass as constants) returning a number, an array, a tuple of them written
  `return a, b` (each element a part, `Rule.parts`), or None after writing into exactly one of
  its array parameters in place (`p[...] = ...`, `out=p`, `p.fill(...)`, also through a view
  `v = p[1:-1]` made in `fn`: the call is that
  parameter's `out=`, and the adjoint reads and replaces its shadow). Its closures and globals
  are read as in normal calls (constants). Refused at the caller's line (`check`): keyword
  arguments, lists or complex values as arguments; refused when marking (`ZymoUsageError`):
  writes into two parameters, into a name that is not a parameter or a local (a global or
  closure array), a write into a parameter together with a returned value, or with a tuple.
  zymo finds the writes from `fn`'s source: through the parameter's name or a view bound to a
  local name (`v = p[...]`, `p.reshape(...)`, `p.T`). A write into another array argument that
  the source does not show (through a function `fn` calls) raises `ZymoUsageError` when the
  call runs (its array arguments are compared before and after); a function `fn` calls that
  writes into a global or closure array is refused when marking (`_check_callees`).
- `cache_report` lists each checkpointed call (`recording`, `report_lines`): recomputed in the
  adjoint sweep, and the bytes of the inputs it keeps.
- The generated code calls `fn` through `_rt.USER[i]` (as custom rules): under `numba=True` the
  derivative falls back as for custom rules; under `numba="kernels"` the loops around the call run
  as Python and the others compile. The reruns use zymo's default backend (`config.set_numba`).
"""
from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import itertools
import linecache
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .. import pyast
from .. import runtime as _rt
from ..analysis import types as TI
from ..errors import ZymoUsageError
from .registry import REGISTRY, Rule

_counter = itertools.count()
_INPLACE_METHODS = {"fill", "sort", "put", "itemset", "resize", "partition", "setfield"}
_VIEW_METHODS = {"reshape", "ravel", "view", "transpose", "swapaxes", "squeeze"}
_LOG: list[tuple[str, int]] | None = None  # `recording`: the calls' descriptions, while cache_report measures


class CheckpointedCall:
    """`fn`, differentiated by recomputation (see the module docstring)."""

    def __init__(self, fn: Callable):
        if not inspect.isfunction(fn):
            raise ZymoUsageError(f"zymo.checkpoint takes a Python function, not {fn!r}")
        self.fn = fn
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__doc__ = fn.__doc__
        self.params = [p.name for p in inspect.signature(fn).parameters.values()]
        if any(p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
               for p in inspect.signature(fn).parameters.values()):
            raise ZymoUsageError(f"zymo.checkpoint({fn.__qualname__}): parameters must be positional "
                                 "(no *args, **kwargs or keyword-only parameters)")
        self.written, self.parts = _shape_of(fn, self.params)
        _check_callees(fn, fn.__qualname__, {fn})
        self.slot = len(_rt.USER)
        _rt.USER.append(self)
        base = f"checkpoint.{fn.__module__}.{fn.__qualname__}"
        self.key = next(k for j in itertools.count(1) if (k := base if j == 1 else f"{base}#{j}") not in REGISTRY)
        self._memo, self._parts = _Memo(), _Memo()
        self._h: dict[int | None, Callable] = {}
        self.part_fns = [functools.partial(self.part, i) for i in range(self.parts)]
        self._build()

    def __call__(self, *args: Any, **kw: Any) -> Any:
        return self.fn(*args, **kw)

    def __repr__(self) -> str:
        return f"<zymo.checkpoint {self.__qualname__}>"

    # -- what generated code calls ---------------------------------------------------------
    def primal(self, *args: Any, out: Any = None) -> Any:
        if _LOG is not None:
            kept = sum(a.nbytes if isinstance(a, np.ndarray) else 8 for a in args if _numeric(a))
            _LOG.append((self.__qualname__, kept))
        inputs = [(k, a.copy()) for k, a in enumerate(args) if isinstance(a, np.ndarray) and k != self.written]
        ans = self.fn(*args)
        for k, before in inputs:  # a write zymo did not see in the source (through a callee, say)
            if not np.array_equal(before, args[k], equal_nan=before.dtype.kind in "fc"):
                raise ZymoUsageError(
                    f"zymo.checkpoint({self.__qualname__}) wrote into its argument {self.params[k]}, which its "
                    "source does not show: the recomputation would read changed inputs. Write into the parameter "
                    "in the marked function itself (p[...] = ...), or do not mark it")
        return out if self.written is not None else ans

    def part(self, i: int, *args: Any) -> Any:
        """Element `i` of the result: the ops of a call's parts run in turn with the same
        arguments, and share one call of `fn`."""
        got = self._parts.take(None, i, None, args)
        if got is None:
            got = list(self.primal(*args))
            self._parts.put(None, i, None, args, got, self.parts)
        return got[i]

    def jvp_term(self, part: int | None, k: int, t: Any, *args: Any) -> Any:
        from ..annotations import Const, Duplicated, Forward

        ann: list[Any] = []
        for j, a in enumerate(args):
            a = _copy(a)
            if j == k:
                ann.append(Duplicated(a, _copy(t)))
            elif j == self.written:
                ann.append(Duplicated(a, np.zeros_like(a)))
            else:
                ann.append(Const(a))
        if self.written is not None:
            _call(Forward, self.fn, Const, ann)
            return ann[self.written].dval
        fn = self.fn if part is None else self._part_target(part)
        return _call(Forward, fn, Duplicated, ann)[0]

    def vjp_term(self, part: int | None, k: int, g: Any, *args: Any) -> Any:
        cots = self._memo.take(part, k, g, args)
        if cots is None:
            cots = self._cotangents(part, g, args)
            self._memo.put(part, k, g, args, cots)

        return cots[k]

    def _cotangents(self, part: int | None, g: Any, args: tuple) -> list:
        """Every argument's cotangent, from one reverse-mode rerun of `fn` on copies of `args`."""
        from ..annotations import Active, Const, Duplicated, Reverse

        ann: list[Any] = []
        for a in args:
            if isinstance(a, np.ndarray) and np.issubdtype(a.dtype, np.floating):
                ann.append(Duplicated(a.copy(), np.zeros_like(a)))
            elif isinstance(a, (float, np.floating)):
                ann.append(Active(a))
            else:
                ann.append(Const(_copy(a)))
        (derivs,) = _call(Reverse, self._target(part), Active, [*ann, Const(_copy(g))])
        return [d.dval if isinstance(d, Duplicated) else derivs[j] for j, d in enumerate(ann)]

    def _target(self, part: int | None) -> Callable:
        """The scalar function reverse mode reruns: the result (part) dotted with its adjoint `_g`;
        for a call that writes parameter p, p after the call dotted with `_g`."""
        if part not in self._h:
            ps = ", ".join(self.params)
            if self.written is not None:
                body = f"    _fn({ps})\n    return np.sum({self.params[self.written]} * _g)\n"
            else:
                body = f"    return np.sum(_fn({ps}){'' if part is None else f'[{part}]'} * _g)\n"
            self._h[part] = self._define(f"def _h({ps}, _g):\n{body}")
        return self._h[part]

    def _part_target(self, part: int) -> Callable:
        """Part `part` of the result, for forward mode."""
        if -1 - part not in self._h:
            ps = ", ".join(self.params)
            self._h[-1 - part] = self._define(f"def _p({ps}):\n    return _fn({ps})[{part}]\n")
        return self._h[-1 - part]

    def _define(self, src: str) -> Callable:
        filename = f"<zymo checkpoint {self.key} #{next(_counter)}>"
        linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
        ns: dict[str, Any] = {"_fn": self.fn, "np": np}
        exec(compile(src, filename, "exec"), ns)
        fn: Callable = ns["_h" if "_h" in ns else "_p"]
        return fn

    def _build(self) -> None:
        """Register the rule (one per result part) whose jvp/vjp bodies call this object."""
        n, ps = self.slot, self.params
        args = ", ".join(ps)
        keys = [self.key] if not self.parts else [f"{self.key}.part{i}" for i in range(self.parts)]
        for i, key in enumerate(keys):
            part = None if not self.parts else i
            lines = []
            for k, p in enumerate(ps):
                lines.append(f"    def jvp_{p}(t, ans, {args}): return _rt.USER[{n}].jvp_term({part}, {k}, t, {args})")
                lines.append(f"    def vjp_{p}(g, ans, {args}): return _rt.USER[{n}].vjp_term({part}, {k}, g, {args})")
            src = "class _R(Rule):\n" + "\n".join(lines) + "\n"
            filename = f"<zymo checkpoint rule {key} #{next(_counter)}>"
            linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
            ns = {"Rule": Rule, "_rt": _rt}
            exec(compile(src, filename, "exec"), ns)
            body = {k: v for k, v in vars(ns["_R"]).items() if k.startswith(("jvp_", "vjp_"))}
            body.update(__module__=__name__, user=True, checkpointed=self)
            flags: dict[str, Any] = {"fn": self, "call": f"_rt.USER[{n}].primal"}
            if part is not None:
                flags.update(fn=self.part_fns[part], call=f"_rt.USER[{n}].part_fns[{part}]")
            if self.written is not None:
                body["inplace_arg"] = self.written
                flags["out"] = True
                TI.RESULT_TYPES[key] = functools.partial(_written_type, self.written)
            type(f"checkpoint_{n}_{i}", (_CheckBase,), body, key=key, **flags)
        if self.parts:
            type(f"checkpoint_{n}", (_CheckBase,), {"__module__": __name__, "user": True, "checkpointed": self},
                 key=self.key, fn=self, call=f"_rt.USER[{n}].primal", parts=tuple(keys))


def _written_type(k: int, pos: list, kw: dict) -> Any:
    """The result type of a call that writes parameter k: that array (an example call returns None)."""
    return pos[k].type


class _CheckBase(Rule):
    @classmethod
    def check(cls, pos, kw):
        c = cls.checkpointed
        if kw:
            return f"pass the arguments of {c.__qualname__} positionally (it is marked zymo.checkpoint)"
        from ..ir import types as T

        for p, a in zip(c.params, pos):
            t = getattr(a, "type", None)
            if isinstance(t, T.List) or (t is not None and T.is_complex(t)) or not hasattr(a, "type"):
                return (f"zymo.checkpoint({c.__qualname__}): argument {p!r} is a list, a tuple or complex; a checkpointed "
                        "call takes numbers and real arrays")
        if c.written is not None:
            a = pos[c.written] if c.written < len(pos) else None
            if not isinstance(getattr(a, "type", None), T.Array):
                return (f"zymo.checkpoint({c.__qualname__}) writes into its parameter "
                        f"{c.params[c.written]!r}: pass an array there")
        return None


class _Memo:
    """The cotangents of one rerun, handed out once per argument: the adjoint sweep asks for each
    active argument's in turn with the same objects (`g` and the arguments)."""

    def __init__(self) -> None:
        self.key: tuple = ()
        self.cots: list = []
        self.left: set[int] = set()

    def take(self, part: int | None, k: int, g: Any, args: tuple) -> list | None:
        if self.key and self.key[0] == part and self.key[1] is g and len(self.key[2]) == len(args) and \
                all(a is b for a, b in zip(self.key[2], args)) and k in self.left:
            self.left.discard(k)
            cots = self.cots
            if not self.left:  # every one handed out: let go of the arrays
                self.key, self.cots = (), []
            return cots
        return None

    def put(self, part: int | None, k: int, g: Any, args: tuple, cots: list, n: int | None = None) -> None:
        self.key, self.cots = (part, g, tuple(args)), cots
        self.left = set(range(len(args) if n is None else n)) - {k}


def _numeric(a: Any) -> bool:
    return isinstance(a, (np.ndarray, float, int, np.number)) and not isinstance(a, bool)


def _copy(a: Any) -> Any:
    return a.copy() if isinstance(a, np.ndarray) else a


def _call(mode: Any, fn: Callable, ret: Any, ann: list) -> Any:
    from ..cache import call

    return call(mode, fn, ret, tuple(ann), None, None)


def _shape_of(fn: Callable, params: list[str]) -> tuple[int | None, int]:
    """(the parameter `fn` writes into, or None; the number of parts of a `return a, b`, or 0)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError) as e:
        raise ZymoUsageError(f"zymo.checkpoint({fn.__qualname__}): cannot read its source ({e})") from None
    node = next(n for n in pyast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Lambda)))
    local = {n.id for n in pyast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)} - set(params)
    alias = _aliases(node, params)
    writes = {alias.get(w, w) for w in _writes(node, params)}
    name = fn.__qualname__
    if any(w.endswith("+=") for w in writes):
        p = next(w for w in writes if w.endswith("+="))[:-2]
        raise ZymoUsageError(f"zymo.checkpoint({name}): `{p} += ...` on a parameter; write {p}[...] += ... to update "
                             f"an array in place, or bind a new name ({p}2 = {p} + ...)")
    outside = sorted(w for w in writes if w not in params and w not in local)
    if outside:
        raise ZymoUsageError(f"zymo.checkpoint({name}) writes into {', '.join(outside)}, not a parameter: a "
                             "checkpointed call may write only into one of its array parameters")
    mine = sorted({w for w in writes if w in params}, key=params.index)
    if len(mine) > 1:
        raise ZymoUsageError(f"zymo.checkpoint({name}) writes into {', '.join(mine)}: a checkpointed call may "
                             "write into one parameter at most (mark a function per array, or return new arrays)")
    rets = [n.value for n in pyast.walk(node) if isinstance(n, ast.Return) and n.value is not None
            and not (isinstance(n.value, ast.Constant) and n.value.value is None)]
    if mine and rets:
        raise ZymoUsageError(f"zymo.checkpoint({name}) writes into {mine[0]} and returns a value: a checkpointed "
                             "call does one or the other")
    sizes = {len(r.elts) if isinstance(r, ast.Tuple) else 0 for r in rets}
    if len(sizes) > 1:
        raise ZymoUsageError(f"zymo.checkpoint({name}): its returns differ in shape (a tuple and not)")
    return (params.index(mine[0]) if mine else None), (sizes.pop() if sizes else 0)


def _check_callees(fn: Callable, marked: str, seen: set) -> None:
    """Refuses, when marking, a Python function that `fn` calls (by a global or closure name,
    and theirs in turn) writing into memory it did not create, other than its parameters: the
    recomputation would run that write again. Writes into parameters are checked at run time
    (`CheckpointedCall.primal`)."""
    names = list(fn.__code__.co_names)
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=False))
    for name in names + list(cells):
        try:
            obj = cells[name].cell_contents if name in cells else fn.__globals__.get(name)
        except ValueError:  # an empty cell
            continue
        if isinstance(obj, CheckpointedCall):
            obj = obj.fn
        if not inspect.isfunction(obj) or obj in seen or obj.__module__.split(".")[0] in ("numpy", "scipy", "zymo"):
            continue
        seen.add(obj)
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(obj)))
        except (OSError, TypeError, SyntaxError):
            raise ZymoUsageError(f"zymo.checkpoint({marked}) calls {obj.__qualname__}, whose source zymo cannot "
                                 "read to check what it writes") from None
        node = next(n for n in pyast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Lambda)))
        params = [a.arg for a in pyast.walk(node.args) if isinstance(a, ast.arg)]
        local = {n.id for n in pyast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        alias = _aliases(node, params)
        outside = sorted({alias.get(w, w) for w in _writes(node, params) if not w.endswith("+=")}
                         - set(params) - local)
        if outside:
            raise ZymoUsageError(f"zymo.checkpoint({marked}) calls {obj.__qualname__}, which writes into "
                                 f"{', '.join(outside)}, memory it does not create: the recomputation in the "
                                 "adjoint sweep would write it again. Pass the array as an argument, or do not mark "
                                 f"{marked}")
        _check_callees(obj, marked, seen)


def _writes(node: ast.AST, params: list[str]) -> set[str]:
    """The names whose memory `node` writes (`x[...] = `, `out=x`, `x.fill()`, `np.copyto(x, ...)`);
    "p+=" for an augmented assignment to parameter p."""
    writes: set[str] = set()
    for n in pyast.walk(node):
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                writes |= {_root(s.value) for s in pyast.walk(t) if isinstance(s, ast.Subscript)
                           and isinstance(s.ctx, ast.Store)}
            if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and n.target.id in params:
                writes.add(n.target.id + "+=")
        elif isinstance(n, ast.Call):
            writes |= {_root(kw.value) for kw in n.keywords if kw.arg == "out"}
            if isinstance(n.func, ast.Attribute) and n.func.attr in _INPLACE_METHODS:
                writes.add(_root(n.func.value))
            if isinstance(n.func, (ast.Attribute, ast.Name)) and _name(n.func) == "copyto" and n.args:
                writes.add(_root(n.args[0]))
    return writes


def _aliases(node: ast.AST, params: list[str]) -> dict[str, str]:
    """Local names bound to a view of a parameter (`v = u[1:-1]`, `w = u.reshape(...)`, `t = u.T`):
    name -> the parameter, so that a write through them is a write into it."""
    out: dict[str, str] = {}
    for n in pyast.walk(node):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            v = n.value
            if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr in _VIEW_METHODS:
                v = v.func.value
            if isinstance(v, (ast.Name, ast.Subscript, ast.Attribute)):
                r = _root(v)
                r = out.get(r, r)
                if r in params:
                    out[n.targets[0].id] = r
    return out


def _name(e: ast.AST) -> str:
    return e.attr if isinstance(e, ast.Attribute) else e.id if isinstance(e, ast.Name) else ""


def _root(e: ast.AST) -> str:
    while isinstance(e, (ast.Subscript, ast.Attribute)):
        e = e.value
    return e.id if isinstance(e, ast.Name) else "?"


def checkpoint(fn: Callable) -> CheckpointedCall:
    """Mark `fn` to be recomputed in the adjoint sweep (see the module docstring)."""
    return CheckpointedCall(fn)


@contextlib.contextmanager
def recording() -> Iterator[list[tuple[str, int]]]:
    """Collect the descriptions of the checkpointed calls run inside (for `cache_report`)."""
    global _LOG
    saved, _LOG = _LOG, []
    try:
        yield _LOG
    finally:
        _LOG = saved


def report_lines(log: list[tuple[str, int]]) -> str:
    """The checkpointed calls of one measured run (`recording`), one line per function, for
    `cache_report`."""
    calls: dict[str, list[int]] = {}
    for name, kept in log:
        calls.setdefault(name, []).append(kept)
    return "".join(f"\ncheckpointed call {name}(): {len(b)} call{'s' if len(b) > 1 else ''} recomputed in the "
                   f"adjoint sweep, inputs saved: {sum(b)} bytes" for name, b in calls.items())
