"""Functional JAX ports of the kernels of `kernels.py` (the same math, rewritten the way JAX needs).

Each port takes the primal's arguments in the primal's order (scratch buffers are accepted and
ignored) and returns the same loss. What the rewrite changed, kernel by kernel:
- loops of dense linear algebra become matrix products (`@`), triangular loop bounds become
  `jnp.tril`/masks (symm, syrk, syr2k, trmm read one triangle; so do the ports);
  trisolv becomes `solve_triangular`, cholesky `jnp.linalg.cholesky` of the symmetric matrix
  the lower triangle defines, gramschmidt `jnp.linalg.qr` (the loss is sign-invariant),
  durbin a dense solve of the Toeplitz (Yule-Walker) system that Levinson-Durbin solves;
  lu keeps the elimination as a `lax.fori_loop` over pivots (no pivoting, masked updates);
- time loops become `lax.fori_loop`, slice assignments `.at[...].set`;
- seidel_2d (a Gauss-Seidel sweep: each point reads its freshly updated neighbours) becomes a
  `lax.scan` over rows carrying the new previous row, and inside it a `lax.scan` over the row
  (a first-order linear recurrence); adi's tridiagonal sweeps become `lax.scan`s over one
  index, vectorized over the other (its p coefficients depend on constants only);
- nbody's pair loop becomes a masked all-pairs expression, conv2d `lax.conv_general_dilated`,
  softmax `jax.nn.softmax`.

Scalar arguments that are Python ints (step counts) are static under `jit`; floats are traced.
jax is imported lazily (`load()`).
"""
from __future__ import annotations

import math

import numpy as np

_PORTS = None


def load():
    """(jax, {kernel name: port}); jax in float64."""
    global _PORTS
    import jax

    jax.config.update("jax_enable_x64", True)
    if _PORTS is None:
        _PORTS = _ports(jax)
    return jax, _PORTS


def _ports(jax):
    jnp, lax = jax.numpy, jax.lax

    def sq(x):
        return jnp.sum(x * x)

    def lower(n):
        return jnp.tril(jnp.ones((n, n), dtype=bool))

    def gemm(alpha, beta, C, A, B):
        return sq(alpha * A @ B + beta * C)

    def gemver(alpha, beta, A, u1, v1, u2, v2, w, x, y, z):
        A = A + jnp.outer(u1, v1) + jnp.outer(u2, v2)
        x = x + beta * A.T @ y + z
        return sq(w + alpha * A @ x)

    def gesummv(alpha, beta, A, B, tmp, x, y):
        return sq(alpha * (A @ x) + beta * (B @ x))

    def mvt(x1, x2, y1, y2, A):
        return sq(x1 + A @ y1) + sq(x2 + A.T @ y2)

    def atax(A, x, y, tmp):
        return sq(A.T @ (A @ x))

    def bicg(A, s, q, p, r):
        return sq(r @ A) + sq(A @ p)

    def syrk(alpha, beta, C, A):
        return sq(jnp.where(lower(C.shape[0]), beta * C + alpha * A @ A.T, C))

    def syr2k(alpha, beta, C, A, B):
        return sq(jnp.where(lower(C.shape[0]), beta * C + alpha * (A @ B.T + B @ A.T), C))

    def symm(alpha, beta, C, A, B):
        S = jnp.tril(A) + jnp.tril(A, -1).T
        return sq(beta * C + alpha * S @ B)

    def trmm(alpha, A, B):
        return sq(alpha * (B + jnp.tril(A, -1).T @ B))

    def trisolv(L, x, b):
        return sq(jax.scipy.linalg.solve_triangular(jnp.tril(L), b, lower=True))

    def cholesky(A, W):
        L = jnp.linalg.cholesky(jnp.tril(A) + jnp.tril(A, -1).T)
        return jnp.sum(W * L * L)

    def lu(A):
        n = A.shape[0]
        idx = jnp.arange(n)

        def pivot(k, A):
            below = idx > k
            col = jnp.where(below, A[:, k] / A[k, k], A[:, k])
            A = A.at[:, k].set(col)
            return A - jnp.outer(jnp.where(below, col, 0.0), jnp.where(idx > k, A[k, :], 0.0))

        return sq(lax.fori_loop(0, n, pivot, A))

    def gramschmidt(A, R, Q, Wr, Wq):
        Q, R = jnp.linalg.qr(A)
        return jnp.sum(Wr * R * R) + jnp.sum(Wq * Q * Q)

    def durbin(r, y, z):
        n = r.shape[0]
        gap = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
        T = jnp.where(gap == 0, 1.0, r[np.maximum(gap - 1, 0)])
        return sq(jnp.linalg.solve(T, -r))

    def jacobi_1d(tsteps, A, B):
        def step(t, AB):
            A, B = AB
            B = B.at[1:-1].set(0.33333 * (A[:-2] + A[1:-1] + A[2:]))
            A = A.at[1:-1].set(0.33333 * (B[:-2] + B[1:-1] + B[2:]))
            return A, B

        return sq(lax.fori_loop(0, tsteps, step, (A, B))[0])

    def jacobi_2d(tsteps, A, B):
        def step(t, AB):
            A, B = AB
            B = B.at[1:-1, 1:-1].set(0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] + A[:-2, 1:-1]))
            A = A.at[1:-1, 1:-1].set(0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1] + B[:-2, 1:-1]))
            return A, B

        return sq(lax.fori_loop(0, tsteps, step, (A, B))[0])

    def heat(A):
        c = A[1:-1, 1:-1, 1:-1]
        return (0.125 * (A[2:, 1:-1, 1:-1] - 2.0 * c + A[:-2, 1:-1, 1:-1])
                + 0.125 * (A[1:-1, 2:, 1:-1] - 2.0 * c + A[1:-1, :-2, 1:-1])
                + 0.125 * (A[1:-1, 1:-1, 2:] - 2.0 * c + A[1:-1, 1:-1, :-2]) + c)

    def heat_3d(tsteps, A, B):
        def step(t, AB):
            A, B = AB
            B = B.at[1:-1, 1:-1, 1:-1].set(heat(A))
            A = A.at[1:-1, 1:-1, 1:-1].set(heat(B))
            return A, B

        return sq(lax.fori_loop(0, tsteps, step, (A, B))[0])

    def seidel_2d(tsteps, A):
        def row(prev_new, rows):
            cur, nxt = rows
            part = (prev_new[:-2] + prev_new[1:-1] + prev_new[2:] + cur[1:-1] + cur[2:]
                    + nxt[:-2] + nxt[1:-1] + nxt[2:])

            def elem(left, pj):
                x = (pj + left) / 9.0
                return x, x

            _, inner = lax.scan(elem, cur[0], part)
            new = jnp.concatenate([cur[:1], inner, cur[-1:]])
            return new, new

        def sweep(t, A):
            _, rows = lax.scan(row, A[0], (A[1:-1], A[2:]))
            return jnp.concatenate([A[:1], rows, A[-1:]])

        return sq(lax.fori_loop(0, tsteps, sweep, A))

    def fdtd_2d(ex, ey, hz, fict):
        fict = jnp.asarray(fict)

        def step(t, fields):
            ex, ey, hz = fields
            ey = ey.at[0, :].set(fict[t])
            ey = ey.at[1:, :].add(-0.5 * (hz[1:, :] - hz[:-1, :]))
            ex = ex.at[:, 1:].add(-0.5 * (hz[:, 1:] - hz[:, :-1]))
            hz = hz.at[:-1, :-1].add(-0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1]))
            return ex, ey, hz

        ex, ey, hz = lax.fori_loop(0, fict.shape[0], step, (ex, ey, hz))
        return sq(ex) + sq(ey) + sq(hz)

    def adi(tsteps, u, v, p, q):
        n = u.shape[0]
        DX = DY = 1.0 / n
        DT = 1.0 / tsteps
        mul1 = 2.0 * DT / (DX * DX)
        mul2 = 1.0 * DT / (DY * DY)
        a, b = -mul1 / 2.0, 1.0 + mul1
        c = a
        d, e = -mul2 / 2.0, 1.0 + mul2
        f = d

        def coefficients(lo, diag, up):  # p[j] for j = 0..n-2 (the same for every i): constants
            pc = np.zeros(n - 1)
            for j in range(1, n - 1):
                pc[j] = -up / (lo * pc[j - 1] + diag)
            return pc

        pc, pr = coefficients(a, b, c), coefficients(d, e, f)

        def sweep(rhs, lo, diag, pcoef):
            """Thomas sweep along j for all i at once: rhs (n-2 [j], n-2 [i]); boundary values 1.
            Returns the solution rows j = 1..n-2 (n-2 [j], n-2 [i])."""
            den = lo * pcoef[:-1] + diag  # j = 1..n-2: a * p[j-1] + b

            def fwd(qprev, xs):
                r, dj = xs
                qj = (r - lo * qprev) / dj
                return qj, qj

            _, qs = lax.scan(fwd, jnp.ones(rhs.shape[1]), (rhs, den))

            def back(vnext, xs):
                pj, qj = xs
                vj = pj * vnext + qj
                return vj, vj

            _, vs = lax.scan(back, jnp.ones(rhs.shape[1]), (jnp.asarray(pcoef[1:]), qs), reverse=True)
            return vs

        def step(t, u):
            # column sweep: v[j, i] for j, i in 1..n-2, rows 0 and n-1 of v set to 1
            rhs = -d * u[1:-1, :-2] + (1.0 + 2.0 * d) * u[1:-1, 1:-1] - f * u[1:-1, 2:]  # [j, i]
            vin = sweep(rhs, a, b, pc)  # [j, i]
            v = jnp.ones((n, n - 2)).at[1:-1, :].set(vin)  # v[:, 1:-1]
            # row sweep: u[i, j] for i, j in 1..n-2, u[i, 0] = u[i, n-1] = 1
            rhs = (-a * v[:-2, :] + (1.0 + 2.0 * a) * v[1:-1, :] - c * v[2:, :]).T  # [j, i]
            uin = sweep(rhs, d, e, pr).T  # [i, j]
            return u.at[1:-1, 1:-1].set(uin).at[1:-1, 0].set(1.0).at[1:-1, -1].set(1.0)

        return sq(lax.fori_loop(0, tsteps, step, u))

    def covariance(data, mean, cov):
        n = data.shape[0]
        X = data - jnp.mean(data, 0)
        return sq(X.T @ X / (n - 1.0))

    def correlation(data, mean, stddev, corr):
        n, m = data.shape
        mu = jnp.mean(data, 0)
        sd = jnp.sqrt(jnp.mean((data - mu) ** 2, 0))
        sd = jnp.where(sd <= 0.1, 1.0, sd)
        X = (data - mu) / (math.sqrt(n) * sd)
        C = jnp.where(jnp.eye(m, dtype=bool), 1.0, X.T @ X)
        return sq(C)

    def softmax(X, W, out):
        s = jax.nn.softmax(X, axis=1)
        return jnp.sum(W * s * s)

    def mlp(W1, b1, W2, b2, X, Y, h, out):
        h = jnp.maximum(X @ W1 + b1, 0.0)
        return 0.5 * sq(h @ W2 + b2 - Y) / X.shape[0]

    def conv2d(x, w, b, out):
        y = lax.conv_general_dilated(x[None], w, (1, 1), "VALID")[0]
        return sq(y + b[:, None, None])

    def nbody(pos, vel, mass, acc, dt, steps):
        n = pos.shape[0]
        off = ~jnp.eye(n, dtype=bool)

        def step(s, state):
            pos, vel = state
            diff = pos[None, :, :] - pos[:, None, :]  # [i, j] = pos[j] - pos[i]
            r2 = jnp.sum(diff * diff, -1) + 0.01
            inv = jnp.where(off, mass[None, :] / (r2 * jnp.sqrt(r2)), 0.0)
            vel = vel + dt * jnp.sum(diff * inv[:, :, None], 1)
            return pos + dt * vel, vel

        return sq(lax.fori_loop(0, steps, step, (pos, vel))[0])

    def cavity_flow(u, v, p, b, nt, nit, dt, dx, dy, rho, nu):
        def poisson(it, pb):
            pn, b = pb
            p = pn.at[1:-1, 1:-1].set(((pn[1:-1, 2:] + pn[1:-1, 0:-2]) * dy ** 2
                                       + (pn[2:, 1:-1] + pn[0:-2, 1:-1]) * dx ** 2) / (2.0 * (dx ** 2 + dy ** 2))
                                      - dx ** 2 * dy ** 2 / (2.0 * (dx ** 2 + dy ** 2)) * b[1:-1, 1:-1])
            p = p.at[:, -1].set(p[:, -2])
            p = p.at[0, :].set(p[1, :])
            p = p.at[:, 0].set(p[:, 1])
            p = p.at[-1, :].set(0.0)
            return p, b

        def step(k, state):
            u, v, p, b = state
            un, vn = u, v
            b = b.at[1:-1, 1:-1].set(rho * (1.0 / dt * ((u[1:-1, 2:] - u[1:-1, 0:-2]) / (2.0 * dx)
                                                        + (v[2:, 1:-1] - v[0:-2, 1:-1]) / (2.0 * dy))
                                            - ((u[1:-1, 2:] - u[1:-1, 0:-2]) / (2.0 * dx)) ** 2
                                            - 2.0 * ((u[2:, 1:-1] - u[0:-2, 1:-1]) / (2.0 * dy)
                                                     * (v[1:-1, 2:] - v[1:-1, 0:-2]) / (2.0 * dx))
                                            - ((v[2:, 1:-1] - v[0:-2, 1:-1]) / (2.0 * dy)) ** 2))
            p, b = lax.fori_loop(0, nit, poisson, (p, b))
            u = u.at[1:-1, 1:-1].set(un[1:-1, 1:-1]
                                     - un[1:-1, 1:-1] * dt / dx * (un[1:-1, 1:-1] - un[1:-1, 0:-2])
                                     - vn[1:-1, 1:-1] * dt / dy * (un[1:-1, 1:-1] - un[0:-2, 1:-1])
                                     - dt / (2.0 * rho * dx) * (p[1:-1, 2:] - p[1:-1, 0:-2])
                                     + nu * (dt / dx ** 2 * (un[1:-1, 2:] - 2.0 * un[1:-1, 1:-1] + un[1:-1, 0:-2])
                                             + dt / dy ** 2 * (un[2:, 1:-1] - 2.0 * un[1:-1, 1:-1] + un[0:-2, 1:-1])))
            v = v.at[1:-1, 1:-1].set(vn[1:-1, 1:-1]
                                     - un[1:-1, 1:-1] * dt / dx * (vn[1:-1, 1:-1] - vn[1:-1, 0:-2])
                                     - vn[1:-1, 1:-1] * dt / dy * (vn[1:-1, 1:-1] - vn[0:-2, 1:-1])
                                     - dt / (2.0 * rho * dy) * (p[2:, 1:-1] - p[0:-2, 1:-1])
                                     + nu * (dt / dx ** 2 * (vn[1:-1, 2:] - 2.0 * vn[1:-1, 1:-1] + vn[1:-1, 0:-2])
                                             + dt / dy ** 2 * (vn[2:, 1:-1] - 2.0 * vn[1:-1, 1:-1] + vn[0:-2, 1:-1])))
            u = u.at[0, :].set(0.0).at[:, 0].set(0.0).at[:, -1].set(0.0).at[-1, :].set(1.0)
            v = v.at[0, :].set(0.0).at[-1, :].set(0.0).at[:, 0].set(0.0).at[:, -1].set(0.0)
            return u, v, p, b

        u, v, p, b = lax.fori_loop(0, nt, step, (u, v, p, b))
        return sq(u) + sq(v)

    def hdiff(inp, coeff, lap, out, steps):
        def step(s, inp):
            lap = jnp.zeros_like(inp).at[1:-1, 1:-1].set(
                4.0 * inp[1:-1, 1:-1] - (inp[2:, 1:-1] + inp[:-2, 1:-1] + inp[1:-1, 2:] + inp[1:-1, :-2]))
            flx = lap[2:-1, 2:-2] - lap[1:-2, 2:-2]
            flx = jnp.where(flx * (inp[2:-1, 2:-2] - inp[1:-2, 2:-2]) > 0.0, 0.0, flx)
            fly = lap[2:-2, 2:-1] - lap[2:-2, 1:-2]
            fly = jnp.where(fly * (inp[2:-2, 2:-1] - inp[2:-2, 1:-2]) > 0.0, 0.0, fly)
            return inp.at[2:-2, 2:-2].set(inp[2:-2, 2:-2] - coeff[2:-2, 2:-2]
                                          * (flx[1:, :] - flx[:-1, :] + fly[:, 1:] - fly[:, :-1]))

        return sq(lax.fori_loop(0, steps, step, inp))

    return {name: fn for name, fn in locals().items()
            if callable(fn) and name not in ("sq", "lower", "heat", "jax", "jnp", "lax")}


def make_gradient(name, args, wrt):
    """A zero-argument callable: `jax.jit(jax.grad(port, argnums=wrt))` at `args` (copied to JAX
    arrays once; Python ints static), returning a tuple of NumPy arrays. Its first call traces and
    compiles. None when there is no port."""
    jax, ports = load()
    if name not in ports:
        return None
    static = tuple(i for i, a in enumerate(args) if isinstance(a, (int, np.integer)) and not isinstance(a, bool))
    grad = jax.jit(jax.grad(ports[name], argnums=tuple(wrt)), static_argnums=static)
    vals = [a if i in static else jax.numpy.asarray(a) for i, a in enumerate(args)]

    def gradient():
        return tuple(np.asarray(g) for g in jax.block_until_ready(grad(*vals)))

    return gradient
