"""A function that draws from NumPy's global generator (`np.random.normal(size=...)` inside it),
differentiated by operators that run it more than once (`gradient(Forward)`, `jacobian`,
`hessian`: chunks of eight lanes, a primal call then derivatives). Every pass sees the draws
one call of the function makes, and the generator ends where that call leaves it, as
`gradient(Reverse)` (one pass) does (helper 66: lanes of later chunks saw other draws)."""
import numpy as np
import pytest
from helpers import fd_grad

import zymo
from zymo import Forward, Reverse


def noisy_loss(x):
    n = np.random.normal(size=x.shape)
    return np.sum((x * n) ** 2)


def noisy_map(x):
    n = np.random.normal(size=x.shape)
    return (x * n) ** 2


def _noise(seed, size):
    np.random.seed(seed)
    return np.random.normal(size=size)


def _state():
    """The whole state of NumPy's global generator (its key, position and cached Gaussian)."""
    name, key, pos, has_gauss, gauss = np.random.get_state()
    return key.copy(), pos, has_gauss, gauss


def _same(a, b):
    np.testing.assert_array_equal(a[0], b[0])
    assert a[1:] == b[1:]


@pytest.mark.parametrize("what", ["gradient_forward", "gradient_reverse", "jacobian_forward", "jacobian_reverse",
                                  "hessian"])
def test_every_pass_sees_the_draws_of_one_call(what):
    x = np.linspace(-1.0, 1.0, 12)  # 12 elements: two chunks of lanes
    n = _noise(5, 12)
    after = _state()  # where one call leaves the generator
    np.random.seed(5)
    got = {
        "gradient_forward": lambda: zymo.gradient(Forward, noisy_loss, x.copy())[0],
        "gradient_reverse": lambda: zymo.gradient(Reverse, noisy_loss, x.copy())[0],
        "jacobian_forward": lambda: np.diag(zymo.jacobian(Forward, noisy_map, x.copy())),
        "jacobian_reverse": lambda: np.diag(zymo.jacobian(Reverse, noisy_map, x.copy())),
        "hessian": lambda: np.diag(zymo.hessian(noisy_loss, x.copy())),
    }[what]()
    _same(_state(), after)
    want = 2.0 * n * n if what == "hessian" else 2.0 * x * n * n
    np.testing.assert_allclose(got, want, rtol=1e-13)
    if what == "gradient_forward":  # against central differences, each evaluation with the same draws
        def fixed(v):
            np.random.seed(5)
            return noisy_loss(v)
        np.testing.assert_allclose(got, fd_grad(fixed, [x])[0], rtol=1e-6, atol=1e-9)


def test_a_function_that_draws_nothing_leaves_the_generator_alone():
    np.random.seed(3)
    before = _state()
    H = zymo.hessian(lambda_free, np.linspace(0.0, 1.0, 10))
    np.testing.assert_allclose(np.diag(H), 6.0 * np.linspace(0.0, 1.0, 10), rtol=1e-13)
    _same(_state(), before)


def lambda_free(x):
    return np.sum(x ** 3)


def noisy_two(x, y):
    n = np.random.normal(size=x.shape)
    return np.sum((x * n) ** 2) + y * np.sum(n)


@pytest.mark.parametrize("what", ["gradient_forward_two", "hessian_memory_limit", "hvp_memory_limit",
                                  "jacobian_sparse", "hessian_sparse"])
def test_every_pass_sees_the_draws_of_one_call_elsewhere(what):
    """Helper 67's cases: a second argument of `gradient(Forward)`, the memory-limited Hessian and
    hvp, and the sparse Jacobian and Hessian (whose pattern detection runs `f`'s ops too)."""
    x = np.linspace(-1.0, 1.0, 12)
    n = _noise(7, 12)
    after = _state()
    np.random.seed(7)
    if what == "gradient_forward_two":
        gx, gy = zymo.gradient(Forward, noisy_two, x.copy(), 0.5)
        np.testing.assert_allclose(gx, 2.0 * x * n * n, rtol=1e-13)
        assert gy == pytest.approx(np.sum(n), rel=1e-13)
    elif what == "hessian_memory_limit":
        H = zymo.hessian(noisy_loss, x.copy(), memory_limit=10_000)
        np.testing.assert_allclose(np.diag(H), 2.0 * n * n, rtol=1e-13)
    elif what == "hvp_memory_limit":
        hv, g = zymo.hvp_and_gradient(noisy_loss, x.copy(), np.ones(12), memory_limit=10_000)
        np.testing.assert_allclose(hv, 2.0 * n * n, rtol=1e-13)
        np.testing.assert_allclose(g, 2.0 * x * n * n, rtol=1e-13)
    elif what == "jacobian_sparse":
        J = zymo.jacobian(Forward, noisy_map, x.copy(), sparse=True, detect="local")
        np.testing.assert_allclose(J.diagonal(), 2.0 * x * n * n, rtol=1e-13)
    else:
        H = zymo.hessian(noisy_loss, x.copy(), sparse=True, detect="local")
        np.testing.assert_allclose(H.diagonal(), 2.0 * n * n, rtol=1e-13)
    _same(_state(), after)


@zymo.inactive
def _noise_of(x):
    return np.random.normal(size=x.shape)


def noisy_through_inactive(x):
    n = _noise_of(x)
    return np.sum((x * n) ** 2)


def test_draws_inside_an_inactive_function_are_rewound_too():
    """An inactive function may draw (helper 68): every pass sees one call's draws there too."""
    x = np.linspace(-1.0, 1.0, 12)
    zymo.gradient(Reverse, noisy_through_inactive, x.copy())  # lowered once: typing the inactive call draws
    np.random.seed(9)
    state = _state()
    n = np.random.normal(size=12)
    after = _state()
    np.random.set_state(("MT19937", state[0], *state[1:]))
    g = zymo.gradient(Forward, noisy_through_inactive, x.copy())[0]
    np.testing.assert_allclose(g, 2.0 * x * n * n, rtol=1e-13)
    _same(_state(), after)


def drawing_loop(x):
    s = x.copy()
    for _ in range(8):
        s[:] = np.sin(s) * np.random.normal(size=s.shape) + s
    return np.sum(s)


def test_a_loop_that_draws_is_not_checkpointed():
    """Checkpointing runs iterations again, which would draw other numbers (helper 68: a wrong
    gradient under a tight memory limit): refused at the line that draws."""
    from zymo.transform.checkpoint import CheckpointError

    x = np.linspace(0.1, 1.0, 50)
    with pytest.raises(CheckpointError, match="draws from np.random") as info:
        zymo.gradient(Reverse, drawing_loop, x.copy(), memory_limit=1000)
    assert "test_random_draws.py" in str(info.value)
    np.random.seed(4)
    g = zymo.gradient(Reverse, drawing_loop, x.copy())[0]
    def fixed(v):
        np.random.seed(4)
        return drawing_loop(v)
    np.testing.assert_allclose(g, fd_grad(fixed, [x])[0], rtol=1e-6, atol=1e-8)


def seeded_draws_in_a_loop(x, c):
    np.random.seed(3)
    for _ in range(2):
        u = np.random.random()
        for i in range(x.shape[0]):
            x[i] = x[i] * np.exp(c * u)
    return np.sum(x * x)


def test_kernels_draw_from_numpys_generator():
    """Under "kernels", a loop that draws from NumPy's global generator stays Python: compiled,
    it drew from Numba's own generator, which the program's `np.random.seed(3)` does not reach,
    so the arrays and the gradient were those of other draws (helper 79)."""
    x = np.linspace(0.2, 0.9, 5)
    want = x.copy()
    value = seeded_draws_in_a_loop(want, 0.7)
    src = zymo.generated_code(Reverse, seeded_draws_in_a_loop, zymo.Active, zymo.Duplicated(x.copy(), np.zeros(5)),
                              zymo.Active(0.7), numba="kernels")
    assert "np.random.random()" not in src.split("# the program (Python)")[0]
    fd = fd_grad(seeded_draws_in_a_loop, [x.copy(), 0.7])
    for numba in (False, "kernels"):
        xs = x.copy()
        (dx, dc), v = zymo.gradient(zymo.ReverseWithPrimal, seeded_draws_in_a_loop, xs, 0.7, numba=numba)
        assert v == pytest.approx(value, rel=1e-14)
        np.testing.assert_allclose(xs, want, rtol=1e-14)
        np.testing.assert_allclose(dx, fd[0], rtol=1e-6)
        assert dc == pytest.approx(fd[1], rel=1e-6) and dc != 0.0
