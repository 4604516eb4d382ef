"""Where rule cases draw their inputs: domains per primitive, and arguments described by kind.

Contract: `DOMAINS` (primitive name, the key's last part or the whole key -> one `Domain`
per argument) and a rule's own `domains` keep inputs where finite differences are
meaningful: log and sqrt positive, arcsin in (-1, 1), division by values away from zero,
floor and round away from their jumps, max/min of distinct elements, comparisons and
min/max of separated pairs (`SEPARATED`). `draw_inputs(key, shapes, dtype, rng)` draws one
input per shape; `_special_arg` builds the arguments cases describe by kind ("spd", "wc",
"int", ...).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

# -- domains ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Domain:
    """Where an argument is drawn from: uniform in [lo, hi]; `signed`: |x| in [lo, hi]
    with a random sign; `offint`: away from integers and half-integers (floor, round);
    `distinct`: elements at least 0.2 apart (max/min: no ties, no switch under a small step)."""

    lo: float
    hi: float
    signed: bool = False
    offint: bool = False
    distinct: bool = False

    def sample(self, rng: np.random.Generator, shape: Any, dtype: str) -> Any:
        """Values of `shape` (`()`: a float or NumPy float scalar; `ZERO_D`: a 0-d array) and `dtype`."""
        size = () if shape == ZERO_D else shape
        x = rng.uniform(self.lo, self.hi, size=size)
        if self.signed:
            x = x * rng.choice([-1.0, 1.0], size=size)
        if self.offint:
            x = np.floor(x) + rng.choice([0.15, 0.3, 0.65, 0.8], size=size) + rng.uniform(-0.05, 0.05, size=size)
        if self.distinct and np.size(x) > 1:
            k = np.size(x)
            x = self.lo + (self.hi - self.lo) * (rng.permutation(k) + 0.5) / k
            x = (x + rng.uniform(-0.05, 0.05, size=k) * (self.hi - self.lo) / k).reshape(size)
        if shape == ():
            return np.float32(x) if dtype == "float32" else float(x)
        return np.asarray(x, dtype=dtype)


ZERO_D = "0d"  # the shape of a 0-d array in rule cases (() is a scalar)
ANY = Domain(-2.0, 2.0)
POS = Domain(0.2, 3.0)
NONZERO = Domain(0.3, 2.0, signed=True)
OFFINT = Domain(-2.5, 2.5, offint=True)

# primitive name (the key's last part, or the whole key) -> one domain per argument
DOMAINS: dict[str, tuple[Domain, ...]] = {
    "log": (POS,), "log2": (POS,), "log10": (POS,), "sqrt": (POS,), "log1p": (Domain(-0.5, 2.0),),
    "asin": (Domain(-0.9, 0.9),), "acos": (Domain(-0.9, 0.9),), "tan": (Domain(-1.2, 1.2),),
    "abs": (NONZERO,), "fabs": (NONZERO,), "absolute": (NONZERO,), "sign": (NONZERO,),
    "truediv": (ANY, NONZERO), "divide": (ANY, NONZERO), "fdiv": (ANY, NONZERO),
    "fpow": (Domain(0.3, 2.0), Domain(-1.5, 2.5)),
    "mod": (Domain(2.6, 3.9), Domain(2.0, 2.5)),  # x / y in (1.04, 1.95): x // y == 1, no jump
    "floordiv": (Domain(2.6, 3.9), Domain(2.0, 2.5)),
    "pow": (Domain(0.3, 2.0), Domain(-1.5, 2.5)), "power": (Domain(0.3, 2.0), Domain(-1.5, 2.5)),
    "atan2": (NONZERO, ANY),  # y away from 0: no branch cut
    "hypot": (NONZERO, NONZERO),
    "floor": (OFFINT,), "ceil": (OFFINT,), "trunc": (OFFINT,), "round": (OFFINT,), "int": (OFFINT,),
    "bool": (NONZERO,),
    "arcsin": (Domain(-0.9, 0.9),), "arccos": (Domain(-0.9, 0.9),), "arctanh": (Domain(-0.8, 0.8),),
    "arccosh": (Domain(1.2, 3.0),), "cbrt": (NONZERO,), "reciprocal": (NONZERO,),
    "fmod": (Domain(2.6, 3.9), Domain(2.0, 2.5)), "remainder": (Domain(2.6, 3.9), Domain(2.0, 2.5)),
    "float_power": (Domain(0.3, 2.0), Domain(-1.5, 2.5)), "arctan2": (NONZERO, ANY),
    "copysign": (NONZERO, NONZERO), "rint": (OFFINT,), "signbit": (NONZERO,), "around": (OFFINT,),
    "fix": (OFFINT,), "gammaln": (POS,), "digamma": (POS,), "logit": (Domain(0.05, 0.95),),
    "xlogy": (POS, POS), "tri": (Domain(0.3, 2.0, signed=True),),
    "clip": (Domain(-2.0, 2.0), Domain(-1.0, -0.3), Domain(0.3, 1.0)),
    "numpy.max": (Domain(-3.0, 3.0, distinct=True),), "numpy.min": (Domain(-3.0, 3.0, distinct=True),),
    "numpy.amax": (Domain(-3.0, 3.0, distinct=True),), "numpy.amin": (Domain(-3.0, 3.0, distinct=True),),
}
# primitives of two arguments with a jump where they are equal: the second is drawn
# at a distance in [0.3, 1.5] from the first
SEPARATED = {"min", "max", "lt", "le", "gt", "ge", "eq", "ne", "builtins.min", "builtins.max",
             "maximum", "minimum", "fmax", "fmin"}


def _domains(key: str, n: int) -> tuple[Domain, ...]:
    d = DOMAINS.get(key) or _declared_domains(key) or DOMAINS.get(key.split(".")[-1]) or ()
    return tuple(d[i] if i < len(d) else ANY for i in range(n))


def _declared_domains(key: str) -> tuple[Domain, ...]:
    """A rule's own `domains` (one `(lo, hi[, signed])` per argument: `rules/special.py`)."""
    from ..rules.registry import REGISTRY

    return tuple(Domain(*d) for d in getattr(REGISTRY.get(key), "domains", ()))


def draw_inputs(key: str, shapes: tuple, dtype: str, rng: np.random.Generator) -> tuple:
    """Inputs of `shapes` from the domains of `key`; dtype "mixed" alternates float32 and float64."""
    doms = _domains(key, len(shapes))
    dts = [("float32", "float64")[i % 2] if dtype == "mixed" else dtype for i in range(len(shapes))]
    out = [d.sample(rng, s, dt) for d, s, dt in zip(doms, shapes, dts)]
    if (key in SEPARATED or key.split(".")[-1] in SEPARATED) and len(out) == 2 and (
            shapes[0] != shapes[1] or shapes[0] == ZERO_D):
        # broadcasting operands: redraw the second until every broadcast pair is 0.3 apart
        for _ in range(1000):
            gap = np.abs(np.asarray(out[0], np.float64) - np.asarray(out[1], np.float64))
            if np.all(gap >= 0.3):
                return tuple(out)
            out[1] = doms[1].sample(rng, shapes[1], dts[1])
        raise ValueError(f"{key}: cannot draw separated operands of shapes {shapes}")
    if (key in SEPARATED or key.split(".")[-1] in SEPARATED) and len(out) == 2:
        if shapes[0] != shapes[1] or shapes[0] == ZERO_D:
            raise ValueError(f"{key}: separated pairs need arguments of one shape, not {shapes}")
        x = np.asarray(out[0], dtype=np.float64)
        y = x + rng.uniform(0.3, 1.5, size=shapes[0]) * rng.choice([-1.0, 1.0], size=shapes[0])
        out[1] = (np.float32(y) if dts[1] == "float32" else float(y)) if shapes[1] == () else y.astype(dts[1])
    return tuple(out)



def _special_arg(spec: tuple, dtype: str, rng: np.random.Generator) -> Any:
    """Arguments rule cases describe by kind rather than shape:
    ("spd", n) symmetric positive definite; ("sym", n) symmetric with eigenvalues at least
    0.5 apart; ("wc", *shape) matrices (or stacks) with singular values in [1, 2], distinct;
    ("tril", n)/("triu", n) well-conditioned triangular; ("int", shape, lo, hi) and
    ("bool", shape) non-differentiable arrays; ("const", value) the value itself."""
    kind = spec[0]

    def ortho(n):
        q, r = np.linalg.qr(rng.normal(size=(n, n)))
        return q * np.sign(np.diag(r))

    if kind == "const":
        return spec[1]
    if kind == "withzero":
        a = rng.uniform(-2.0, 2.0, size=spec[1])
        a.flat[1] = 0.0
        return a.astype(dtype)
    if kind == "int":
        return rng.integers(spec[2], spec[3], size=spec[1])
    if kind == "bool":
        return rng.uniform(size=spec[1]) < 0.5
    if kind == "spd":
        n = spec[1]
        q = ortho(n)
        a = (q * rng.uniform(1.0, 3.0, size=n)) @ q.T
    elif kind == "sym":
        n = spec[1]
        q = ortho(n)
        ev = np.linspace(-1.5, 1.5, n) + rng.uniform(-0.1, 0.1, size=n)
        a = (q * ev) @ q.T
    elif kind == "wc":
        *batch, m, n = spec[1:]
        mats = []
        for _ in range(int(np.prod(batch)) if batch else 1):
            k = min(m, n)
            s = np.linspace(2.0, 1.0, k) + rng.uniform(-0.05, 0.05, size=k)
            u, v = ortho(m)[:, :k], ortho(n)[:, :k]
            mats.append((u * s) @ v.T)
        a = np.array(mats).reshape(*batch, m, n)
    elif kind in ("tril", "triu"):
        n = spec[1]
        a = rng.uniform(-0.5, 0.5, size=(n, n)) + np.diag(rng.uniform(1.0, 2.0, size=n) * rng.choice([-1, 1], n))
        a = np.tril(a) if kind == "tril" else np.triu(a)
    else:
        raise ValueError(f"unknown argument spec {spec!r}")
    return a.astype(dtype)


def _spec_id(spec: Any) -> str:
    if isinstance(spec, tuple) and spec and isinstance(spec[0], str):
        if spec[0] == "const":
            return repr(spec[1]).replace(" ", "")
        rest = [x for x in spec[1:] if not isinstance(x, tuple)] + [y for x in spec[1:] if isinstance(x, tuple)
                                                                     for y in x]
        return spec[0] + "x".join(map(str, rest))
    return _shape_id((spec,))


def _shape_id(shapes: tuple) -> str:
    return ",".join(s if s == ZERO_D else ("x".join(map(str, s)) or "s") for s in shapes)
