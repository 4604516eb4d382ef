"""The benchmark workloads of PEERS.md, written the way our users write them.

Contract: every workload is a `Workload` with
- `primal`: the imperative NumPy function exactly as a user writes it (loops,
  preallocated buffers, `out=`, views), returning a float;
- `make(size)`: fresh arguments (a dict `args` of name -> value, the names of the
  arguments to differentiate `wrt`, and `restore`, a callable that resets what the
  primal overwrites so that repeated timings see the same inputs);
- `sizes`: the full size of PEERS.md and a small size for tests;
- `no_need`: the arguments the primal writes whose contents the peers' gradients do not
  produce (`jax.grad` returns the gradient alone); zymo is also timed with them passed as
  `DuplicatedNoNeed`, which lets it leave out the stores only they would have read.
The zymo gradient, the Numba primal and the peers all differentiate the same math; the
peers' functional rewrites live in `peers.py`.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class Workload:
    name: str
    primal: Callable
    make: Callable[[Any], dict]
    full: Any
    small: Any
    wrt: tuple
    no_need: tuple = ()  # arguments whose primal contents the peers' gradients do not produce


# -- sumsq_inplace ------------------------------------------------------------------


def sumsq_inplace(x):
    for i in range(len(x)):
        x[i] = x[i] ** 2
    return x.sum()


def sumsq_vectorized(x):
    return np.sum(x ** 2)


def _make_sumsq(n):
    x0 = np.random.default_rng(0).random(n)
    x = x0.copy()
    return {"args": [x], "restore": lambda: np.copyto(x, x0), "x0": [x0]}


# -- gm3_rhs (seed 003) -----------------------------------------------------------------


def _tridiag(n):
    A = np.diag(-2.0 * np.ones(n)) + np.diag(np.ones(n - 1), 1) + np.diag(np.ones(n - 1), -1)
    A[0, 1] = 2.0
    A[-1, -2] = 2.0
    return A


def gm3_loss(r, w, dr, Ax, Ay, Ayu, uAx, Ayv, vAx, p):
    a, alpha, ubar, beta, D1, D2 = p
    u = r[:, :, 0]
    v = r[:, :, 1]
    du = dr[:, :, 0]
    dv = dr[:, :, 1]
    np.dot(Ay, u, out=Ayu)
    np.dot(u, Ax, out=uAx)
    np.dot(Ay, v, out=Ayv)
    np.dot(v, Ax, out=vAx)
    du[...] = D1 * (Ayu + uAx) + a * u * u / v + ubar - alpha * u
    dv[...] = D2 * (Ayv + vAx) + a * u * u - beta * v
    return np.sum(dr * w)


def _make_gm3(N):
    rng = np.random.default_rng(3)
    r = rng.random((N, N, 2)) + 0.5
    w = rng.random((N, N, 2))
    bufs = [np.zeros((N, N)) for _ in range(4)]
    args = [r, w, np.zeros((N, N, 2)), _tridiag(N), _tridiag(N), *bufs, (1.0, 1.0, 1.0, 10.0, 0.001, 100.0)]
    return {"args": args, "restore": lambda: None}


# -- gmm_objective (ADBench) ---------------------------------------------------------------


def gmm_objective(alphas, means, icf, x, Qdiag, sum_qs, main_term):
    """Imperative, hand-looped: the squared norm of Q_k (x_i - mu_k) by triangular loops."""
    n, d = x.shape
    k = alphas.shape[0]
    for kk in range(k):
        s = 0.0
        for j in range(d):
            Qdiag[kk, j] = math.exp(icf[kk, j])
            s += icf[kk, j]
        sum_qs[kk] = s
    slse = 0.0
    for i in range(n):
        for kk in range(k):
            sq = 0.0
            for r in range(d):
                t = Qdiag[kk, r] * (x[i, r] - means[kk, r])
                for c in range(r):
                    idx = d + c * (2 * d - c - 1) // 2 + (r - c - 1)
                    t += icf[kk, idx] * (x[i, c] - means[kk, c])
                sq += t * t
            main_term[kk] = alphas[kk] + sum_qs[kk] - 0.5 * sq
        mx = main_term[0]
        for kk in range(1, k):
            if main_term[kk] > mx:
                mx = main_term[kk]
        se = 0.0
        for kk in range(k):
            se += math.exp(main_term[kk] - mx)
        slse += mx + math.log(se)
    amx = alphas[0]
    for kk in range(1, k):
        if alphas[kk] > amx:
            amx = alphas[kk]
    ase = 0.0
    for kk in range(k):
        ase += math.exp(alphas[kk] - amx)
    lse_alphas = amx + math.log(ase)
    prior = 0.0
    for kk in range(k):
        fro = 0.0
        for j in range(d):
            fro += Qdiag[kk, j] * Qdiag[kk, j]
        for j in range(d, icf.shape[1]):
            fro += icf[kk, j] * icf[kk, j]
        prior += 0.5 * fro - sum_qs[kk]
    return -0.5 * n * d * math.log(2 * math.pi) + slse - n * lse_alphas + prior


def gmm_objective_dot(alphas, means, icf, x, Qs, sum_qs, xc, Qxc, main_term):
    """Imperative 'as written': Q_k built into a buffer, one np.dot per point and component."""
    n, d = x.shape
    k = alphas.shape[0]
    for kk in range(k):
        s = 0.0
        for j in range(d):
            Qs[kk, j, j] = np.exp(icf[kk, j])
            s += icf[kk, j]
        sum_qs[kk] = s
        idx = d
        for c in range(d):
            for r in range(c + 1, d):
                Qs[kk, r, c] = icf[kk, idx]
                idx += 1
    slse = 0.0
    for i in range(n):
        for kk in range(k):
            np.subtract(x[i], means[kk], xc)
            np.dot(Qs[kk], xc, out=Qxc)
            main_term[kk] = alphas[kk] + sum_qs[kk] - 0.5 * np.sum(Qxc * Qxc)
        mx = np.max(main_term)
        slse += mx + np.log(np.sum(np.exp(main_term - mx)))
    amx = np.max(alphas)
    lse_alphas = amx + np.log(np.sum(np.exp(alphas - amx)))
    prior = 0.5 * np.sum(Qs * Qs) - np.sum(sum_qs)
    return -0.5 * n * d * math.log(2 * math.pi) + slse - n * lse_alphas + prior


def _make_gmm(size):
    d, k, n = size
    rng = np.random.default_rng(5)
    alphas = rng.standard_normal(k)
    means = rng.random((k, d))
    icf = 0.1 * rng.standard_normal((k, d + d * (d - 1) // 2))
    x = rng.random((n, d))
    return {"args": [alphas, means, icf, x, np.zeros((k, d)), np.zeros(k), np.zeros(k)],
            "restore": lambda: None}


def _make_gmm_dot(size):
    d, k, n = size
    base = _make_gmm(size)["args"]
    return {"args": base[:4] + [np.zeros((k, d, d)), np.zeros(k), np.zeros(d), np.zeros(d), np.zeros(k)],
            "restore": lambda: None}


# -- mlp_loss --------------------------------------------------------------------------


def mlp_loss(W1, b1, W2, b2, W3, b3, X, labels, h1, h2, logits):
    np.dot(X, W1, out=h1)
    h1 += b1
    np.tanh(h1, h1)
    np.dot(h1, W2, out=h2)
    h2 += b2
    np.tanh(h2, h2)
    np.dot(h2, W3, out=logits)
    logits += b3
    loss = 0.0
    for i in range(logits.shape[0]):
        row = logits[i]
        m = np.max(row)
        loss += m + np.log(np.sum(np.exp(row - m))) - row[labels[i]]
    return loss / logits.shape[0]


def _make_mlp(size):
    B, sizes = size
    rng = np.random.default_rng(7)
    params = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        params += [rng.standard_normal((a, b)) / np.sqrt(a), 0.1 * rng.standard_normal(b)]
    X = rng.standard_normal((B, sizes[0]))
    labels = rng.integers(0, sizes[-1], B)
    bufs = [np.zeros((B, s)) for s in sizes[1:]]
    return {"args": params + [X, labels] + bufs, "restore": lambda: None}


# -- lorenz_rk4 ---------------------------------------------------------------------------


def lorenz_rk4(traj, params, dt):
    sigma, rho, beta = params[0], params[1], params[2]
    for i in range(traj.shape[0] - 1):
        x, y, z = traj[i, 0], traj[i, 1], traj[i, 2]
        k1x, k1y, k1z = sigma * (y - x), x * (rho - z) - y, x * y - beta * z
        x2, y2, z2 = x + 0.5 * dt * k1x, y + 0.5 * dt * k1y, z + 0.5 * dt * k1z
        k2x, k2y, k2z = sigma * (y2 - x2), x2 * (rho - z2) - y2, x2 * y2 - beta * z2
        x3, y3, z3 = x + 0.5 * dt * k2x, y + 0.5 * dt * k2y, z + 0.5 * dt * k2z
        k3x, k3y, k3z = sigma * (y3 - x3), x3 * (rho - z3) - y3, x3 * y3 - beta * z3
        x4, y4, z4 = x + dt * k3x, y + dt * k3y, z + dt * k3z
        k4x, k4y, k4z = sigma * (y4 - x4), x4 * (rho - z4) - y4, x4 * y4 - beta * z4
        traj[i + 1, 0] = x + dt / 6.0 * (k1x + 2.0 * k2x + 2.0 * k3x + k4x)
        traj[i + 1, 1] = y + dt / 6.0 * (k1y + 2.0 * k2y + 2.0 * k3y + k4y)
        traj[i + 1, 2] = z + dt / 6.0 * (k1z + 2.0 * k2z + 2.0 * k3z + k4z)
    n = traj.shape[0] - 1
    return traj[n, 0] + traj[n, 1] + traj[n, 2]


def _make_lorenz(steps):
    traj = np.zeros((steps + 1, 3))
    traj[0] = (1.0, 1.0, 1.0)
    params = np.array([10.0, 28.0, 8.0 / 3.0])
    return {"args": [traj, params, 0.005], "restore": lambda: None}


# -- tuple_iter (seed 000) ----------------------------------------------------------------


def tuple_iter(out, x):
    res = 0.0
    for v in (x[0][0], x[0][1]):
        res += v * v
    out[0] = res


def _make_tuple(_):
    return {"args": [np.zeros(1), np.array([[0.5, 2.0]])], "restore": lambda: None}


WORKLOADS = {
    "sumsq_inplace": Workload("sumsq_inplace", sumsq_inplace, _make_sumsq, 100_000, 50, (0,)),
    "sumsq_vectorized": Workload("sumsq_vectorized", sumsq_vectorized, _make_sumsq, 100_000, 50, (0,)),
    "gm3_rhs": Workload("gm3_rhs", gm3_loss, _make_gm3, 64, 6, (0,), no_need=(2, 5, 6, 7, 8)),
    "gmm_objective": Workload("gmm_objective", gmm_objective, _make_gmm, (10, 25, 1000), (3, 4, 7), (0, 1, 2)),
    "gmm_objective_dot": Workload("gmm_objective_dot", gmm_objective_dot, _make_gmm_dot, (10, 25, 1000), (3, 4, 7),
                                  (0, 1, 2)),
    "mlp_loss": Workload("mlp_loss", mlp_loss, _make_mlp, (128, (784, 256, 128, 10)), (5, (7, 6, 5, 4)),
                         (0, 1, 2, 3, 4, 5)),
    "lorenz_rk4": Workload("lorenz_rk4", lorenz_rk4, _make_lorenz, 2000, 20, (0, 1)),
    "tuple_iter": Workload("tuple_iter", tuple_iter, _make_tuple, None, None, (1,)),
}
