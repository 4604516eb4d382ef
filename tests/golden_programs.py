"""The functions whose derivative programs `tests/codegen/test_golden.py` compares with
`tests/golden/*.txt` (their own module: the programs carry source line numbers, which edits
of the test file must not move)."""
import math

import numpy as np

import zymo


def damped(x, a):
    return math.exp(-a * x * x) * math.sin(3.0 * x) + a / (1.0 + x * x)


def energy(x, w):
    return np.sum(w * np.tanh(x) ** 2) + np.dot(x, x)


def relax(u, n):
    """A loop whose adjoint needs each iteration's values (a stacked cache)."""
    s = 0.0
    for i in range(n):
        v = np.sin(u * (i + 1.0))
        s += np.sum(v * v)
    return s


def overwrite(x, y):
    """A store into `x` after `x` is read: the adjoint reads a copy."""
    s = np.sum(x * y)
    for i in range(x.shape[0] - 1):
        x[i] = x[i + 1] * y[i]
    return s + np.sum(np.exp(x))


def clipped(x, lo):
    s = 0.0
    for i in range(x.shape[0]):
        if x[i] > lo:
            s += x[i] * x[i]
        else:
            s += lo * x[i]
    return s


def halve(a, tol):
    while a > tol:
        a = a * 0.5 + math.sin(a) * 0.1
    return a


def layer(W, x, h):
    np.matmul(W, x, out=h)
    np.tanh(h, out=h)
    return np.sum(h * h)


def diffusion(u0, n):
    u = u0.copy()
    for _t in zymo.checkpointed(range(n), snapshots=2):
        u[1:-1] += 0.1 * (u[:-2] - 2.0 * u[1:-1] + u[2:] - 0.2 * u[1:-1] ** 3)
    return np.sum(u * u)
