"""The peers' functional rewrites of the workloads in `workloads.py` (see PEERS.md).

Contract:
- `PEERS`: the peer names, "jax" (`jax.jit(jax.grad(f))`, float64), "torch" (eager
  `torch.autograd.grad`, float64 tensors) and "autograd" (HIPS `autograd.grad`).
- `available(peer)`: whether the peer imports.
- `make_gradient(peer, workload, args)`: `args` is `WORKLOADS[workload].make(size)["args"]`.
  All conversion (copies of the NumPy arrays into the peer's arrays) happens here, once,
  so later changes to `args` (the primals overwrite some of them) are not seen. Returns a
  zero-argument callable computing the gradient of the workload's loss with respect to
  the arguments `WORKLOADS[workload].wrt`, as a tuple of NumPy arrays in that order, or
  None where the peer has no rewrite of the workload. JAX's first call includes its
  compile.

Each rewrite computes the same math as the imperative primal, written the way PEERS.md
("How each peer had to be rewritten") describes: buffers and `out=` become returned
values, loops over elements become vectorized expressions, and the scalar time loop
of `lorenz_rk4` becomes `lax.scan` (JAX) or a Python loop carrying the state in
variables (torch, autograd). Code that is the same for several peers takes the peer's
array namespace `xp` (and its `lse`, a logsumexp over an axis) as an argument.
"""
from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from functools import lru_cache, partial

import numpy as np

PEERS = ("jax", "torch", "autograd")

# workload -> (the primal's arguments to differentiate, i.e. WORKLOADS[workload].wrt;
# the other arguments the rewrite reads). A rewrite's loss takes them in that order;
# the primal's buffers are dropped.
_SIGNATURES = {
    "sumsq_inplace": ((0,), ()),
    "sumsq_vectorized": ((0,), ()),
    "gm3_rhs": ((0,), (1, 3, 4, 9)),
    "gmm_objective": ((0, 1, 2), (3,)),
    "gmm_objective_dot": ((0, 1, 2), (3,)),
    "mlp_loss": ((0, 1, 2, 3, 4, 5), (6, 7)),
    "lorenz_rk4": ((0, 1), (2,)),
    "tuple_iter": ((1,), ()),
}


def available(peer: str) -> bool:
    """Whether `peer` (one of PEERS) imports."""
    if peer not in PEERS:
        raise ValueError(f"unknown peer {peer!r}; expected one of {PEERS}")
    try:
        importlib.import_module(peer)
    except ImportError:
        return False
    return True


def make_gradient(peer: str, workload: str, args: list) -> Callable[[], tuple] | None:
    """The peer's gradient of `workload` at `args`, as a zero-argument callable (see module doc)."""
    if peer not in PEERS:
        raise ValueError(f"unknown peer {peer!r}; expected one of {PEERS}")
    if workload not in _SIGNATURES:
        return None
    wrt, reads = _SIGNATURES[workload]
    inputs = [args[i] for i in wrt + reads]
    return _GRADIENTS[peer](workload, inputs, len(wrt))


# -- math shared by several peers ------------------------------------------------------


def _sumsq(xp, x):
    return xp.sum(x ** 2)


def _gm3(xp, r, w, Ax, Ay, p):
    a, alpha, ubar, beta, D1, D2 = p
    u, v = r[:, :, 0], r[:, :, 1]
    du = D1 * (Ay @ u + u @ Ax) + a * u * u / v + ubar - alpha * u
    dv = D2 * (Ay @ v + v @ Ax) + a * u * u - beta * v
    return xp.sum(xp.stack([du, dv], -1) * w)


@lru_cache
def _below_diagonal(d):
    """(rows, cols) of the entries below the diagonal in icf's order: column by column."""
    cols, rows = np.triu_indices(d, 1)
    return rows, cols


def _gmm(xp, lse, alphas, means, icf, x, Q):
    """The GMM objective given Q (k, d, d), built by each peer from icf."""
    n, d = x.shape
    sum_qs = xp.sum(icf[:, :d], 1)
    xc = x[None, :, :] - means[:, None, :]
    Qxc = xp.einsum("krc,knc->knr", Q, xc)
    main_term = alphas[:, None] + sum_qs[:, None] - 0.5 * xp.sum(Qxc * Qxc, 2)
    prior = 0.5 * xp.sum(Q * Q) - xp.sum(sum_qs)
    return -0.5 * n * d * math.log(2 * math.pi) + xp.sum(lse(main_term, 0)) - n * lse(alphas, 0) + prior


def _mlp_logits(xp, W1, b1, W2, b2, W3, b3, X):
    h1 = xp.tanh(X @ W1 + b1)
    h2 = xp.tanh(h1 @ W2 + b2)
    return h2 @ W3 + b3


def _mlp(xp, lse, W1, b1, W2, b2, W3, b3, X, labels):
    logits = _mlp_logits(xp, W1, b1, W2, b2, W3, b3, X)
    return xp.mean(lse(logits, 1) - logits[xp.arange(len(labels)), labels])


def _rk4_step(x, y, z, sigma, rho, beta, dt):
    k1x, k1y, k1z = sigma * (y - x), x * (rho - z) - y, x * y - beta * z
    x2, y2, z2 = x + 0.5 * dt * k1x, y + 0.5 * dt * k1y, z + 0.5 * dt * k1z
    k2x, k2y, k2z = sigma * (y2 - x2), x2 * (rho - z2) - y2, x2 * y2 - beta * z2
    x3, y3, z3 = x + 0.5 * dt * k2x, y + 0.5 * dt * k2y, z + 0.5 * dt * k2z
    k3x, k3y, k3z = sigma * (y3 - x3), x3 * (rho - z3) - y3, x3 * y3 - beta * z3
    x4, y4, z4 = x + dt * k3x, y + dt * k3y, z + dt * k3z
    k4x, k4y, k4z = sigma * (y4 - x4), x4 * (rho - z4) - y4, x4 * y4 - beta * z4
    return (x + dt / 6.0 * (k1x + 2.0 * k2x + 2.0 * k3x + k4x),
            y + dt / 6.0 * (k1y + 2.0 * k2y + 2.0 * k3y + k4y),
            z + dt / 6.0 * (k1z + 2.0 * k2z + 2.0 * k3z + k4z))


def _lorenz_loop(traj, params, dt):
    """Scalar time loop, the state in Python variables (traj is read at row 0 only)."""
    x, y, z = traj[0, 0], traj[0, 1], traj[0, 2]
    sigma, rho, beta = params[0], params[1], params[2]
    for _ in range(traj.shape[0] - 1):
        x, y, z = _rk4_step(x, y, z, sigma, rho, beta, dt)
    return x + y + z


def _tuple_res(x):
    res = 0.0
    for v in (x[0][0], x[0][1]):
        res += v * v
    return res


# -- JAX -------------------------------------------------------------------------------


def _import_jax():
    import jax

    jax.config.update("jax_enable_x64", True)
    return jax


def _jax_gmm(jnp, lse, alphas, means, icf, x):
    k, d = means.shape
    rows, cols = _below_diagonal(d)
    diag = np.arange(d)
    Q = jnp.zeros((k, d, d)).at[:, diag, diag].set(jnp.exp(icf[:, :d])).at[:, rows, cols].set(icf[:, d:])
    return _gmm(jnp, lse, alphas, means, icf, x, Q)


def _jax_lorenz(lax, traj, params, dt):
    sigma, rho, beta = params[0], params[1], params[2]

    def step(state, _):
        return _rk4_step(*state, sigma, rho, beta, dt), None

    (x, y, z), _ = lax.scan(step, (traj[0, 0], traj[0, 1], traj[0, 2]), length=traj.shape[0] - 1)
    return x + y + z


def _jax_losses(jax):
    jnp, lse = jax.numpy, jax.scipy.special.logsumexp
    gmm = partial(_jax_gmm, jnp, lse)
    return {
        "sumsq_inplace": partial(_sumsq, jnp),
        "sumsq_vectorized": partial(_sumsq, jnp),
        "gm3_rhs": partial(_gm3, jnp),
        "gmm_objective": gmm,
        "gmm_objective_dot": gmm,
        "mlp_loss": partial(_mlp, jnp, lse),
        "lorenz_rk4": partial(_jax_lorenz, jax.lax),
        "tuple_iter": _tuple_res,
    }


def _jax_gradient(workload, inputs, n_wrt):
    jax = _import_jax()
    grad = jax.jit(jax.grad(_jax_losses(jax)[workload], argnums=tuple(range(n_wrt))))
    inputs = [jax.numpy.array(a) for a in inputs]  # copies; constants are arguments, not closed over

    def gradient():
        return tuple(np.asarray(g) for g in jax.block_until_ready(grad(*inputs)))

    return gradient


# -- PyTorch ---------------------------------------------------------------------------


def _torch_gmm(torch, alphas, means, icf, x):
    k, d = means.shape
    rows, cols = _below_diagonal(d)
    diag = np.arange(d)
    Q = icf.new_zeros((k, d, d))  # fresh per call: in-place writes into it are allowed
    Q[:, diag, diag] = torch.exp(icf[:, :d])
    Q[:, rows, cols] = icf[:, d:]
    return _gmm(torch, torch.logsumexp, alphas, means, icf, x, Q)


def _torch_mlp(torch, W1, b1, W2, b2, W3, b3, X, labels):
    return torch.nn.functional.cross_entropy(_mlp_logits(torch, W1, b1, W2, b2, W3, b3, X), labels)


def _torch_tuple_iter(torch, x):
    """The primal unchanged, with `out` allocated afresh on every call."""
    out = torch.zeros(1, dtype=torch.float64)
    out[0] = _tuple_res(x)
    return out[0]


def _torch_losses(torch):
    return {
        "sumsq_inplace": partial(_sumsq, torch),
        "sumsq_vectorized": partial(_sumsq, torch),
        "gm3_rhs": partial(_gm3, torch),
        "gmm_objective": partial(_torch_gmm, torch),
        "gmm_objective_dot": partial(_torch_gmm, torch),
        "mlp_loss": partial(_torch_mlp, torch),
        "lorenz_rk4": _lorenz_loop,
        "tuple_iter": partial(_torch_tuple_iter, torch),
    }


def _torch_gradient(workload, inputs, n_wrt):
    import torch

    loss = _torch_losses(torch)[workload]
    inputs = [torch.tensor(a) if isinstance(a, np.ndarray) else a for a in inputs]  # copies, dtype kept
    wrt = [t.requires_grad_() for t in inputs[:n_wrt]]

    def gradient():
        return tuple(g.numpy() for g in torch.autograd.grad(loss(*inputs), wrt))

    return gradient


# -- HIPS autograd ---------------------------------------------------------------------


@lru_cache
def _scatter(d):
    """Constant 0/1 matrix S with Q.ravel() = [exp(q), l] @ S (autograd has no item assignment)."""
    rows, cols = _below_diagonal(d)
    S = np.zeros((d + len(rows), d * d))
    S[np.arange(d), np.arange(d) * (d + 1)] = 1.0
    S[d + np.arange(len(rows)), rows * d + cols] = 1.0
    return S


def _autograd_gmm(anp, lse, alphas, means, icf, x):
    k, d = means.shape
    values = anp.concatenate([anp.exp(icf[:, :d]), icf[:, d:]], 1)
    Q = anp.reshape(values @ _scatter(d), (k, d, d))
    return _gmm(anp, lse, alphas, means, icf, x, Q)


def _autograd_losses():
    import autograd.numpy as anp
    from autograd.scipy.special import logsumexp as lse

    gmm = partial(_autograd_gmm, anp, lse)
    return {
        "sumsq_inplace": partial(_sumsq, anp),
        "sumsq_vectorized": partial(_sumsq, anp),
        "gm3_rhs": partial(_gm3, anp),
        "gmm_objective": gmm,
        "gmm_objective_dot": gmm,
        "mlp_loss": partial(_mlp, anp, lse),
        "lorenz_rk4": _lorenz_loop,
        "tuple_iter": _tuple_res,
    }


def _autograd_gradient(workload, inputs, n_wrt):
    import autograd

    grad = autograd.grad(_autograd_losses()[workload], tuple(range(n_wrt)))
    inputs = [np.array(a) if isinstance(a, np.ndarray) else a for a in inputs]  # copies

    def gradient():
        return tuple(grad(*inputs))

    return gradient


_GRADIENTS = {"jax": _jax_gradient, "torch": _torch_gradient, "autograd": _autograd_gradient}
