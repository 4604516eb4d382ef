"""zymo demo: exact derivatives of imperative NumPy code, as written.

Run:  python examples/demo.py
Each example differentiates ordinary code (loops, in-place writes, out= buffers,
views, captured buffers), checks the result against central finite differences,
and prints the derivative program zymo generated.
"""
from __future__ import annotations

import numpy as np

import zymo
from zymo import Active, Const, Duplicated, Forward, Reverse


def fd_grad(f, x, eps=1e-6):
    """Central finite differences of scalar f at array x (f may mutate its input)."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def banner(title):
    print("\n" + "=" * 78 + f"\n{title}\n" + "=" * 78)


# 1. A loop that overwrites its input (PEERS.md: sumsq_inplace; JAX, torch and autograd refuse it)
def sumsq_inplace(x):
    for i in range(len(x)):
        x[i] = x[i] ** 2
    return x.sum()


# 2. Seed 002: matmul into a preallocated output
def mul(R, A, B):
    np.matmul(A, B, out=R)


# 3. Lorenz system, RK4 written as a scalar loop into a preallocated trajectory
def lorenz(s, sigma, rho, beta):
    x, y, z = s
    return sigma * (y - x), x * (rho - z) - y, x * y - beta * z


def lorenz_rk4(traj, params, dt):
    sigma, rho, beta = params
    for i in range(traj.shape[0] - 1):
        s = (traj[i, 0], traj[i, 1], traj[i, 2])
        k1 = lorenz(s, sigma, rho, beta)
        s2 = (s[0] + 0.5 * dt * k1[0], s[1] + 0.5 * dt * k1[1], s[2] + 0.5 * dt * k1[2])
        k2 = lorenz(s2, sigma, rho, beta)
        s3 = (s[0] + 0.5 * dt * k2[0], s[1] + 0.5 * dt * k2[1], s[2] + 0.5 * dt * k2[2])
        k3 = lorenz(s3, sigma, rho, beta)
        s4 = (s[0] + dt * k3[0], s[1] + dt * k3[1], s[2] + dt * k3[2])
        k4 = lorenz(s4, sigma, rho, beta)
        for j in range(3):
            traj[i + 1, j] = s[j] + dt / 6.0 * (k1[j] + 2.0 * k2[j] + 2.0 * k3[j] + k4[j])
    n = traj.shape[0] - 1
    return traj[n, 0] + traj[n, 1] + traj[n, 2]


# 4. Seed 003: a closure writing into a captured buffer
buf = np.array([1.0])


def closure(x):
    buf[0] = 1.0
    buf[0] += x
    return buf[0] ** 2


# 6. Python as people write it: *args, a dict of options, a list built in a loop, a
#    comprehension, try/except around a solve, an input check
def features(x, *weights, **opts):
    assert x.ndim == 1, "x must be 1-d"
    rows = []
    for i in range(x.shape[0] - 1):
        rows.append(x[i] * x[i + 1])
    scale = opts.get("scale", 1.0)
    terms = [w * np.sum(np.sin(x) ** (k + 1)) for k, w in enumerate(weights)]
    return scale * np.sum(np.array(rows)) + sum(terms)


def robust_solve(A, b):
    try:
        y = np.linalg.solve(A, b)
    except np.linalg.LinAlgError:
        y = b * 0.5
    return np.sum(y ** 2)


def everyday(x, A):
    return features(x, 0.5, 2.0, scale=3.0) + robust_solve(A, x[:2])


# 7. PolyBench's trisolv as written (loops, in-place): compile only the loops (numba="kernels")
def trisolv(L, x, b):
    n = L.shape[0]
    for i in range(n):
        x[i] = b[i]
        for j in range(i):
            x[i] -= L[i, j] * x[j]
        x[i] = x[i] / L[i, i]
    return np.sum(x * x)


# 8. A finite-difference residual (sparse Jacobian) and a spectral loss (complex numbers, FFTs)
def residual(u):
    r = np.empty_like(u)
    r[1:-1] = u[:-2] - 2.0 * u[1:-1] + u[2:] + 0.01 * np.exp(u[1:-1])
    r[0] = u[0] - 0.5
    r[-1] = u[-1] - 0.5
    return r


def spectral(x, H):
    return np.sum(np.abs(np.fft.ifft(H * np.fft.fft(x))) ** 2)


def main():
    rng = np.random.default_rng(0)

    banner("1. sumsq_inplace: for i: x[i] = x[i]**2; return x.sum()   (reverse mode)")
    x = rng.random(5)
    (g,) = zymo.gradient(Reverse, sumsq_inplace, x.copy())
    print("zymo gradient :", g)
    print("2x (exact)    :", 2 * x)
    print("max |zymo - FD|:", np.abs(g - fd_grad(lambda v: sumsq_inplace(v.copy()), x)).max())
    print("\nGenerated reverse-mode code:\n")
    print(zymo.generated_code(Reverse, sumsq_inplace, Active, Duplicated(x.copy(), np.zeros(5))))

    banner("2. Seed 002: np.matmul(A, B, out=R), reverse mode, non-square")
    A, B = rng.random((4, 3)), rng.random((3, 2))
    R = np.zeros((4, 2))
    dA, dB, dR = np.zeros_like(A), np.zeros_like(B), rng.random((4, 2))
    dR0 = dR.copy()
    zymo.autodiff(Reverse, mul, Const, Duplicated(R, dR), Duplicated(A, dA), Duplicated(B, dB))
    print("dA == dR0 @ B.T :", np.allclose(dA, dR0 @ B.T))
    print("dB == A.T @ dR0 :", np.allclose(dB, A.T @ dR0))
    print("dR == 0         :", bool(np.all(dR == 0)))
    print("\nGenerated reverse-mode code:\n")
    print(zymo.generated_code(Reverse, mul, Const, Duplicated(R, dR), Duplicated(A, dA), Duplicated(B, dB)))

    banner("3. Lorenz RK4, 200 steps, scalar loop into a preallocated trajectory")
    params = (10.0, 28.0, 8.0 / 3.0)
    traj = np.zeros((201, 3))
    traj[0] = (1.0, 1.0, 1.0)
    dtraj = np.zeros_like(traj)
    (derivs, loss) = zymo.autodiff(zymo.ReverseWithPrimal, lorenz_rk4, Active, Duplicated(traj, dtraj),
                                   Active(params), Const(0.005))
    print("loss                        :", loss)
    print("d loss / d (sigma, rho, beta):", derivs[1])
    print("d loss / d initial state     :", dtraj[0])

    def loss_of(p):
        t = np.zeros((201, 3))
        t[0] = (1.0, 1.0, 1.0)
        return lorenz_rk4(t, tuple(p), 0.005)

    print("finite differences (params)  :", fd_grad(loss_of, np.array(params)))
    t0 = np.zeros((201, 3))
    t0[0] = 1.0
    tangent = np.zeros_like(t0)
    tangent[0, 0] = 1.0
    (tan,) = zymo.autodiff(Forward, lorenz_rk4, Duplicated, Duplicated(t0, tangent), Const(params), Const(0.005))
    print("forward mode d loss / d x0   :", tan, "(reverse:", dtraj[0, 0], ")")

    banner("4. Seed 003: closure writing into a captured buffer (correct by default)")
    for xv in (0.5, 2.0):
        ((d,),) = zymo.autodiff(Reverse, closure, Active, Active(xv))
        print(f"x = {xv}: zymo {d:.6f}   exact 2*(1+x) = {2 * (1 + xv):.6f}")

    banner("5. Batch mode, a Jacobian and a Hessian (forward mode over zymo's reverse program)")
    x0 = np.array([1.0, 1.0, 1.0])

    def final_state(x_init):
        t = np.zeros((51, 3))
        t[0] = x_init
        lorenz_rk4(t, params, 0.005)
        return t[-1].copy()

    J = zymo.jacobian(Forward, final_state, x0)          # 3 tangents in one batched call
    print("Jacobian of the final state wrt the initial state (batched forward mode):\n", J)
    print("the same by batched reverse mode:", np.allclose(J, zymo.jacobian(Reverse, final_state, x0)))
    H = zymo.hessian(lambda v: sumsq_inplace(v) * v[0], np.array([1.0, 2.0, 3.0]))
    # sumsq_inplace squares v in place, so v[0] is read after the overwrite: f = |v|^2 v0^2
    print("Hessian of sumsq_inplace(v) * v[0] (= |v|^2 v0^2) at (1, 2, 3):\n", H)

    banner("6. Python as people write it: *args, **opts, lists, comprehensions, try/except, assert")
    xe, Ae = rng.random(4), np.array([[2.0, 1.0], [1.0, 3.0]])
    gx, gA = zymo.gradient(Reverse, everyday, xe.copy(), Ae.copy())
    print("d/dx zymo :", gx)
    print("d/dx FD   :", fd_grad(lambda v: everyday(v, Ae.copy()), xe))
    print("forward   :", zymo.gradient(Forward, everyday, xe.copy(), Ae.copy())[0])
    print("\nGenerated reverse-mode code:\n")
    print(zymo.generated_code(Reverse, everyday, Active, Duplicated(xe.copy(), np.zeros(4)),
                              Duplicated(Ae.copy(), np.zeros((2, 2)))))

    banner("7. Compile only the loops: numba='kernels' (PolyBench trisolv)")
    n = 6
    L = np.tril(rng.random((n, n))) + 3 * np.eye(n)
    b = rng.random(n)
    gL, _, gb = zymo.gradient(Reverse, trisolv, L.copy(), np.zeros(n), b.copy(), numba="kernels")
    py = zymo.gradient(Reverse, trisolv, L.copy(), np.zeros(n), b.copy(), numba=False)
    print("d/db (loops compiled)   :", gb)
    print("d/db (Python backend)   :", py[2])
    print("d/db finite differences :", fd_grad(lambda v: trisolv(L.copy(), np.zeros(n), v), b))
    print("\nThe kernels (compiled with Numba at their first call), then the program:\n")
    print(zymo.generated_code(Reverse, trisolv, Active, Duplicated(L.copy(), np.zeros_like(L)),
                              Duplicated(np.zeros(n), np.zeros(n)), Duplicated(b.copy(), np.zeros(n)),
                              numba="kernels"))

    banner("8. A sparse Jacobian (3 colors) and a spectral loss through complex FFTs")
    u = rng.random(8)
    Js = zymo.jacobian(Forward, residual, u, sparse=True)
    print(f"sparse Jacobian: {Js.nnz} nonzeros of {Js.shape[0] * Js.shape[1]}, equal to the dense one:",
          np.allclose(Js.toarray(), zymo.jacobian(Forward, residual, u)))
    xs, Hs = rng.random(16), np.exp(-np.arange(16.0)) + 0.5j
    gs = zymo.gradient(Reverse, spectral, xs, Const(Hs))[0]
    print("spectral loss gradient (zymo):", gs[:4])
    print("finite differences          :", fd_grad(lambda v: spectral(v, Hs), xs)[:4])

    banner("The IR of sumsq_inplace")
    print(zymo.ir(sumsq_inplace, x.copy()))


if __name__ == "__main__":
    main()
