"""Rules of `scipy.signal.convolve` and `scipy.signal.correlate` (1-d).

Registered lazily: importing `scipy.signal` takes about a second, so this module is imported
only when the frontend meets a callable of `scipy.signal` (`registry.LAZY`), or by
`zymo.rules.load_all()`.
"""
from __future__ import annotations

import scipy.signal as _ss

from .. import runtime as _rt  # names used by inlined rule bodies
from .arrays import _conv_check
from .registry import Rule


class sp_convolve(Rule, key="scipy.signal.convolve", fn=_ss.convolve, call="_rt.sp_convolve", cases=(
        ("fn(x, y)", ((5,), (3,))), ("fn(x, y, 'same')", ((5,), (3,))), ("fn(x, y, mode='same')", ((2,), (5,))),
        ("fn(x, y, mode='valid', method='direct')", ((5,), (3,))), ("fn(in1=x, in2=y, method='fft')", ((4,), (3,))))):
    """1-d; `method=` does not change the derivative (computed directly)."""
    def jvp_in1(t, ans, in1, in2, mode="full", method="auto"): return _rt.sp_convolve(t, in2, mode, method)
    def jvp_in2(t, ans, in1, in2, mode="full", method="auto"): return _rt.sp_convolve(in1, t, mode, method)
    def vjp_in1(g, ans, in1, in2, mode="full", method="auto"):
        return _rt.conv_vjp(g, in1, in2, mode, 0, "scipy.signal.convolve")
    def vjp_in2(g, ans, in1, in2, mode="full", method="auto"):
        return _rt.conv_vjp(g, in1, in2, mode, 1, "scipy.signal.convolve")

    @classmethod
    def check(cls, pos, kw):
        return _conv_check(pos, kw, "scipy.signal.convolve", ("in1", "in2"), "full", methods=True)


class sp_correlate(Rule, key="scipy.signal.correlate", fn=_ss.correlate, call="_rt.sp_correlate",
                   cases=(
        ("fn(x, y)", ((5,), (3,))), ("fn(x, y, 'same')", ((5,), (3,))), ("fn(x, y, mode='same')", ((2,), (5,))),
        ("fn(x, y, mode='valid', method='direct')", ((5,), (3,))), ("fn(in1=x, in2=y)", ((3,), (4,))))):
    """1-d; `method=` does not change the derivative (computed directly)."""
    def jvp_in1(t, ans, in1, in2, mode="full", method="auto"): return _rt.sp_correlate(t, in2, mode, method)
    def jvp_in2(t, ans, in1, in2, mode="full", method="auto"): return _rt.sp_correlate(in1, t, mode, method)
    def vjp_in1(g, ans, in1, in2, mode="full", method="auto"):
        return _rt.conv_vjp(g, in1, in2, mode, 0, "scipy.signal.correlate")
    def vjp_in2(g, ans, in1, in2, mode="full", method="auto"):
        return _rt.conv_vjp(g, in1, in2, mode, 1, "scipy.signal.correlate")

    @classmethod
    def check(cls, pos, kw):
        return _conv_check(pos, kw, "scipy.signal.correlate", ("in1", "in2"), "full", methods=True)
