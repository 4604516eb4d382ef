"""Rules for `numpy.linalg`: solve, inv, det, slogdet, cholesky, eigh, qr, svd,
svdvals, lstsq (matmul, dot and norm live in npmisc.py and reductions.py).

Contract: functions returning tuples (`slogdet`, `eigh`, `qr`, `svd`, `lstsq`)
declare `parts`; the frontend lowers `w, v = np.linalg.eigh(a)` to one op per
part (each recomputes the factorisation in its derivative; an unused part costs
nothing in reverse mode). The conditions under which each derivative exists are
in `runtime/linalg.py` and `docs/rules.md`; calls outside what is covered (eigh with
UPLO='U', qr modes other than 'reduced', svd with compute_uv=False or
hermitian=True) are refused at the user's line.
"""
from __future__ import annotations

import numpy as np

from .. import runtime as _rt
from .registry import Rule, const_value

_WC3 = ("wc", 3, 3)


class solve(Rule, key="numpy.linalg.solve", fn=np.linalg.solve, cases=(
        ("fn(x, y)", (_WC3, (3,))), ("fn(x, y)", (_WC3, (3, 2))), ("fn(x, y)", (("wc", 2, 3, 3), (2, 3, 2))),
        ("fn(x, x[0])", (_WC3,)), ("fn(x, y)", (("wc", 2, 3, 3), (3,))), ("fn(x, y)", (("wc", 3, 3, 3), (3,))))):
    def jvp_a(t, ans, a, b): return _rt.solve_jvp_a(t, ans, a)
    def jvp_b(t, ans, a, b): return np.linalg.solve(a, t)
    def vjp_a(g, ans, a, b): return _rt.solve_vjp_a(g, ans, a)
    def vjp_b(g, ans, a, b): return _rt.unbroadcast(_rt.solve_vjp_b(g, a), b)


class inv(Rule, key="numpy.linalg.inv", fn=np.linalg.inv, cases=(
        ("fn(x)", (_WC3,)), ("fn(x)", (("wc", 2, 3, 3),)), ("fn(x) @ x[0]", (_WC3,)))):
    def jvp_a(t, ans, a): return -ans @ t @ ans
    def vjp_a(g, ans, a): return -_rt.mT(ans) @ g @ _rt.mT(ans)


class det(Rule, key="numpy.linalg.det", fn=np.linalg.det, cases=(
        ("fn(x)", (_WC3,)), ("fn(x)", (("wc", 2, 3, 3),)), ("fn(x * y)", (_WC3, ())))):
    def jvp_a(t, ans, a): return np.trace(_rt.mT(_rt.det_vjp(1.0, ans, a)) @ t, axis1=-2, axis2=-1)
    def vjp_a(g, ans, a): return _rt.det_vjp(g, ans, a)


class slogdet(Rule, key="numpy.linalg.slogdet", fn=np.linalg.slogdet,
              parts=("numpy.linalg.slogdet.sign", "numpy.linalg.slogdet.logabsdet"), cases=(
        ("fn(x)[1]", (_WC3,)), ("s, l = fn(x)\nreturn s * l", (("wc", 2, 3, 3),)))):
    """(sign, log|det|): the sign has derivative zero."""


class slogdet_sign(Rule, key="numpy.linalg.slogdet.sign", fn=_rt.slogdet_sign, call="_rt.slogdet_sign",
                   nondiff=True, part_of="numpy.linalg.slogdet"):
    pass


class slogdet_logabsdet(Rule, key="numpy.linalg.slogdet.logabsdet", fn=_rt.slogdet_logabsdet,
                        call="_rt.slogdet_logabsdet", part_of="numpy.linalg.slogdet"):
    def jvp_a(t, ans, a): return np.trace(np.linalg.solve(a, t), axis1=-2, axis2=-1)
    def vjp_a(g, ans, a): return _rt.logdet_vjp(g, a)


class cholesky(Rule, key="numpy.linalg.cholesky", fn=np.linalg.cholesky, cases=(
        ("fn(x)", (("spd", 3),)), ("fn(x @ x.T + 3.0 * np.eye(3))", ((3, 3),)), ("fn(x)", (("spd", 1),)))):
    """NumPy reads the lower triangle: the adjoint is lower-triangular."""
    def jvp_a(t, ans, a): return _rt.cholesky_jvp(t, ans)
    def vjp_a(g, ans, a): return _rt.cholesky_vjp(g, ans)

    @classmethod
    def check(cls, pos, kw):
        if kw.get("upper") is not None and const_value(kw["upper"]) is not False:
            return "np.linalg.cholesky(upper=True) is not supported; transpose the lower factor"
        return None


class eigh(Rule, key="numpy.linalg.eigh", fn=np.linalg.eigh,
           parts=("numpy.linalg.eigh.eigenvalues", "numpy.linalg.eigh.eigenvectors"), cases=(
        ("fn(x)[0]", (("sym", 4),)), ("fn(x)[1] * y", (("sym", 4), (4, 4))),
        ("w, v = fn(x)\nreturn w * y + v[0] * v[1]", (("sym", 3), (3,))))):
    """Reads the lower triangle (UPLO='L'); eigenvectors need distinct eigenvalues."""

    @classmethod
    def check(cls, pos, kw):
        uplo = kw.get("UPLO", pos[1] if len(pos) > 1 else "L")
        if const_value(uplo) != "L":
            return "np.linalg.eigh with UPLO other than 'L' is not supported"
        return None


class eigh_w(Rule, key="numpy.linalg.eigh.eigenvalues", fn=_rt.eigh_w, call="_rt.eigh_w",
             part_of="numpy.linalg.eigh"):
    def jvp_a(t, ans, a): return _rt.eigh_jvp(t, a, 0)
    def vjp_a(g, ans, a): return _rt.eigh_vjp(g, a, 0)


class eigh_v(Rule, key="numpy.linalg.eigh.eigenvectors", fn=_rt.eigh_v, call="_rt.eigh_v",
             part_of="numpy.linalg.eigh"):
    def jvp_a(t, ans, a): return _rt.eigh_jvp(t, a, 1)
    def vjp_a(g, ans, a): return _rt.eigh_vjp(g, a, 1)


class qr(Rule, key="numpy.linalg.qr", fn=np.linalg.qr, parts=("numpy.linalg.qr.q", "numpy.linalg.qr.r"), cases=(
        ("fn(x)[0] * y", (("wc", 4, 3), (4, 3))), ("fn(x)[1] * y", (("wc", 4, 3), (3, 3))),
        ("q, r = fn(x)\nreturn q * y + r", (_WC3, (3, 3))))):
    """Reduced mode, at least as many rows as columns, full column rank."""

    @classmethod
    def check(cls, pos, kw):
        mode = kw.get("mode", pos[1] if len(pos) > 1 else "reduced")
        if const_value(mode) != "reduced":
            return "np.linalg.qr is differentiable in mode='reduced' only"
        return None


class qr_q(Rule, key="numpy.linalg.qr.q", fn=_rt.qr_q, call="_rt.qr_q", part_of="numpy.linalg.qr"):
    def jvp_a(t, ans, a): return _rt.qr_jvp(t, a, 0)
    def vjp_a(g, ans, a): return _rt.qr_vjp(g, a, 0)


class qr_r(Rule, key="numpy.linalg.qr.r", fn=_rt.qr_r, call="_rt.qr_r", part_of="numpy.linalg.qr"):
    def jvp_a(t, ans, a): return _rt.qr_jvp(t, a, 1)
    def vjp_a(g, ans, a): return _rt.qr_vjp(g, a, 1)


class svd(Rule, key="numpy.linalg.svd", fn=np.linalg.svd,
          parts=("numpy.linalg.svd.u", "numpy.linalg.svd.s", "numpy.linalg.svd.vh"), cases=(
        ("fn(x, full_matrices=False)[1]", (("wc", 4, 3),)), ("fn(x, full_matrices=False)[0] * y", (("wc", 4, 3), (4, 3))),
        ("fn(x, full_matrices=False)[2] * y", (("wc", 4, 3), (3, 3))),
        ("fn(x, full_matrices=False)[2] * y", (("wc", 3, 4), (3, 4))),
        ("u, s, vh = fn(x)\nreturn u * y + s + vh", (_WC3, (3, 3))))):
    """Singular vectors need distinct nonzero singular values and full_matrices=False
    (or a square matrix)."""

    @classmethod
    def check(cls, pos, kw):
        names = ("a", "full_matrices", "compute_uv", "hermitian")
        args = dict(zip(names, pos), **kw)
        if const_value(args.get("compute_uv", True)) is not True:
            return "np.linalg.svd(compute_uv=False) is not supported here: use np.linalg.svdvals"
        if const_value(args.get("hermitian", False)) is not False:
            return "np.linalg.svd(hermitian=True) is not supported"
        return None


_SVD = dict(part_of="numpy.linalg.svd")


class svd_u(Rule, key="numpy.linalg.svd.u", fn=_rt.svd_u, call="_rt.svd_u", **_SVD):
    def jvp_a(t, ans, a, full_matrices=True): return _rt.svd_jvp(t, a, 0, full_matrices)
    def vjp_a(g, ans, a, full_matrices=True): return _rt.svd_vjp(g, a, 0, full_matrices)


class svd_s(Rule, key="numpy.linalg.svd.s", fn=_rt.svd_s, call="_rt.svd_s", **_SVD):
    def jvp_a(t, ans, a, full_matrices=True): return _rt.svd_jvp(t, a, 1, full_matrices)
    def vjp_a(g, ans, a, full_matrices=True): return _rt.svd_vjp(g, a, 1, full_matrices)


class svd_vh(Rule, key="numpy.linalg.svd.vh", fn=_rt.svd_vh, call="_rt.svd_vh", **_SVD):
    def jvp_a(t, ans, a, full_matrices=True): return _rt.svd_jvp(t, a, 2, full_matrices)
    def vjp_a(g, ans, a, full_matrices=True): return _rt.svd_vjp(g, a, 2, full_matrices)


class svdvals(Rule, key="numpy.linalg.svdvals", fn=np.linalg.svdvals, cases=(
        ("fn(x)", (("wc", 4, 3),)), ("fn(x)", (("wc", 2, 3, 4),)))):
    def jvp_a(t, ans, a): return _rt.svd_jvp(t, a, 1, False)
    def vjp_a(g, ans, a): return _rt.svd_vjp(g, a, 1, False)


class lstsq(Rule, key="numpy.linalg.lstsq", fn=np.linalg.lstsq, parts=(
        "numpy.linalg.lstsq.x", "numpy.linalg.lstsq.residuals", "numpy.linalg.lstsq.rank",
        "numpy.linalg.lstsq.sv"), cases=(
        ("fn(x, y)[0]", (("wc", 5, 3), (5,))), ("fn(x, y, rcond=None)[0]", (("wc", 5, 3), (5, 2))),
        ("fn(x, y)[1]", (("wc", 5, 3), (5,))), ("fn(x, y)[1]", (("wc", 5, 3), (5, 2))),
        ("x_, res, rank, sv = fn(x, y)\nreturn x_ * rank + sv", (("wc", 5, 3), (5,))),
        ("fn(x, y)[0]", (("wc", 3, 5), (3,))), ("fn(x, y, 1e-10)[0]", (("wc", 3, 5), (3, 2))))):
    """Full rank (full column rank, or full row rank: the minimum-norm solution); residuals
    need more rows than columns (elsewhere NumPy's are empty, and so is their derivative)."""


_LS = dict(part_of="numpy.linalg.lstsq")


class lstsq_x(Rule, key="numpy.linalg.lstsq.x", fn=_rt.lstsq_x, call="_rt.lstsq_x", **_LS):
    def jvp_a(t, ans, a, b, rcond=None): return _rt.lstsq_jvp(t, None, a, b, 0, rcond)
    def jvp_b(t, ans, a, b, rcond=None): return _rt.lstsq_jvp(None, t, a, b, 0, rcond)
    def vjp_a(g, ans, a, b, rcond=None): return _rt.lstsq_vjp(g, a, b, 0, 0, rcond)
    def vjp_b(g, ans, a, b, rcond=None): return _rt.lstsq_vjp(g, a, b, 0, 1, rcond)


class lstsq_residuals(Rule, key="numpy.linalg.lstsq.residuals", fn=_rt.lstsq_residuals,
                      call="_rt.lstsq_residuals", **_LS):
    def jvp_a(t, ans, a, b, rcond=None): return _rt.lstsq_jvp(t, None, a, b, 1, rcond)
    def jvp_b(t, ans, a, b, rcond=None): return _rt.lstsq_jvp(None, t, a, b, 1, rcond)
    def vjp_a(g, ans, a, b, rcond=None): return _rt.lstsq_vjp(g, a, b, 1, 0, rcond)
    def vjp_b(g, ans, a, b, rcond=None): return _rt.lstsq_vjp(g, a, b, 1, 1, rcond)


class lstsq_rank(Rule, key="numpy.linalg.lstsq.rank", fn=_rt.lstsq_rank, call="_rt.lstsq_rank", nondiff=True,
                 **_LS):
    pass


class lstsq_sv(Rule, key="numpy.linalg.lstsq.sv", fn=_rt.lstsq_sv, call="_rt.lstsq_sv", **_LS):
    def jvp_a(t, ans, a, b, rcond=None): return _rt.svd_jvp(t, a, 1, False)
    def vjp_a(g, ans, a, b, rcond=None): return _rt.svd_vjp(g, a, 1, False)
