"""Primitives the frontend introduces itself (not names a user calls)."""
from __future__ import annotations

from . import runtime as _rt
from .registry import Rule


def _dim(x, k):
    return x.shape[k]


def _or(a, b):
    return a or b


def _and(a, b):
    return a and b


class dim(Rule, key="zymo.dim", fn=_dim, template="{0}.shape[{1}]", nondiff=True): pass
class or_(Rule, key="zymo.or", fn=_or, template="({0} or {1})", nondiff=True): pass
class and_(Rule, key="zymo.and", fn=_and, template="({0} and {1})", nondiff=True): pass
class trip(Rule, key="zymo.trip", fn=_rt.trip, call="_rt.trip", nondiff=True): pass
class check_bound(Rule, key="zymo.check_bound", fn=_rt.check_bound, call="_rt.check_bound", nondiff=True): pass
