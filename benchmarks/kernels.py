"""Real kernels, written the way PolyBench (C, translated line by line) and scientific NumPy
users write them: loops, in-place updates of preallocated arrays, slices, `out=`.

Contract (used by `run_kernels.py`): every kernel is a `Kernel` with
- `primal`: a plain function returning a scalar loss (the sum of squares of its output,
  weighted by a fixed random array where the plain sum of squares would be degenerate, e.g.
  cholesky: sum(L**2) = trace(A)), so a gradient exists. It may overwrite its arguments, as
  the PolyBench kernels do (the gradient is then with respect to the values on entry).
- `make(size)`: a list of fresh arguments (new arrays on every call);
- `small`, `full`: the two sizes (small: the checks against finite differences and `--quick`);
- `wrt`: the positions of the arguments to differentiate; the others are passed as `Const`
  (scalars, step counts, scratch buffers the primal overwrites);
- `dims`: the names of the size's numbers (for the tables);
- `category`, `style`: "loops" (PolyBench's loop nests, scalar reads and writes), "slices"
  (loops whose bodies update slices, as NumPy users vectorize an inner loop), "vectorized"
  (whole-array NumPy: slices, `out=`, `np.where`, as NumPy users write stencils).

The functional JAX ports of the same math are in `kernels_jax.py`.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class Kernel:
    name: str
    category: str
    style: str
    primal: Callable
    make: Callable[[Any], list]
    small: Any
    full: Any
    wrt: tuple
    dims: str = "n"  # what the size's numbers are, for the tables


def _rng(seed):
    return np.random.default_rng(seed)


# == dense linear algebra (PolyBench linear-algebra/blas, kernels, solvers) ==================


def gemm(alpha, beta, C, A, B):
    ni, nj = C.shape
    nk = A.shape[1]
    for i in range(ni):
        for j in range(nj):
            C[i, j] *= beta
        for k in range(nk):
            for j in range(nj):
                C[i, j] += alpha * A[i, k] * B[k, j]
    return np.sum(C * C)


def _make_gemm(n):
    r = _rng(1)
    return [1.5, 1.2, r.random((n, n + 2)), r.random((n, n + 1)), r.random((n + 1, n + 2))]


def gemver(alpha, beta, A, u1, v1, u2, v2, w, x, y, z):
    n = A.shape[0]
    for i in range(n):
        for j in range(n):
            A[i, j] = A[i, j] + u1[i] * v1[j] + u2[i] * v2[j]
    for i in range(n):
        for j in range(n):
            x[i] = x[i] + beta * A[j, i] * y[j]
    for i in range(n):
        x[i] = x[i] + z[i]
    for i in range(n):
        for j in range(n):
            w[i] = w[i] + alpha * A[i, j] * x[j]
    return np.sum(w * w)


def _make_gemver(n):
    r = _rng(2)
    return [1.5, 1.2, r.random((n, n))] + [r.random(n) for _ in range(8)]


def gesummv(alpha, beta, A, B, tmp, x, y):
    n = A.shape[0]
    for i in range(n):
        tmp[i] = 0.0
        y[i] = 0.0
        for j in range(n):
            tmp[i] = A[i, j] * x[j] + tmp[i]
            y[i] = B[i, j] * x[j] + y[i]
        y[i] = alpha * tmp[i] + beta * y[i]
    return np.sum(y * y)


def _make_gesummv(n):
    r = _rng(3)
    return [1.5, 1.2, r.random((n, n)), r.random((n, n)), np.zeros(n), r.random(n), np.zeros(n)]


def mvt(x1, x2, y1, y2, A):
    n = A.shape[0]
    for i in range(n):
        for j in range(n):
            x1[i] = x1[i] + A[i, j] * y1[j]
    for i in range(n):
        for j in range(n):
            x2[i] = x2[i] + A[j, i] * y2[j]
    return np.sum(x1 * x1) + np.sum(x2 * x2)


def _make_mvt(n):
    r = _rng(4)
    return [r.random(n), r.random(n), r.random(n), r.random(n), r.random((n, n))]


def atax(A, x, y, tmp):
    m, n = A.shape
    for i in range(n):
        y[i] = 0.0
    for i in range(m):
        tmp[i] = 0.0
        for j in range(n):
            tmp[i] = tmp[i] + A[i, j] * x[j]
        for j in range(n):
            y[j] = y[j] + A[i, j] * tmp[i]
    return np.sum(y * y)


def _make_atax(n):
    r = _rng(5)
    m = n + 3
    return [r.random((m, n)) / n, r.random(n), np.zeros(n), np.zeros(m)]


def bicg(A, s, q, p, r):
    n, m = A.shape
    for i in range(m):
        s[i] = 0.0
    for i in range(n):
        q[i] = 0.0
        for j in range(m):
            s[j] = s[j] + r[i] * A[i, j]
            q[i] = q[i] + A[i, j] * p[j]
    return np.sum(s * s) + np.sum(q * q)


def _make_bicg(n):
    g = _rng(6)
    m = n + 2
    return [g.random((n, m)), np.zeros(m), np.zeros(n), g.random(m), g.random(n)]


def syrk(alpha, beta, C, A):
    n, m = A.shape
    for i in range(n):
        for j in range(i + 1):
            C[i, j] *= beta
        for k in range(m):
            for j in range(i + 1):
                C[i, j] += alpha * A[i, k] * A[j, k]
    return np.sum(C * C)


def _make_syrk(n):
    r = _rng(7)
    return [1.5, 1.2, r.random((n, n)), r.random((n, n + 2))]


def syr2k(alpha, beta, C, A, B):
    n, m = A.shape
    for i in range(n):
        for j in range(i + 1):
            C[i, j] *= beta
        for k in range(m):
            for j in range(i + 1):
                C[i, j] += A[j, k] * alpha * B[i, k] + B[j, k] * alpha * A[i, k]
    return np.sum(C * C)


def _make_syr2k(n):
    r = _rng(8)
    return [1.5, 1.2, r.random((n, n)), r.random((n, n + 2)), r.random((n, n + 2))]


def symm(alpha, beta, C, A, B):
    m, n = C.shape
    for i in range(m):
        for j in range(n):
            temp2 = 0.0
            for k in range(i):
                C[k, j] += alpha * B[i, j] * A[i, k]
                temp2 += B[k, j] * A[i, k]
            C[i, j] = beta * C[i, j] + alpha * B[i, j] * A[i, i] + alpha * temp2
    return np.sum(C * C)


def _make_symm(n):
    r = _rng(9)
    return [1.5, 1.2, r.random((n, n + 2)), r.random((n, n)), r.random((n, n + 2))]


def trmm(alpha, A, B):
    m, n = B.shape
    for i in range(m):
        for j in range(n):
            for k in range(i + 1, m):
                B[i, j] += A[k, i] * B[k, j]
            B[i, j] = alpha * B[i, j]
    return np.sum(B * B)


def _make_trmm(n):
    r = _rng(10)
    return [1.5, r.random((n, n)) / n, r.random((n, n + 2))]


def trisolv(L, x, b):
    n = L.shape[0]
    for i in range(n):
        x[i] = b[i]
        for j in range(i):
            x[i] -= L[i, j] * x[j]
        x[i] = x[i] / L[i, i]
    return np.sum(x * x)


def _make_trisolv(n):
    r = _rng(11)
    L = r.random((n, n)) / n + 2.0 * np.eye(n)
    return [L, np.zeros(n), r.random(n)]


def cholesky(A, W):
    n = A.shape[0]
    for i in range(n):
        for j in range(i):
            for k in range(j):
                A[i, j] -= A[i, k] * A[j, k]
            A[i, j] /= A[j, j]
        for k in range(i):
            A[i, i] -= A[i, k] * A[i, k]
        A[i, i] = math.sqrt(A[i, i])
    s = 0.0
    for i in range(n):
        for j in range(i + 1):
            s += W[i, j] * A[i, j] * A[i, j]
    return s


def _make_cholesky(n):
    r = _rng(12)
    M = r.random((n, n))
    return [M @ M.T / n + np.eye(n), r.random((n, n))]


def lu(A):
    n = A.shape[0]
    for i in range(n):
        for j in range(i):
            for k in range(j):
                A[i, j] -= A[i, k] * A[k, j]
            A[i, j] /= A[j, j]
        for j in range(i, n):
            for k in range(i):
                A[i, j] -= A[i, k] * A[k, j]
    return np.sum(A * A)


def _make_lu(n):
    r = _rng(13)
    return [r.random((n, n)) / n + 2.0 * np.eye(n)]


def gramschmidt(A, R, Q, Wr, Wq):
    m, n = A.shape
    for k in range(n):
        nrm = 0.0
        for i in range(m):
            nrm += A[i, k] * A[i, k]
        R[k, k] = math.sqrt(nrm)
        for i in range(m):
            Q[i, k] = A[i, k] / R[k, k]
        for j in range(k + 1, n):
            R[k, j] = 0.0
            for i in range(m):
                R[k, j] += Q[i, k] * A[i, j]
            for i in range(m):
                A[i, j] = A[i, j] - Q[i, k] * R[k, j]
    return np.sum(Wr * R * R) + np.sum(Wq * Q * Q)


def _make_gramschmidt(n):
    r = _rng(14)
    m = n + 2
    return [r.random((m, n)) + np.eye(m, n), np.zeros((n, n)), np.zeros((m, n)), r.random((n, n)), r.random((m, n))]


def durbin(r, y, z):
    n = r.shape[0]
    y[0] = -r[0]
    beta = 1.0
    alpha = -r[0]
    for k in range(1, n):
        beta = (1.0 - alpha * alpha) * beta
        s = 0.0
        for i in range(k):
            s += r[k - i - 1] * y[i]
        alpha = -(r[k] + s) / beta
        for i in range(k):
            z[i] = y[i] + alpha * y[k - i - 1]
        for i in range(k):
            y[i] = z[i]
        y[k] = alpha
    return np.sum(y * y)


def _make_durbin(n):
    g = _rng(15)
    r = 0.5 ** np.arange(1, n + 1) * (1.0 + 0.1 * g.random(n))  # autocorrelations of a stable AR process
    return [r, np.zeros(n), np.zeros(n)]


# == stencils (PolyBench stencils) ===========================================================


def jacobi_1d(tsteps, A, B):
    n = A.shape[0]
    for _t in range(tsteps):
        for i in range(1, n - 1):
            B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1])
        for i in range(1, n - 1):
            A[i] = 0.33333 * (B[i - 1] + B[i] + B[i + 1])
    return np.sum(A * A)


def _make_jacobi_1d(size):
    n, t = size
    r = _rng(16)
    return [t, r.random(n), r.random(n)]


def jacobi_2d(tsteps, A, B):
    for _t in range(tsteps):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1] + B[:-2, 1:-1])
    return np.sum(A * A)


def _make_jacobi_2d(size):
    n, t = size
    r = _rng(17)
    return [t, r.random((n, n)), r.random((n, n))]


def heat_3d(tsteps, A, B):
    for _t in range(tsteps):
        B[1:-1, 1:-1, 1:-1] = (0.125 * (A[2:, 1:-1, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[:-2, 1:-1, 1:-1])
                               + 0.125 * (A[1:-1, 2:, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[1:-1, :-2, 1:-1])
                               + 0.125 * (A[1:-1, 1:-1, 2:] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[1:-1, 1:-1, :-2])
                               + A[1:-1, 1:-1, 1:-1])
        A[1:-1, 1:-1, 1:-1] = (0.125 * (B[2:, 1:-1, 1:-1] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[:-2, 1:-1, 1:-1])
                               + 0.125 * (B[1:-1, 2:, 1:-1] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[1:-1, :-2, 1:-1])
                               + 0.125 * (B[1:-1, 1:-1, 2:] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[1:-1, 1:-1, :-2])
                               + B[1:-1, 1:-1, 1:-1])
    return np.sum(A * A)


def _make_heat_3d(size):
    n, t = size
    r = _rng(18)
    return [t, r.random((n, n, n)), r.random((n, n, n))]


def seidel_2d(tsteps, A):
    n = A.shape[0]
    for _t in range(tsteps):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                A[i, j] = (A[i - 1, j - 1] + A[i - 1, j] + A[i - 1, j + 1]
                           + A[i, j - 1] + A[i, j] + A[i, j + 1]
                           + A[i + 1, j - 1] + A[i + 1, j] + A[i + 1, j + 1]) / 9.0
    return np.sum(A * A)


def _make_seidel_2d(size):
    n, t = size
    return [t, _rng(19).random((n, n))]


def fdtd_2d(ex, ey, hz, fict):
    for t in range(fict.shape[0]):
        ey[0, :] = fict[t]
        ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] -= 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] -= 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])
    return np.sum(ex * ex) + np.sum(ey * ey) + np.sum(hz * hz)


def _make_fdtd_2d(size):
    n, t = size
    r = _rng(20)
    return [r.random((n, n + 2)), r.random((n, n + 2)), r.random((n, n + 2)), r.random(t)]


def adi(tsteps, u, v, p, q):
    n = u.shape[0]
    DX = 1.0 / n
    DY = 1.0 / n
    DT = 1.0 / tsteps
    B1 = 2.0
    B2 = 1.0
    mul1 = B1 * DT / (DX * DX)
    mul2 = B2 * DT / (DY * DY)
    a = -mul1 / 2.0
    b = 1.0 + mul1
    c = a
    d = -mul2 / 2.0
    e = 1.0 + mul2
    f = d
    for _t in range(1, tsteps + 1):
        # column sweep
        for i in range(1, n - 1):
            v[0, i] = 1.0
            p[i, 0] = 0.0
            q[i, 0] = v[0, i]
            for j in range(1, n - 1):
                p[i, j] = -c / (a * p[i, j - 1] + b)
                q[i, j] = ((-d * u[j, i - 1] + (1.0 + 2.0 * d) * u[j, i] - f * u[j, i + 1] - a * q[i, j - 1])
                           / (a * p[i, j - 1] + b))
            v[n - 1, i] = 1.0
            for j in range(n - 2, 0, -1):
                v[j, i] = p[i, j] * v[j + 1, i] + q[i, j]
        # row sweep
        for i in range(1, n - 1):
            u[i, 0] = 1.0
            p[i, 0] = 0.0
            q[i, 0] = u[i, 0]
            for j in range(1, n - 1):
                p[i, j] = -f / (d * p[i, j - 1] + e)
                q[i, j] = ((-a * v[i - 1, j] + (1.0 + 2.0 * a) * v[i, j] - c * v[i + 1, j] - d * q[i, j - 1])
                           / (d * p[i, j - 1] + e))
            u[i, n - 1] = 1.0
            for j in range(n - 2, 0, -1):
                u[i, j] = p[i, j] * u[i, j + 1] + q[i, j]
    return np.sum(u * u)


def _make_adi(size):
    n, t = size
    return [t, _rng(21).random((n, n)), np.zeros((n, n)), np.zeros((n, n)), np.zeros((n, n))]


# == data mining (PolyBench datamining) ======================================================


def covariance(data, mean, cov):
    n, m = data.shape
    float_n = float(n)
    for j in range(m):
        mean[j] = 0.0
        for i in range(n):
            mean[j] += data[i, j]
        mean[j] /= float_n
    for i in range(n):
        for j in range(m):
            data[i, j] -= mean[j]
    for i in range(m):
        for j in range(i, m):
            cov[i, j] = 0.0
            for k in range(n):
                cov[i, j] += data[k, i] * data[k, j]
            cov[i, j] /= float_n - 1.0
            cov[j, i] = cov[i, j]
    return np.sum(cov * cov)


def _make_covariance(n):
    m = n - 2
    return [_rng(22).random((n, m)), np.zeros(m), np.zeros((m, m))]


def correlation(data, mean, stddev, corr):
    n, m = data.shape
    float_n = float(n)
    eps = 0.1
    for j in range(m):
        mean[j] = 0.0
        for i in range(n):
            mean[j] += data[i, j]
        mean[j] /= float_n
    for j in range(m):
        stddev[j] = 0.0
        for i in range(n):
            stddev[j] += (data[i, j] - mean[j]) * (data[i, j] - mean[j])
        stddev[j] /= float_n
        stddev[j] = math.sqrt(stddev[j])
        stddev[j] = 1.0 if stddev[j] <= eps else stddev[j]
    for i in range(n):
        for j in range(m):
            data[i, j] -= mean[j]
            data[i, j] /= math.sqrt(float_n) * stddev[j]
    for i in range(m - 1):
        corr[i, i] = 1.0
        for j in range(i + 1, m):
            corr[i, j] = 0.0
            for k in range(n):
                corr[i, j] += data[k, i] * data[k, j]
            corr[j, i] = corr[i, j]
    corr[m - 1, m - 1] = 1.0
    return np.sum(corr * corr)


def _make_correlation(n):
    m = n - 2
    return [_rng(23).random((n, m)), np.zeros(m), np.zeros(m), np.zeros((m, m))]


# == machine learning ==========================================================================


def softmax(X, W, out):
    for i in range(X.shape[0]):
        row = X[i]
        m = np.max(row)
        np.exp(row - m, out=out[i])
        out[i] /= np.sum(out[i])
    return np.sum(W * out * out)


def _make_softmax(size):
    b, n = size
    r = _rng(24)
    return [r.standard_normal((b, n)), r.random((b, n)), np.zeros((b, n))]


def mlp(W1, b1, W2, b2, X, Y, h, out):
    np.dot(X, W1, out=h)
    h += b1
    np.maximum(h, 0.0, out=h)
    np.dot(h, W2, out=out)
    out += b2
    out -= Y
    return 0.5 * np.sum(out * out) / X.shape[0]


def _make_mlp(size):
    B, n_in, n_hid, n_out = size
    r = _rng(25)
    return [r.standard_normal((n_in, n_hid)) / math.sqrt(n_in), 0.1 * r.standard_normal(n_hid),
            r.standard_normal((n_hid, n_out)) / math.sqrt(n_hid), 0.1 * r.standard_normal(n_out),
            r.standard_normal((B, n_in)), r.standard_normal((B, n_out)), np.zeros((B, n_hid)), np.zeros((B, n_out))]


def conv2d(x, w, b, out):
    C, H, W_ = x.shape
    F = w.shape[0]
    K = w.shape[2]
    Ho = H - K + 1
    Wo = W_ - K + 1
    for f in range(F):
        out[f] = b[f]
        for c in range(C):
            for di in range(K):
                for dj in range(K):
                    out[f] += w[f, c, di, dj] * x[c, di:di + Ho, dj:dj + Wo]
    return np.sum(out * out)


def _make_conv2d(size):
    C, F, H, K = size
    r = _rng(26)
    return [r.standard_normal((C, H, H)), r.standard_normal((F, C, K, K)) / K, r.standard_normal(F),
            np.zeros((F, H - K + 1, H - K + 1))]


# == physics ==================================================================================


def nbody(pos, vel, mass, acc, dt, steps):
    n = pos.shape[0]
    for _s in range(steps):
        for i in range(n):
            acc[i, 0] = 0.0
            acc[i, 1] = 0.0
            acc[i, 2] = 0.0
            for j in range(n):
                if i != j:
                    dx = pos[j, 0] - pos[i, 0]
                    dy = pos[j, 1] - pos[i, 1]
                    dz = pos[j, 2] - pos[i, 2]
                    r2 = dx * dx + dy * dy + dz * dz + 0.01
                    inv = mass[j] / (r2 * math.sqrt(r2))
                    acc[i, 0] += dx * inv
                    acc[i, 1] += dy * inv
                    acc[i, 2] += dz * inv
        for i in range(n):
            for d in range(3):
                vel[i, d] += dt * acc[i, d]
                pos[i, d] += dt * vel[i, d]
    return np.sum(pos * pos)


def _make_nbody(size):
    n, steps = size
    r = _rng(27)
    return [r.standard_normal((n, 3)), 0.1 * r.standard_normal((n, 3)), 0.5 + r.random(n) / n, np.zeros((n, 3)),
            0.01, steps]


def cavity_flow(u, v, p, b, nt, nit, dt, dx, dy, rho, nu):
    """Lid-driven cavity (Barba, 12 steps to Navier-Stokes, step 11), as written there."""
    for _n in range(nt):
        un = u.copy()
        vn = v.copy()
        b[1:-1, 1:-1] = rho * (1.0 / dt * ((u[1:-1, 2:] - u[1:-1, 0:-2]) / (2.0 * dx)
                                           + (v[2:, 1:-1] - v[0:-2, 1:-1]) / (2.0 * dy))
                               - ((u[1:-1, 2:] - u[1:-1, 0:-2]) / (2.0 * dx)) ** 2
                               - 2.0 * ((u[2:, 1:-1] - u[0:-2, 1:-1]) / (2.0 * dy)
                                        * (v[1:-1, 2:] - v[1:-1, 0:-2]) / (2.0 * dx))
                               - ((v[2:, 1:-1] - v[0:-2, 1:-1]) / (2.0 * dy)) ** 2)
        for _it in range(nit):
            pn = p.copy()
            p[1:-1, 1:-1] = (((pn[1:-1, 2:] + pn[1:-1, 0:-2]) * dy ** 2 + (pn[2:, 1:-1] + pn[0:-2, 1:-1]) * dx ** 2)
                             / (2.0 * (dx ** 2 + dy ** 2))
                             - dx ** 2 * dy ** 2 / (2.0 * (dx ** 2 + dy ** 2)) * b[1:-1, 1:-1])
            p[:, -1] = p[:, -2]
            p[0, :] = p[1, :]
            p[:, 0] = p[:, 1]
            p[-1, :] = 0.0
        u[1:-1, 1:-1] = (un[1:-1, 1:-1]
                         - un[1:-1, 1:-1] * dt / dx * (un[1:-1, 1:-1] - un[1:-1, 0:-2])
                         - vn[1:-1, 1:-1] * dt / dy * (un[1:-1, 1:-1] - un[0:-2, 1:-1])
                         - dt / (2.0 * rho * dx) * (p[1:-1, 2:] - p[1:-1, 0:-2])
                         + nu * (dt / dx ** 2 * (un[1:-1, 2:] - 2.0 * un[1:-1, 1:-1] + un[1:-1, 0:-2])
                                 + dt / dy ** 2 * (un[2:, 1:-1] - 2.0 * un[1:-1, 1:-1] + un[0:-2, 1:-1])))
        v[1:-1, 1:-1] = (vn[1:-1, 1:-1]
                         - un[1:-1, 1:-1] * dt / dx * (vn[1:-1, 1:-1] - vn[1:-1, 0:-2])
                         - vn[1:-1, 1:-1] * dt / dy * (vn[1:-1, 1:-1] - vn[0:-2, 1:-1])
                         - dt / (2.0 * rho * dy) * (p[2:, 1:-1] - p[0:-2, 1:-1])
                         + nu * (dt / dx ** 2 * (vn[1:-1, 2:] - 2.0 * vn[1:-1, 1:-1] + vn[1:-1, 0:-2])
                                 + dt / dy ** 2 * (vn[2:, 1:-1] - 2.0 * vn[1:-1, 1:-1] + vn[0:-2, 1:-1])))
        u[0, :] = 0.0
        u[:, 0] = 0.0
        u[:, -1] = 0.0
        u[-1, :] = 1.0
        v[0, :] = 0.0
        v[-1, :] = 0.0
        v[:, 0] = 0.0
        v[:, -1] = 0.0
    return np.sum(u * u) + np.sum(v * v)


def _make_cavity(size):
    n, nt, nit = size
    r = _rng(28)
    dx = 2.0 / (n - 1)
    return [0.1 * r.random((n, n)), 0.1 * r.random((n, n)), 0.1 * r.random((n, n)), np.zeros((n, n)),
            nt, nit, 0.001, dx, dx, 1.0, 0.1]


# == weather and climate ========================================================================


def hdiff(inp, coeff, lap, out, steps):
    """Fourth-order horizontal diffusion with flux limiter (COSMO's hdiff, the GT4Py/DaCe benchmark),
    applied `steps` times to a 2-d field."""
    for _s in range(steps):
        lap[1:-1, 1:-1] = 4.0 * inp[1:-1, 1:-1] - (inp[2:, 1:-1] + inp[:-2, 1:-1] + inp[1:-1, 2:] + inp[1:-1, :-2])
        flx = lap[2:-1, 2:-2] - lap[1:-2, 2:-2]
        flx = np.where(flx * (inp[2:-1, 2:-2] - inp[1:-2, 2:-2]) > 0.0, 0.0, flx)
        fly = lap[2:-2, 2:-1] - lap[2:-2, 1:-2]
        fly = np.where(fly * (inp[2:-2, 2:-1] - inp[2:-2, 1:-2]) > 0.0, 0.0, fly)
        out[2:-2, 2:-2] = inp[2:-2, 2:-2] - coeff[2:-2, 2:-2] * (flx[1:, :] - flx[:-1, :] + fly[:, 1:] - fly[:, :-1])
        inp[2:-2, 2:-2] = out[2:-2, 2:-2]
    return np.sum(inp * inp)


def _make_hdiff(size):
    n, steps = size
    r = _rng(29)
    return [r.random((n, n)), 0.025 * r.random((n, n)), np.zeros((n, n)), np.zeros((n, n)), steps]


K = Kernel
KERNELS = {k.name: k for k in [
    # dense linear algebra: (small, full) = n
    K("gemm", "linear algebra", "loops", gemm, _make_gemm, 5, 60, (2, 3, 4)),
    K("gemver", "linear algebra", "loops", gemver, _make_gemver, 5, 120, tuple(range(2, 11))),
    K("gesummv", "linear algebra", "loops", gesummv, _make_gesummv, 5, 120, (2, 3, 5)),
    K("mvt", "linear algebra", "loops", mvt, _make_mvt, 5, 120, (0, 1, 2, 3, 4)),
    K("atax", "linear algebra", "loops", atax, _make_atax, 5, 120, (0, 1)),
    K("bicg", "linear algebra", "loops", bicg, _make_bicg, 5, 120, (0, 3, 4)),
    K("syrk", "linear algebra", "loops", syrk, _make_syrk, 5, 60, (2, 3)),
    K("syr2k", "linear algebra", "loops", syr2k, _make_syr2k, 5, 60, (2, 3, 4)),
    K("symm", "linear algebra", "loops", symm, _make_symm, 5, 60, (2, 3, 4)),
    K("trmm", "linear algebra", "loops", trmm, _make_trmm, 5, 60, (1, 2)),
    K("trisolv", "linear algebra", "loops", trisolv, _make_trisolv, 5, 120, (0, 2)),
    K("cholesky", "linear algebra", "loops", cholesky, _make_cholesky, 5, 60, (0,)),
    K("lu", "linear algebra", "loops", lu, _make_lu, 5, 60, (0,)),
    K("gramschmidt", "linear algebra", "loops", gramschmidt, _make_gramschmidt, 5, 60, (0,)),
    K("durbin", "linear algebra", "loops", durbin, _make_durbin, 6, 120, (0,)),
    # stencils: (n, time steps)
    K("jacobi_1d", "stencil", "loops", jacobi_1d, _make_jacobi_1d, (8, 3), (400, 100), (1, 2), "n, T"),
    K("jacobi_2d", "stencil", "vectorized", jacobi_2d, _make_jacobi_2d, (6, 3), (90, 40), (1, 2), "n, T"),
    K("heat_3d", "stencil", "vectorized", heat_3d, _make_heat_3d, (5, 2), (30, 40), (1, 2), "n, T"),
    K("seidel_2d", "stencil", "loops", seidel_2d, _make_seidel_2d, (6, 2), (60, 10), (1,), "n, T"),
    K("fdtd_2d", "stencil", "vectorized", fdtd_2d, _make_fdtd_2d, (5, 3), (80, 40), (0, 1, 2, 3), "n, T"),
    K("adi", "stencil", "loops", adi, _make_adi, (6, 2), (40, 10), (1,), "n, T"),
    # data mining: n points (n - 2 features)
    K("covariance", "data mining", "loops", covariance, _make_covariance, 6, 60, (0,)),
    K("correlation", "data mining", "loops", correlation, _make_correlation, 6, 60, (0,)),
    # machine learning
    K("softmax", "ML", "slices", softmax, _make_softmax, (3, 5), (128, 256), (0,), "rows, n"),
    K("mlp", "ML", "vectorized", mlp, _make_mlp, (4, 5, 6, 3), (128, 256, 128, 10), (0, 1, 2, 3),
      "B, in, hidden, out"),
    K("conv2d", "ML", "slices", conv2d, _make_conv2d, (2, 2, 6, 3), (3, 8, 32, 3), (0, 1, 2), "C, F, H=W, K"),
    # physics
    K("nbody", "physics", "loops", nbody, _make_nbody, (4, 2), (64, 10), (0, 1, 2), "bodies, steps"),
    K("cavity_flow", "physics", "vectorized", cavity_flow, _make_cavity, (7, 2, 3), (41, 20, 20), (0, 1, 2),
      "n, nt, nit"),
    # weather
    K("hdiff", "weather", "vectorized", hdiff, _make_hdiff, (8, 2), (64, 20), (0, 1), "n, steps"),
]}
del K
