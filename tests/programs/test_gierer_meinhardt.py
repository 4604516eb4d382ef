"""Seed 003's reaction-diffusion right-hand side (Gierer-Meinhardt), written as users write it:
preallocated buffers captured from the module, np.matmul(..., out=buf), views of a 3-d state."""
import numpy as np

import zymo
from zymo import Const, Duplicated, Forward, Reverse

N = 6


def _tridiag(n):
    A = np.diag(-2.0 * np.ones(n)) + np.diag(np.ones(n - 1), 1) + np.diag(np.ones(n - 1), -1)
    A[0, 1] = 2.0
    A[-1, -2] = 2.0
    return A


Ax = _tridiag(N)
Ay = _tridiag(N).copy()
Ayu = np.zeros((N, N))
uAx = np.zeros((N, N))
Ayv = np.zeros((N, N))
vAx = np.zeros((N, N))
P = (1.0, 1.0, 1.0, 10.0, 0.001, 100.0)


def gm3(dr, r, p):
    a, alpha, ubar, beta, D1, D2 = p
    u = r[:, :, 0]
    v = r[:, :, 1]
    du = dr[:, :, 0]
    dv = dr[:, :, 1]
    np.matmul(Ay, u, out=Ayu)
    np.matmul(u, Ax, out=uAx)
    np.matmul(Ay, v, out=Ayv)
    np.matmul(v, Ax, out=vAx)
    du[...] = D1 * (Ayu + uAx) + a * u * u / v + ubar - alpha * u
    dv[...] = D2 * (Ayv + vAx) + a * u * u - beta * v


def loss(r, w, dr):
    gm3(dr, r, P)
    return np.sum(dr * w)


def test_gm3_gradient_matches_finite_differences_and_forward_mode():
    rng = np.random.default_rng(3)
    r = rng.random((N, N, 2)) + 0.5
    w = rng.random((N, N, 2))
    (g, _, _) = zymo.gradient(Reverse, loss, r.copy(), w, np.zeros((N, N, 2)))
    eps = 1e-6
    for idx in [(0, 0, 0), (2, 3, 1), (N - 1, N - 1, 0), (1, 4, 1)]:
        e = np.zeros_like(r)
        e[idx] = eps
        fd = (loss(r + e, w, np.zeros_like(r)) - loss(r - e, w, np.zeros_like(r))) / (2 * eps)
        assert abs(g[idx] - fd) <= 1e-6 * max(1.0, abs(fd))
    t = rng.random(r.shape)
    (tan,) = zymo.autodiff(Forward, loss, Duplicated, Duplicated(r.copy(), t), Const(w),
                           Duplicated(np.zeros_like(r), np.zeros_like(r)))
    assert abs(tan - np.sum(g * t)) <= 1e-9 * abs(tan)


def test_gm3_cache_report_and_shadow_semantics():
    rng = np.random.default_rng(4)
    r = rng.random((N, N, 2)) + 0.5
    dr_out = rng.random((N, N, 2))
    dr_seed = dr_out.copy()
    dr = np.zeros((N, N, 2))
    drr = np.zeros_like(r)
    args = (Duplicated(dr, dr_out), Duplicated(r, drr), Const(P))
    rep = zymo.cache_report(Reverse, gm3, Const, *args)
    # the adjoint reads u, v and the products in place: nothing later overwrites them
    assert "nothing is cached" in rep
    zymo.autodiff(Reverse, gm3, Const, *args)
    assert not dr_out.any()  # the overwritten output's shadow is consumed (seed 002)
    # <dr_seed, J dr/dr . t> == <drr, t>
    t = rng.random(r.shape)
    dr2, ddr2 = np.zeros_like(r), np.zeros_like(r)
    zymo.autodiff(Forward, gm3, Const, Duplicated(dr2, ddr2), Duplicated(r.copy(), t), Const(P))
    assert abs(np.sum(ddr2 * dr_seed) - np.sum(drr * t)) <= 1e-9 * abs(np.sum(drr * t))
