"""Helpers of the linear-algebra rules (generated code calls them as `_rt.<name>`;
`zymo.runtime` re-exports them).

Contract: pure functions of NumPy arrays; the last two axes are the matrix axes
and leading axes batch, unless a docstring says "2-d". Functions that NumPy
computes from one triangle of a symmetric matrix (`cholesky`, `eigh`) have
adjoints that are lower-triangular: they are exact derivatives of what NumPy
computes, which reads `tril(a)` only. Conditions (where the derivative exists):
`solve`, `inv`, `slogdet`, `cholesky` need a nonsingular (for cholesky
positive definite) matrix (`det` does not: its adjoint is the adjugate's); `eigh`
distinct eigenvalues when eigenvectors are used; `svd` distinct nonzero singular
values when singular vectors are used, and `full_matrices=False` (or a square
matrix); `qr` the reduced mode of a matrix with at least as many rows as columns
and full column rank (a wide one is refused at run time); `lstsq` full rank (full
column rank, or full row rank: the minimum-norm solution; a rank-deficient matrix is
refused at run time), its residuals more rows than columns (else they are empty and
so is their derivative). `solve(a, b)` with a 1-d `b` and a stack `a` solves every
matrix for that vector (NumPy >= 2): the solution and its adjoints are a vector per
matrix (`_vec_rhs`).
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .core import unbroadcast

__all__ = [
    "mT", "mv", "solve_jvp_a", "solve_vjp_a", "solve_vjp_b", "det_vjp", "det_solve", "logdet_vjp",
    "slogdet_sign", "slogdet_logabsdet",
    "cholesky_jvp", "cholesky_vjp", "eigh_w", "eigh_v", "eigh_jvp", "eigh_vjp", "qr_q", "qr_r", "qr_jvp", "qr_vjp",
    "svd_u", "svd_s", "svd_vh", "svd_jvp", "svd_vjp", "lstsq_x", "lstsq_residuals", "lstsq_rank", "lstsq_sv",
    "lstsq_jvp", "lstsq_vjp", "expm_frechet", "triangle", "tri_solve_vjp_a", "cho_factor_c", "cho_factor_lower",
    "cho_factor_jvp", "cho_factor_vjp", "cho_solve", "cho_solve_jvp_c", "cho_solve_vjp_c", "lu_factor_lu",
    "lu_factor_piv", "lu_factor_jvp", "lu_factor_vjp", "lu_solve", "lu_solve_jvp_lu", "lu_solve_vjp_lu",
    "blas_ready", "tri_mask", "tri_dot", "tri_dot_add", "sym_add", "sym_set", "sym2_add", "product_copy", "dot_nt",
]


def _refuse(message, why, hint):
    """Raise zymo's refusal of a derivative that does not exist (or is not supported) at
    these values, found at run time."""
    from ..errors import UnsupportedCall

    raise UnsupportedCall(message, why=why, hint=hint)


def mT(a):
    """The transpose of the last two axes."""
    return np.swapaxes(a, -1, -2)


def _sym_lower(t):
    """The symmetric matrix NumPy's cholesky/eigh see when given `t`: its lower triangle mirrored."""
    return np.tril(t) + mT(np.tril(t, -1))


def _to_lower(s):
    """Adjoint of `_sym_lower`: the adjoint with respect to the matrix actually passed."""
    return np.tril(s) + np.tril(mT(s), -1)


# -- solve, inv, det ---------------------------------------------------------------------------


def _vec_rhs(x, a):
    """Whether `x` (a solution, or its tangent or adjoint) of `solve(a, b)` is of a 1-d `b`:
    NumPy (>= 2) takes a 1-d `b` as one vector for every matrix of the stack `a`, and the
    solution then has `a`'s shape less its last axis (a matrix `b` gives at least `a`'s ndim)."""
    return np.ndim(x) == np.ndim(a) - 1


def mv(m, v):
    """`m @ v`, with `v` a vector per matrix of the stack `m` where it has `m`'s ndim less one
    (the solution of `solve(a, b)` for a 1-d `b`; NumPy's matmul would take a 2-d `v` as one
    matrix). Second order of solve's adjoints (`rules/runtime_rules.py`) calls it."""
    if np.ndim(v) == np.ndim(m) - 1 and np.ndim(v) > 1:
        return (m @ np.asarray(v)[..., None])[..., 0]
    return m @ v


def _solve_vec(a, v):
    """`solve(a, v)` for `v` a vector per matrix of `a` (`v` of `a`'s shape less its last axis)."""
    if np.ndim(v) == 1:
        return np.linalg.solve(a, v)
    return np.linalg.solve(a, np.asarray(v)[..., None])[..., 0]


def solve_jvp_a(t, ans, a):
    """Tangent of `ans = solve(a, b)` along the tangent `t` of `a`: `-solve(a, t @ ans)`, with
    `ans` a vector per matrix where `b` is 1-d."""
    if _vec_rhs(ans, a):
        return -_solve_vec(a, (t @ np.asarray(ans)[..., None])[..., 0])
    return -np.linalg.solve(a, t @ ans)


def solve_vjp_b(g, a):
    """`solve(a^T, g)`: the adjoint of `b` in `solve(a, b)` before it is summed to `b`'s shape."""
    if _vec_rhs(g, a):
        return _solve_vec(mT(a), g)
    return np.linalg.solve(mT(a), g)


def solve_vjp_a(g, sol, a):
    """Adjoint of `a` in `sol = solve(a, b)`."""
    gb = solve_vjp_b(g, a)
    if np.ndim(sol) == 1:
        return -np.outer(gb, sol)
    if _vec_rhs(sol, a):
        return -(gb[..., :, None] * np.asarray(sol)[..., None, :])
    return unbroadcast(-(gb @ mT(sol)), a)


def det_vjp(g, d, a):
    """Adjoint of `a` in `d = det(a)`: `g d inv(a)^T`, which is `g adj(a)^T`; at a singular `a`
    (where `d`, its determinant, is 0 and `inv` fails) the adjugate itself (`_adjugate_t`)."""
    try:
        inv = np.linalg.inv(a)
    except np.linalg.LinAlgError:
        return np.asarray(g)[..., None, None] * _adjugate_t(a)
    return (np.asarray(g * d)[..., None, None]) * mT(inv)


def det_solve(a, t):
    """`solve(a, t)` for the second order of `det` (`rules/runtime_rules.py`'s `det_vjp`): at a
    singular `a`, where the gradient is the adjugate's (`det_vjp`), its own derivative is not
    supported, and this refuses clearly rather than let LAPACK's LinAlgError through."""
    try:
        return np.linalg.solve(a, t)
    except np.linalg.LinAlgError:
        _refuse("the second derivative of np.linalg.det at a singular matrix is not supported",
                "zymo's gradient of det there is the adjugate's (from the SVD); the Hessian's formula "
                "needs the inverse", "evaluate the Hessian at a nonsingular matrix")


def _adjugate_t(a):
    """The transpose of the adjugate of `a` (the derivative of `det(a)`), from the SVD
    `a = u diag(s) vh`: `det(u) det(vh) u diag(c) vh` with `c_i` the product of the other
    singular values (no division: defined at a singular `a` too)."""
    u, s, vh = np.linalg.svd(a)
    ones = np.ones(s.shape[:-1] + (1,), dtype=s.dtype)
    before = np.cumprod(np.concatenate([ones, s[..., :-1]], axis=-1), axis=-1)
    after = np.cumprod(np.concatenate([ones, s[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
    sign = np.linalg.det(u) * np.linalg.det(vh)
    return np.asarray(sign)[..., None, None] * ((u * (before * after)[..., None, :]) @ vh)


def logdet_vjp(g, a):
    return np.asarray(g)[..., None, None] * mT(np.linalg.inv(a))


def slogdet_sign(a):
    return np.linalg.slogdet(a)[0]


def slogdet_logabsdet(a):
    return np.linalg.slogdet(a)[1]


# -- cholesky ----------------------------------------------------------------------------------


def _phi(x):
    """Lower triangle with the diagonal halved."""
    return np.tril(x) - 0.5 * np.eye(x.shape[-1], dtype=x.dtype) * x


def cholesky_jvp(t, ans):
    linv = np.linalg.inv(ans)
    x = linv @ _sym_lower(t) @ mT(linv)
    return ans @ _phi(x)


def cholesky_vjp(g, l):
    """Adjoint of `a` in `l = cholesky(a)` (lower-triangular)."""
    linv = np.linalg.inv(l)
    s = mT(linv) @ _phi(mT(l) @ g) @ linv
    return _to_lower(s)


# -- eigh ----------------------------------------------------------------------------------------


def eigh_w(a):
    return np.linalg.eigh(a)[0]


def eigh_v(a):
    return np.linalg.eigh(a)[1]


def _gaps(w):
    """F[i, j] = 1 / (w[j] - w[i]) off the diagonal, 0 on it."""
    d = w[..., None, :] - w[..., :, None]
    n = w.shape[-1]
    eye = np.eye(n, dtype=bool)
    return np.where(eye, 0.0, 1.0 / np.where(eye, 1.0, d)).astype(w.dtype)


def eigh_jvp(t, a, part):
    w, v = np.linalg.eigh(a)
    p = mT(v) @ _sym_lower(t) @ v
    if part == 0:
        return np.diagonal(p, axis1=-2, axis2=-1).copy()
    return v @ (_gaps(w) * p)


def eigh_vjp(g, a, part):
    w, v = np.linalg.eigh(a)
    if part == 0:
        inner = np.asarray(g)[..., None, :] * np.eye(w.shape[-1], dtype=w.dtype)
    else:
        inner = _gaps(w) * (mT(v) @ g)
    return _to_lower(v @ inner @ mT(v))


# -- qr (reduced, m >= n) ------------------------------------------------------------------------


def qr_q(a):
    return np.linalg.qr(a)[0]


def qr_r(a):
    return np.linalg.qr(a)[1]


def _check_qr(a):
    if a.shape[-2] < a.shape[-1]:
        _refuse(f"the derivative of np.linalg.qr of a wide {a.shape[-2]}x{a.shape[-1]} matrix is not supported",
                "zymo differentiates QR of a matrix with at least as many rows as columns (full column rank)",
                "differentiate the QR of a.T instead, or of the square block a[:, :m] and solve for the rest")


def qr_jvp(t, a, part):
    _check_qr(a)
    q, r = np.linalg.qr(a)
    dx_rinv = mT(np.linalg.solve(mT(r), mT(t)))  # t @ inv(r)
    qt = mT(q) @ dx_rinv
    low = np.tril(qt, -1)
    do = low - mT(low)
    if part == 0:
        return q @ (do - qt) + dx_rinv
    return (qt - do) @ r


def qr_vjp(g, a, part):
    _check_qr(a)
    q, r = np.linalg.qr(a)
    gq = g if part == 0 else np.zeros_like(q)
    gr = g if part == 1 else np.zeros_like(r)
    m = r @ mT(gr) - mT(gq) @ q
    low = np.tril(m, -1)
    copyltu = low + mT(low) + np.eye(m.shape[-1], dtype=m.dtype) * m
    b = gq + q @ copyltu
    return mT(np.linalg.solve(r, mT(b)))  # b @ inv(r).T


# -- svd (reduced) -------------------------------------------------------------------------------


def svd_u(a, full_matrices=True):
    return np.linalg.svd(a, full_matrices=full_matrices)[0]


def svd_s(a, full_matrices=True):
    return np.linalg.svd(a, full_matrices=full_matrices)[1]


def svd_vh(a, full_matrices=True):
    return np.linalg.svd(a, full_matrices=full_matrices)[2]


def _svd_f(s):
    s2 = s * s
    return _gaps(s2)  # 1 / (s_j^2 - s_i^2)


def _check_reduced(a, full_matrices):
    if full_matrices and a.shape[-1] != a.shape[-2]:
        raise NotImplementedError("the derivative of np.linalg.svd of a non-square matrix needs "
                                  "full_matrices=False")


def svd_jvp(t, a, part, full_matrices=False):
    _check_reduced(a, full_matrices)
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    v = mT(vh)
    dp = mT(u) @ t @ v
    if part == 1:
        return np.diagonal(dp, axis1=-2, axis2=-1).copy()
    f = _svd_f(s)
    sm = s[..., None, :]  # multiplies columns: X * sm == X @ diag(s)
    sc = s[..., :, None]  # multiplies rows: sc * X == diag(s) @ X
    if part == 0:
        du = u @ (f * (dp * sm + sc * mT(dp)))
        m = a.shape[-2]
        if m > s.shape[-1]:
            du = du + (t @ v - u @ (mT(u) @ t @ v)) / sm
        return du
    dv = v @ (f * (sc * dp + mT(dp) * sm))
    n = a.shape[-1]
    if n > s.shape[-1]:
        dv = dv + (mT(t) @ u - v @ (mT(v) @ mT(t) @ u)) / sm
    return mT(dv)


def svd_vjp(g, a, part, full_matrices=False):
    _check_reduced(a, full_matrices)
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    v = mT(vh)
    k = s.shape[-1]
    if part == 1:
        return (u * np.asarray(g)[..., None, :]) @ vh
    f = _svd_f(s)
    sm = s[..., None, :]
    sc = s[..., :, None]
    if part == 0:
        gu = g
        inner = (f * (mT(u) @ gu - mT(gu) @ u)) * sm
        out = u @ inner @ vh
        if a.shape[-2] > k:
            out = out + ((gu - u @ (mT(u) @ gu)) / sm) @ vh
        return out
    gv = mT(g)
    inner = sc * (f * (mT(v) @ gv - mT(gv) @ v))
    out = u @ inner @ vh
    if a.shape[-1] > k:
        out = out + (u / sm) @ mT(gv - v @ (mT(v) @ gv))
    return out


# -- lstsq (full column rank) ----------------------------------------------------------------------


def lstsq_x(a, b, rcond=None):
    return np.linalg.lstsq(a, b, rcond=rcond)[0]


def lstsq_residuals(a, b, rcond=None):
    return np.linalg.lstsq(a, b, rcond=rcond)[1]


def lstsq_rank(a, b, rcond=None):
    return np.linalg.lstsq(a, b, rcond=rcond)[2]


def lstsq_sv(a, b, rcond=None):
    return np.linalg.lstsq(a, b, rcond=rcond)[3]


def _ls(a, b, rcond=None):
    """lstsq's solution and residual vector, after checking that `a` has full rank (where
    the solution is differentiable: the rank is what lstsq itself finds, with `rcond`)."""
    x, _, rank, _ = np.linalg.lstsq(a, b, rcond=rcond)
    if rank < min(a.shape):
        _refuse(f"the derivative of np.linalg.lstsq of a {a.shape[0]}x{a.shape[1]} matrix of rank {rank}"
                " does not exist",
                "a rank-deficient matrix's least-squares solution jumps as the matrix moves off it: zymo "
                "differentiates lstsq where `a` has full column rank (at least as many rows as columns) "
                "or full row rank (fewer rows: the minimum-norm solution)",
                "regularise the problem (e.g. solve (a.T @ a + lam * I) x = a.T @ b) or drop dependent columns")
    return x, b - a @ x


def _wide(a):
    return a.shape[0] < a.shape[1]


def _no_residuals(a, b, rcond):
    """Whether lstsq returns an empty residuals array (a square, wide or rank-deficient `a`):
    the derivative of that empty array is empty."""
    return a.shape[0] <= a.shape[1] or np.linalg.lstsq(a, b, rcond=rcond)[1].size == 0


def lstsq_jvp(ta, tb, a, b, part, rcond=None):
    """Tangent of lstsq's solution (part 0) or residuals (part 1) along ta (of a) and tb (of b).
    A tall `a` (full column rank): x = (a^T a)^-1 a^T b; a wide one (full row rank): the
    minimum-norm solution x = a^T (a a^T)^-1 b, whose tangent is
    a+ (tb - ta x) + (I - a+ a) ta^T y with y = (a a^T)^-1 b."""
    if part == 1 and _no_residuals(a, b, rcond):
        return np.zeros(0, dtype=np.result_type(a, b))  # NumPy's residuals are empty here
    x, r = _ls(a, b, rcond)
    ta = np.zeros_like(a) if ta is None else ta
    tb = np.zeros_like(b) if tb is None else tb
    if part == 0:
        if _wide(a):
            gram = a @ a.T
            y = np.linalg.solve(gram, b)
            w = ta.T @ y
            return a.T @ np.linalg.solve(gram, tb - ta @ x - a @ w) + w
        return np.linalg.solve(a.T @ a, ta.T @ r - a.T @ (ta @ x) + a.T @ tb)
    d = 2.0 * np.sum(r * (tb - ta @ x), axis=0)
    return np.reshape(d, (1,)) if np.ndim(b) == 1 else d


def lstsq_vjp(g, a, b, part, wrt, rcond=None):
    """Adjoint of lstsq's solution (part 0) or residuals (part 1) with respect to a (wrt 0) or b."""
    if part == 1 and _no_residuals(a, b, rcond):
        return np.zeros_like(a if wrt == 0 else b, dtype=np.result_type(a, b))  # empty residuals
    x, r = _ls(a, b, rcond)
    if part == 0:
        if _wide(a):
            # the transpose of the tangent above: with w = (a a^T)^-1 a g and y = (a a^T)^-1 b,
            # the adjoint of b is w, of a: -w x^T + y g^T - y w^T a
            gram = a @ a.T
            w = np.linalg.solve(gram, a @ g)
            if wrt == 1:
                return w
            y = np.linalg.solve(gram, b)
            if np.ndim(b) == 1:
                return -np.outer(w, x) + np.outer(y, g) - np.outer(y, w @ a)
            return -w @ x.T + y @ g.T - y @ (w.T @ a)
        z = np.linalg.solve(a.T @ a, g)
        if wrt == 1:
            return a @ z
        if np.ndim(b) == 1:
            return np.outer(r, z) - np.outer(a @ z, x)
        return r @ z.T - (a @ z) @ x.T
    rg = 2.0 * r * g
    if wrt == 1:
        return rg
    return -(np.outer(rg, x) if np.ndim(b) == 1 else rg @ x.T)


def expm_frechet(a, e):
    """The Fréchet derivative of the matrix exponential at `a` in direction `e` (2-d)."""
    import scipy.linalg

    n = a.shape[-1]
    big = np.zeros((2 * n, 2 * n), dtype=np.result_type(a, e))
    big[:n, :n] = a
    big[n:, n:] = a
    big[:n, n:] = e
    return scipy.linalg.expm(big)[:n, n:]


def triangle(x, lower):
    """The lower (or upper) triangle of `x`."""
    return np.tril(x) if lower else np.triu(x)


def tri_solve_vjp_a(g, ans, a, lower):
    """Adjoint of `a` in `scipy.linalg.solve_triangular(a, b, lower=lower)`: triangular."""
    import scipy.linalg

    gb = scipy.linalg.solve_triangular(a, g, trans=1, lower=lower)
    full = np.outer(gb, ans) if np.ndim(ans) == 1 else gb @ ans.T
    return -triangle(full, lower)


# -- scipy.linalg factor/solve pairs (rules/scipy_.py) ----------------------------------
def _outer_or_mat(y, x):
    """`y x^T` for vectors (an outer product) or matrices (right-hand sides in columns)."""
    return np.outer(y, x) if np.ndim(x) == 1 else y @ x.T


def cho_factor_c(a, lower=False, overwrite_a=False, check_finite=True):
    """The first element of `scipy.linalg.cho_factor(a, lower)`: the Cholesky factor in
    one triangle, `a`'s own entries in the other (SciPy leaves them: `clean=False`)."""
    import scipy.linalg

    return scipy.linalg.cho_factor(a, lower=lower, check_finite=check_finite)[0]


def cho_factor_lower(a, lower=False, overwrite_a=False, check_finite=True):
    """The second element of `scipy.linalg.cho_factor`: the `lower` flag."""
    return bool(lower)


def cho_factor_jvp(t, c, lower):
    """Tangent of `cho_factor_c`: the factor's (cholesky_jvp of the triangle that is read),
    and `t` itself in the other triangle."""
    if lower:
        return np.tril(cholesky_jvp(t, np.tril(c))) + np.triu(t, 1)
    return np.triu(cholesky_jvp(t.T, np.triu(c).T).T) + np.tril(t, -1)


def cho_factor_vjp(g, c, lower):
    """Adjoint of `a` in `cho_factor_c`: the factor's part reaches the triangle read."""
    if lower:
        return cholesky_vjp(np.tril(g), np.tril(c)) + np.triu(g, 1)
    return cholesky_vjp(np.triu(g).T, np.triu(c).T).T + np.tril(g, -1)


def cho_solve(c, lower, b, overwrite_b=False, check_finite=True):
    """`scipy.linalg.cho_solve((c, lower), b)` with the factor tuple unpacked."""
    import scipy.linalg

    return scipy.linalg.cho_solve((c, lower), b, check_finite=check_finite)


def _cho_tri(c, lower):
    return np.tril(c) if lower else np.triu(c)


def cho_solve_jvp_c(t, c, lower, ans):
    """Tangent of `x = A^-1 b`, `A = L L^T` (or `U^T U`), along the factor's tangent `t`
    (its unused triangle ignored): `-A^-1 dA x`."""
    f, df = _cho_tri(c, lower), _cho_tri(t, lower)
    da = df @ f.T + f @ df.T if lower else df.T @ f + f.T @ df
    return -cho_solve(c, lower, da @ ans)


def cho_solve_vjp_c(g, c, lower, ans):
    """Adjoint of the factor: with `gA = -A^-1 g x^T`, `tril((gA + gA^T) L)` (lower) or
    `triu(U (gA + gA^T))` (upper)."""
    ga = -_outer_or_mat(cho_solve(c, lower, g), ans)
    s = ga + ga.T
    return np.tril(s @ np.tril(c)) if lower else np.triu(np.triu(c) @ s)


def lu_factor_lu(a, overwrite_a=False, check_finite=True):
    """The first element of `scipy.linalg.lu_factor(a)`: L (unit diagonal, not stored)
    below the diagonal, U on and above it."""
    import scipy.linalg

    return scipy.linalg.lu_factor(a, check_finite=check_finite)[0]


def lu_factor_piv(a, overwrite_a=False, check_finite=True):
    """The second element of `scipy.linalg.lu_factor(a)`: LAPACK's row swaps, as int64."""
    import scipy.linalg

    return scipy.linalg.lu_factor(a, check_finite=check_finite)[1].astype(np.int64)


def _lu_perm(piv, n):
    """`perm` with `P^T M == M[perm]` for `A = P L U` (LAPACK's swaps applied in order)."""
    perm = np.arange(n)
    for i in range(len(piv)):
        j = piv[i]
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def _lu_parts(lu):
    n = lu.shape[0]
    return np.tril(lu, -1) + np.eye(n, dtype=lu.dtype), np.triu(lu)


def lu_factor_jvp(t, lu, piv):
    """Tangent of the packed factors: `F = L^-1 P^T dA U^-1`, `dL = L tril(F, -1)`,
    `dU = triu(F) U` (square `a`)."""
    l, u = _lu_parts(lu)
    pt = t[_lu_perm(piv, lu.shape[0])]
    f = np.linalg.solve(u.T, np.linalg.solve(l, pt).T).T
    return l @ np.tril(f, -1) + np.triu(f) @ u


def lu_factor_vjp(g, lu, piv):
    """Adjoint of `a`: `P L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T`."""
    l, u = _lu_parts(lu)
    gf = np.tril(l.T @ np.tril(g, -1), -1) + np.triu(np.triu(g) @ u.T)
    m = np.linalg.solve(l.T, np.linalg.solve(u, gf.T).T)
    out = np.empty_like(m)
    out[_lu_perm(piv, lu.shape[0])] = m
    return out


def lu_solve(lu, piv, b, trans=0, overwrite_b=False, check_finite=True):
    """`scipy.linalg.lu_solve((lu, piv), b, trans)` with the factor tuple unpacked."""
    import scipy.linalg

    return scipy.linalg.lu_solve((lu, piv), b, trans=trans, check_finite=check_finite)


def lu_solve_jvp_lu(t, lu, piv, ans):
    """Tangent of `x = A^-1 b`, `A = P L U`, along the packed factors' tangent `t`."""
    l, u = _lu_parts(lu)
    w = np.tril(t, -1) @ (u @ ans) + l @ (np.triu(t) @ ans)
    pw = np.empty_like(w)
    pw[_lu_perm(piv, lu.shape[0])] = w
    return -lu_solve(lu, piv, pw)


def lu_solve_vjp_lu(g, lu, piv, ans):
    """Adjoint of the packed factors: with `gA = -A^-T g x^T`,
    `tril(P^T gA U^T, -1) + triu(L^T P^T gA)`."""
    l, u = _lu_parts(lu)
    pga = -_outer_or_mat(lu_solve(lu, piv, g, trans=1), ans)[_lu_perm(piv, lu.shape[0])]
    return np.tril(pga @ u.T, -1) + np.triu(l.T @ pga)


_BLAS_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_F32, _F64 = _BLAS_DTYPES


@lru_cache(maxsize=8)
def tri_mask(side):
    """`np.tri(side, dtype=bool)`, read-only, made once per side (the last 8 sides): the
    triangle masks of `codegen/idioms.py`'s NumPy statements."""
    out = np.tri(side, dtype=bool)
    out.setflags(write=False)
    return out


def tri_dot(a, lower, trans, b, left):
    """The product of the triangle of the square matrix `a` (its lower or upper half, diagonal
    included, zeros elsewhere: `np.where(tri_mask(n), a, 0.0)` or `tri_mask(n).T`), transposed
    if `trans`, with the matrix `b`: on its left (`left`) or its right. The products of
    `codegen/idioms.py` over a masked operand. With BLAS's triangular product (`?trmm`, through
    SciPy) where `a` and `b` are float64 (or float32) alike and not empty: the other half is
    not read, and half the multiplications are done; NumPy's masked product otherwise. Either
    is the sum of the same products in some order (BLAS's)."""
    trmm = _trmm(a, b)
    if trmm is None:
        mask = tri_mask(a.shape[0])
        m = np.where(mask if lower else mask.T, a, 0.0)
        m = m.T if trans else m
        return m @ b if left else b @ m
    # in Fortran order (the transposes, no copy for C-ordered operands): op(tri(a)) @ b is
    # (b.T @ op(tri(a)).T).T, and the lower half of `a` is the upper half of `a.T`
    return trmm(1.0, a.T, b.T, side=1 if left else 0, lower=0 if lower else 1, trans_a=1 if trans else 0).T


def product_copy(y):
    """A copy of the array `y` for products that read it (`codegen/layouts.py`): column-major
    where `y` is a matrix of at most 8192 elements (OpenBLAS's small products run `X @ Z.T` a
    third faster with `X` so), row-major as `y.copy()` otherwise. The same elements either way."""
    if type(y) is np.ndarray and y.ndim == 2 and y.size <= 8192:
        return y.copy(order="F")
    return y.copy()


def dot_nt(x, z):
    """`x @ z.T` (`codegen/layouts.py` writes it for the products of the "kernels" programs): for
    row-major float matrices of at most 8192 elements each, as `x @ z.T` copied row-major first
    (OpenBLAS runs a product whose operands are both traversed along their rows 15-25% slower at
    those sizes, the copy included); the product itself otherwise. The same products summed,
    in BLAS's order either way."""
    if (type(x) is np.ndarray and type(z) is np.ndarray and x.ndim == 2 and z.ndim == 2 and x.size <= 8192
            and z.size <= 8192 and x.dtype is z.dtype and (x.dtype is _F64 or x.dtype is _F32)
            and x.strides[1] == x.itemsize and z.strides[1] == z.itemsize):
        return x @ np.ascontiguousarray(z.T)
    return x @ z.T


def tri_dot_add(x, a, n, lower, trans):
    """trmm's update of the rows of the matrix `x` (`n` of them) by the strict lower (`lower`)
    or upper triangle of the square `a[:n, :n]`, transposed where `trans`: `x[t] += tri_dot(f,
    lower, trans, x[o], True)`, `f` that triangle's box (`a[1:n, :n - 1]`, or `a[:n - 1, 1:n]`
    for the upper one), `t` and `o` the rows `[0, n - 1)` and `[1, n)` where `lower == trans`,
    else `[1, n)` and `[0, n - 1)` (`codegen/idioms.py` writes it for the statement, which
    reads the old rows: the product is made whole before the add). That is `x = (I + op(strict
    triangle)) @ x`, which BLAS's unit-diagonal `?trmm` does in place: one call, no product made
    apart, no add pass, `a`'s diagonal and other half not read. BLAS runs where `a[:n, :n]` is
    square and of `x`'s dtype; the statement elsewhere. Either adds the sum of the same products
    in some order (BLAS's); the row the statement does not write is left as it was (bit for bit:
    BLAS rewrites it, and it is put back). `x` is finite and shares no memory with `a` (the nest's
    guard checked both: BLAS multiplies its triangles' zeros, and `0 * inf` is nan)."""
    if n > 1 and type(x) is np.ndarray and x.ndim == 2 and x.shape[1] and x.flags.writeable:
        sq = a[:n, :n]
        trmm = _trmm(sq, x) if sq.shape == (n, n) else None
        if trmm is not None:
            k = n - 1 if lower == trans else 0  # the row the statement does not write
            kept = x[k].copy()  # BLAS writes it (1.0 * x + 0.0: a -0.0 would become 0.0)
            b = x.T  # Fortran order: x.T = x.T @ op(T).T, T's lower half the upper one of sq.T
            r = trmm(1.0, sq.T, b, side=1, lower=0 if lower else 1, trans_a=1 if trans else 0, diag=1,
                     overwrite_b=1)
            if r is not b:  # F2PY worked on a copy (x not C-contiguous)
                b[...] = r
            x[k] = kept
            return
    f = a[1:n, :n - 1] if lower else a[:n - 1, 1:n]
    t, o = (x[:n - 1], x[1:n]) if lower == trans else (x[1:n], x[:n - 1])
    t += tri_dot(f, lower, trans, o, True)


def sym_add(t, m, lower, alpha, x, y=None, beta=None):
    """`np.add(t, P, out=t, where=m)` for a symmetric product `P`: `alpha * (x @ x.T)`, or
    with `y`, `alpha * (x @ y.T) + alpha * (y @ x.T)`; `m` the mask of `t`'s lower half
    (`tri_mask(n)`, `lower`) or its upper half (its transpose). The masked updates of
    `codegen/idioms.py` whose product is syrk's or syr2k's (covariance's `data.T @ data`).
    With BLAS's `?syrk` / `?syr2k` (through SciPy: half the multiplications, the other half of
    `t` neither read nor written) where `t` is a contiguous float64 (or float32) square matrix,
    `x` and `y` matrices of its dtype and `alpha` a finite nonzero float (BLAS skips the product
    where it is 0, where `0 * inf` is nan; for float32, a Python number that stays finite and
    nonzero in float32); the statement itself elsewhere. Either adds the sum of the same
    products, in some order (BLAS's: the sign of a zero sum may differ, as any reordered sum's).
    `t` shares no memory with `x` or `y` (the nest's guard, `blas_ready`, made sure).
    With `beta`, `np.multiply(t, beta, out=t, where=m)` first: BLAS's beta where it is a finite
    nonzero number of `alpha`'s kinds (BLAS scales the triangle by it as the statement does; it
    zeroes the triangle for 0, where `0 * inf` is nan)."""
    call = _syrk(t, m, lower, alpha, x, y)
    if call is not None and beta is not None and not _blas_scalar(t.dtype, beta):
        call = None
    if call is None:
        if beta is not None:
            np.multiply(t, beta, out=t, where=m)
        p = alpha * (x @ x.T) if y is None else alpha * (x @ y.T) + alpha * (y @ x.T)
        np.add(t, p, out=t, where=m)
        return
    _sym_blas(call, alpha, x, y, 1.0 if beta is None else float(beta))


def sym_set(t, m, lower, alpha, x, y=None):
    """`np.copyto(t, 0.0, where=m)` and then `sym_add(t, m, lower, alpha, x, y)`: with BLAS one
    call whose beta is 0 (the triangle of `t` is not read: a NaN there goes, as the zero fill
    removes it; the sign of a zero sum may differ, as `sym_add`'s), the two statements where
    BLAS cannot take them (`sym_add`'s conditions)."""
    call = _syrk(t, m, lower, alpha, x, y)
    if call is None:
        np.copyto(t, 0.0, where=m)
        p = alpha * (x @ x.T) if y is None else alpha * (x @ y.T) + alpha * (y @ x.T)
        np.add(t, p, out=t, where=m)
        return
    _sym_blas(call, alpha, x, y, 0.0)


def sym2_add(t, n, lower, strict, alpha, x, y):
    """The two masked adds `codegen/rank2k.py` finds to be one symmetric rank-2k update of the
    square `t[:n, :n]`: to its lower (`lower`) or upper triangle, the diagonal left out where
    `strict`, `alpha * (x @ y.T + y @ x.T)` (`x`, `y` of `n` rows), through BLAS's `?syr2k`
    (half the multiplications of the two products); True where it did, False (nothing written)
    where BLAS cannot take it: `n` an int of at least 1 (2 for a strict triangle) with `t[:n,
    :n]` that square, `x` and `y` of one shape, and `sym_add`'s conditions (`t[:n, :n]`
    contiguous, of `x`'s and `y`'s float dtype, `alpha` finite and nonzero). BLAS adds the sum
    of the same products in its order; it writes the triangle and the diagonal only, and a
    strict triangle's diagonal is put back as it was, bit for bit. `t` shares no memory with `x`
    or `y` (the nest's guard, `blas_ready`, made sure)."""
    if not (type(n) is int or isinstance(n, np.integer)) or n < 1 + bool(strict) or type(t) is not np.ndarray:
        return False
    sq = t[:n, :n]
    if sq.shape != (n, n) or type(y) is not np.ndarray or type(x) is not np.ndarray or y.shape != x.shape:
        return False
    m = tri_mask(n)
    call = _syrk(sq, m if lower else m.T, lower, alpha, x, y)
    if call is None:
        return False
    diagonal = sq.diagonal().copy() if strict else None
    _sym_blas(call, alpha, x, y, 1.0)
    if diagonal is not None:
        np.fill_diagonal(sq, diagonal)
    return True


def _sym_blas(call, alpha, x, y, beta):
    fn, c, lower_f = call
    a, trans = (x, 0) if x.flags.f_contiguous else (x.T, 1)  # op(a) = x, F-ordered without a copy
    if y is None:
        r = fn(float(alpha), a, beta=beta, c=c, trans=trans, lower=lower_f, overwrite_c=1)
    else:
        r = fn(float(alpha), a, y if trans == 0 else y.T, beta=beta, c=c, trans=trans, lower=lower_f, overwrite_c=1)
    if r is not c:  # F2PY worked on a copy (it returns `c` itself where it wrote in place)
        c[...] = r


def _syrk(t, m, lower, alpha, x, y):
    """(SciPy's `?syrk` or `?syr2k`, `t` as a Fortran-ordered matrix, its half there) for
    `sym_add`, or None. Run before every such update: written for speed."""
    if type(t) is not np.ndarray or type(x) is not np.ndarray or type(m) is not np.ndarray:
        return None
    d = t.dtype
    if d is not _F64 and d is not _F32 or x.dtype is not d or t.ndim != 2 or x.ndim != 2:
        return None
    n = t.shape[0]
    if n == 0 or t.shape[1] != n or x.shape[0] != n or x.shape[1] == 0:
        return None
    if y is not None and (type(y) is not np.ndarray or y.dtype is not d or y.shape != x.shape):
        return None
    if not _blas_scalar(d, alpha):
        return None  # BLAS skips the product where alpha is 0 (`0 * inf` is nan)
    tri = tri_mask(n)
    if not (m is tri if lower else m.base is tri and m.shape == (n, n) and m.strides == (1, n)):
        return None
    flags = t.flags
    if not flags.writeable:
        return None
    if flags.c_contiguous:
        c, lower_f = t.T, 0 if lower else 1  # `t`'s lower half is its transpose's upper one
    elif flags.f_contiguous:
        c, lower_f = t, 1 if lower else 0
    else:
        return None
    fns = _SYRK.get(d.char)
    if fns is None:
        try:
            from scipy.linalg import blas
        except ImportError:
            return None
        fns = _SYRK[d.char] = (blas.dsyrk, blas.dsyr2k) if d is _F64 else (blas.ssyrk, blas.ssyr2k)
    return fns[y is not None], c, lower_f


_SYRK: dict = {}  # dtype char -> (?syrk, ?syr2k)


def _blas_scalar(d, a) -> bool:
    """Whether BLAS of dtype `d` (float64 or float32) takes the coefficient `a` as the NumPy
    statement does: a finite nonzero number (BLAS treats 0 apart: it skips the product, or
    zeroes `C` for beta, where `0 * inf` is nan); for float32 a Python number that stays finite
    and nonzero in float32 (float32 BLAS rounds it as the statement does a Python number; a
    NumPy float64 would widen the statement's arithmetic)."""
    ta = type(a)
    if d is _F64:
        return (ta is float or ta is np.float64 or ta is int) and math.isfinite(a) and a != 0
    return (ta is float or ta is int) and math.isfinite(a32 := float(np.float32(a))) and a32 != 0


def _trmm(a, b):
    """SciPy's `dtrmm` (`strmm`) for the operands of `tri_dot`, or None."""
    if not (type(a) is np.ndarray and type(b) is np.ndarray and a.dtype == b.dtype and a.ndim == b.ndim == 2
            and a.size and b.size and a.dtype in _BLAS_DTYPES):
        return None
    fn = _TRMM.get(a.dtype.char)
    if fn is None:
        try:
            from scipy.linalg import blas
        except ImportError:  # an optional dependency (the "numba" extra, which the kernels backend needs)
            return None
        fn = _TRMM[a.dtype.char] = blas.dtrmm if a.dtype == _F64 else blas.strmm
    return fn


_TRMM: dict = {}  # dtype char -> ?trmm


def blas_ready(written, read, bounds):
    """Whether a loop nest may run as the NumPy statements `codegen/idioms.py` wrote for it:
    every array of `written` and `read` an `ndarray` of float32/float64, no array of `written`
    sharing memory with another array of either, and in each `(array, n_0, n_1, ...)` of
    `bounds` every `n_d` an int from 0 to the array's length along axis `d`, or a pair
    `(start, stop)` of ints with 0 <= start <= stop <= that length (a triangle's box). Run at
    every call of such a nest: written for speed (a plain loop over few arrays)."""
    arrays = written + read
    bases = []
    own = True
    for a in arrays:
        if type(a) is not np.ndarray:
            return False
        d = a.dtype
        if d is not _F64 and d is not _F32 and d not in _BLAS_DTYPES:
            return False
        b = a.base
        if b is None:
            b = a
        if own and not (type(b) is np.ndarray and b.flags.owndata):
            own = False  # memory of its own (not a C API wrapper)
        bases.append(id(b))
    for i, w in enumerate(written):
        if own and bases.count(bases[i]) == 1:
            continue  # its memory is an allocation of its own: no other array can reach it
        if any(j != i and np.shares_memory(w, a) for j, a in enumerate(arrays)):
            return False
    for entry in bounds:
        shape = entry[0].shape
        if len(shape) + 1 != len(entry):
            return False
        if len(entry) == 3:  # a matrix's (the common case, first)
            n0, n1 = entry[1], entry[2]
            if type(n0) is int and type(n1) is int:
                if 0 <= n0 <= shape[0] and 0 <= n1 <= shape[1]:
                    continue
                return False
        for d, s in enumerate(shape, 1):
            n = entry[d]
            if type(n) is int:
                if n < 0 or n > s:
                    return False
            elif type(n) is tuple:
                start, stop = n
                if not (type(start) is int or isinstance(start, np.integer)) or not (
                        type(stop) is int or isinstance(stop, np.integer)) or not 0 <= start <= stop <= s:
                    return False
            elif not isinstance(n, np.integer) or not 0 <= n <= s:
                return False
    return True
