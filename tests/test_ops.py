"""ops.ssog against docs/DESIGN.md §1, evaluated cell by cell in plain Python (exact rationals, float64)."""

import math
from fractions import Fraction
from functools import cache

import pytest
import torch

from ssog_lab import ops
from ssog_lab.bench.subnormals import count_subnormal
from ssog_lab.ops import kronecker
from ssog_lab.ops import reference as ref
from ssog_lab.ops.reference import ssog_reference


@cache
def g_line(i: int, mu: float, sigma: float, length: int) -> tuple[float, ...]:
    """g(i → j; μ, σ) for j = 0 … length−1: softmax_j(−(j − i − μ)²/(2σ²)).

    The squared distances are exact rationals and the logits are taken relative to the largest one in
    log space, so the definition holds on the whole domain: far-off centres, σ → 0 (one-hot on the nearest
    grid point, 50/50 at an exact tie) and σ → ∞ (uniform).
    """
    centre = Fraction(i) + Fraction(mu)
    squares = [(Fraction(j) - centre) ** 2 for j in range(length)]
    low = min(squares)

    def logit(gap: Fraction) -> float:  # −gap / (2σ²) ≤ 0, computed as a log so that nothing overflows
        if gap == 0:
            return 0.0
        log_magnitude = math.log(gap.numerator) - math.log(gap.denominator) - math.log(2) - 2 * math.log(sigma)
        return -math.inf if log_magnitude > 700 else -math.exp(log_magnitude)

    e = [math.exp(logit(sq - low)) for sq in squares]
    return tuple(x / sum(e) for x in e)


def g(i: int, j: int, mu: float, sigma: float, length: int) -> float:
    return g_line(i, mu, sigma, length)[j]


def brute_force(v, mu, sigma, amp, grid):
    """Y from the formulas, one output cell and atom at a time. Fixed or steered parameters."""
    height, width = grid
    b_size, heads, n, d = v.shape
    steered = mu.dim() == 5
    y = torch.zeros_like(v, dtype=torch.float64)
    for b in range(b_size):
        for h in range(heads):
            values = v[b, h].double().reshape(height, width, d)
            for r in range(height):
                for c in range(width):
                    for m in range(mu.shape[-2]):
                        def p(t, rr, cc, axis=None):
                            sel = t[b, h, rr * width + cc, m] if steered else t[h, m]
                            return float(sel[axis]) if axis is not None else float(sel)
                        w_row = torch.tensor(g_line(r, p(mu, r, c, 0), p(sigma, r, c, 0), height),
                                             dtype=torch.float64)  # (H,) over r'
                        # The column stage is parameterized by the intermediate token (r', c).
                        w_col = torch.tensor([g_line(c, p(mu, r2, c, 1), p(sigma, r2, c, 1), width)
                                              for r2 in range(height)], dtype=torch.float64)  # (H, W) over (r', c')
                        y[b, h, r * width + c] += p(amp, r, c) * torch.einsum("y,yx,yxd->d", w_row, w_col, values)
    return y


def random_params(heads, atoms, grid, batch=None, spread=2.0, dtype=torch.float64, gen=None):
    n = grid[0] * grid[1]
    lead = (heads, atoms) if batch is None else (batch, heads, n, atoms)
    mu = (torch.rand(*lead, 2, generator=gen, dtype=dtype) * 2 - 1) * spread
    sigma = torch.rand(*lead, 2, generator=gen, dtype=dtype) * 2 + 0.3
    amp = torch.randn(*lead, generator=gen, dtype=dtype)
    return mu, sigma, amp


GRIDS = [(3, 3), (2, 5), (1, 6), (4, 1), (5, 4)]


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("steered", [False, True])
def test_matches_brute_force(grid, steered):
    gen = torch.Generator().manual_seed(hash((grid, steered)) % 2**31)
    v = torch.randn(2, 2, grid[0] * grid[1], 3, generator=gen, dtype=torch.float64)
    mu, sigma, amp = random_params(2, 3, grid, batch=2 if steered else None, gen=gen)
    expected = brute_force(v, mu, sigma, amp, grid)
    for dense in (True, False):
        got = ssog_reference(v, mu, sigma, amp, grid, dense=dense)
        torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(ops.ssog(v, mu, sigma, amp, grid), expected, rtol=1e-10, atol=1e-12)


def test_off_grid_centres_and_tiny_sigma_are_finite():
    grid = (4, 5)
    v = torch.randn(1, 1, 20, 2, dtype=torch.float64)
    mu = torch.tensor([[[50.0, -80.0], [0.3, 0.2]]], dtype=torch.float64)  # (1, 2, 2)
    sigma = torch.tensor([[[1e-3, 1e-3], [1e-3, 2.0]]], dtype=torch.float64)
    amp = torch.tensor([[1.0, -0.5]], dtype=torch.float64)
    expected = brute_force(v, mu, sigma, amp, grid)
    for dense in (True, False):
        got = ssog_reference(v, mu, sigma, amp, grid, dense=dense)
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, expected)
    # A far-off centre puts all weight on the nearest edge: row atom at +50 maps to row H−1.
    k = ops.dense_kernel(mu[:, :1], sigma[:, :1], torch.ones(1, 1, dtype=torch.float64), grid)
    assert torch.allclose(k[0].sum(-1), torch.ones(20, dtype=torch.float64))
    assert k[0, 0, 3 * 5 + 0] == pytest.approx(1.0)


@pytest.mark.parametrize("steered, grid", [(False, (17, 40)), (True, (17, 20))])
def test_long_axes_match_brute_force(steered, grid):
    """Axes > 16 and ≥ 2^17 weights per call: the sizes of every grid at 512² and above."""
    gen = torch.Generator().manual_seed(3)
    n = grid[0] * grid[1]
    v = torch.randn(1, 1, n, 2, generator=gen, dtype=torch.float64)
    mu, sigma, amp = random_params(1, 2, grid, batch=1 if steered else None, spread=8.0, gen=gen)
    if not steered:  # make the fixed call large enough: a batch of 200 images of which one is checked
        v = torch.cat([v, torch.randn(199, 1, n, 2, generator=gen, dtype=torch.float64)])
    expected = brute_force(v[:1], mu, sigma, amp, grid)
    got = ssog_reference(v, mu, sigma, amp, grid, dense=False)[:1]
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-12)


# Parameters at the edges of the valid domain: (μ, σ) per atom and axis, all exactly representable in float32,
# so that i + μ is exact and the limits are exact: tiny σ at a centre on a grid point, at an exact half-integer
# (50/50), far off both ends (one-hot on the clamped end point, even with a huge σ at 1e8), σ huge (uniform).
EDGE_MU = [[0.0, 0.5], [2.5, -1e8], [1e8, 3e7], [-0.25, 1000.0], [0.75, -3.0]]
EDGE_SIGMA = [[1e-30, 1e-30], [1e-25, 1e3], [1e3, 1e-3], [0.3, 0.3], [1e9, 5e-21]]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("steered", [False, True])
def test_edges_of_the_domain_match_the_definition(dtype, steered):
    grid = (4, 5)
    heads, atoms, n = 1, len(EDGE_MU), 20
    mu = torch.tensor(EDGE_MU, dtype=dtype)[None]  # (1, M, 2)
    sigma = torch.tensor(EDGE_SIGMA, dtype=dtype)[None]
    if dtype == torch.float64:
        sigma = sigma.where(sigma > 1e-20, sigma**8)  # float64 reaches 1e-240 and below
    amp = torch.linspace(-1, 1.5, atoms, dtype=dtype)[None]
    if steered:  # every token its own atoms: roll the atom list by the token index
        roll = torch.arange(n)[:, None].add(torch.arange(atoms)).remainder(atoms)  # (N, M)
        mu, sigma, amp = (t[:, roll][None] for t in (mu, sigma, amp))  # (1, heads, N, M, …)
    v = torch.randn(1 if steered else 2, heads, n, 3, dtype=dtype)
    expected = brute_force(v, mu, sigma, amp, grid)
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-5)
    for dense in (True, False):
        got = ssog_reference(v, mu, sigma, amp, grid, dense=dense)
        torch.testing.assert_close(got.double(), expected, **tol)
    ties = ops.axis_weights(torch.arange(3.0, dtype=dtype), torch.tensor(0.5, dtype=dtype),
                            torch.tensor(1e-30, dtype=dtype), 4)
    torch.testing.assert_close(ties, torch.tensor([[0.5, 0.5, 0, 0], [0, 0.5, 0.5, 0], [0, 0, 0.5, 0.5]],
                                                  dtype=dtype), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("steered", [False, True])
@pytest.mark.parametrize("dense", [False, True])
@pytest.mark.parametrize("width", [0.3, 1e15, 1e20])
def test_no_subnormal_weights_intermediates_or_gradients(dtype, steered, dense, width):
    """σ = 0.3 on a 128-long axis and centres 1000 tokens off: the old evaluation left 2-3 % of the
    weights subnormal, which slows matrix products many-fold on some CPUs (forward and backward). Huge σ:
    the gradients of μ and σ carry 1/σ² and 1/σ³ (float32 σ = 10¹⁵ and 10¹⁷…10²² left subnormal entries)."""
    gen = torch.Generator().manual_seed(5)
    grid = (128, 3) if not dense else (128, 2)  # dense: a 256 × 256 kernel
    n = grid[0] * grid[1]
    v = torch.randn(1, 1, n, 2, generator=gen, dtype=torch.float64)
    mu, sigma, amp = random_params(1, 3, grid, batch=1 if steered else None, spread=30.0, gen=gen)
    sigma.fill_(width)
    mu[..., 0, :] += 1000.0  # atom 0 far off the grid on both axes
    inputs = [t.to(dtype, copy=True).requires_grad_() for t in (v, mu, sigma, amp)]
    saved = []

    def pack(t):
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = ssog_reference(*inputs, grid, dense=dense)
    y.backward(torch.randn(y.shape, generator=gen, dtype=torch.float64).to(dtype))
    with torch.no_grad():  # the in-place evaluation used without autograd
        weights = (ref._steered_axis_weights if steered else ref.axis_matrices)(
            *(t.to(ref._compute_dtype(dtype)) for t in inputs[1:3]), grid)
    tensors = [y, *weights, *saved, *(t.grad for t in inputs)]
    assert len(saved) >= 5
    assert [count_subnormal(t) for t in tensors] == [0] * len(tensors)
    assert all(bool(torch.isfinite(t).all()) for t in tensors if t.is_floating_point())
    assert width > 1 or any(bool((w == 0).any()) for w in weights)  # the tails are there, cut to exact zeros
    # Still the definition, at the current tolerances: the float64 brute force of the inputs as rounded to dtype
    # (the steered brute force on 128-long axes would take seconds: the float64 dense path, itself checked
    # against the brute force elsewhere in this file, is the oracle there).
    rounded = [t.detach().double() for t in inputs]
    expected = (ssog_reference(*rounded, grid, dense=True) if steered
                else brute_force(*rounded, grid))
    tol = {torch.float64: dict(rtol=1e-10, atol=1e-12), torch.float32: dict(rtol=1e-5, atol=1e-5),
           torch.bfloat16: dict(rtol=8e-3, atol=8e-5 * expected.abs().max().item())}[dtype]
    torch.testing.assert_close(y.detach().double(), expected, **tol)


def test_dense_kernel_with_a_tiny_amplitude_has_no_subnormal_entries():
    """α = 1e-30 times two kept weights (each ≥ 2^-56) falls below float32's smallest normal: flushed to 0."""
    k = ops.dense_kernel(torch.zeros(1, 1, 2), torch.full((1, 1, 2), 0.8), torch.full((1, 1), 1e-30), (6, 6))
    assert count_subnormal(k) == 0 and bool((k == 0).any()) and bool((k > 0).any())


@pytest.mark.parametrize("steered", [False, True])
def test_gradcheck_at_tiny_and_huge_sigma_and_far_centres(steered):
    grid = (3, 4)
    gen = torch.Generator().manual_seed(2)
    v = torch.randn(1, 1, 12, 2, generator=gen, dtype=torch.float64)
    mu = torch.tensor([[[1e3, 0.3], [-1e8, 1.2], [0.4, -0.6], [0.1, 40.0]]], dtype=torch.float64)  # (1, 4, 2)
    sigma = torch.tensor([[[1e-150, 1e-150], [1e6, 0.05], [0.05, 1e6], [3.0, 1e-3]]], dtype=torch.float64)
    amp = torch.tensor([[0.7, -1.1, 0.9, 0.5]], dtype=torch.float64)
    if steered:
        mu, sigma, amp = (t[None, :, None].expand(1, 1, 12, *t.shape[1:]).clone() for t in (mu, sigma, amp))
        mu = mu + 0.01 * torch.randn(mu.shape, generator=gen, dtype=torch.float64)
    inputs = [t.clone().requires_grad_() for t in (v, mu, sigma, amp)]
    for dense in (True, False):
        assert torch.autograd.gradcheck(lambda *a: ssog_reference(*a, grid, dense=dense), inputs,
                                        check_forward_ad=True)
        grads = torch.autograd.grad(ssog_reference(*inputs, grid, dense=dense).sum(), inputs)
        assert all(bool(torch.isfinite(t).all()) for t in grads)


@pytest.mark.parametrize("sigma", [1e-12, 1e-11, 1e-10, 4e-10])
def test_sigma_gradient_is_finite_near_the_float32_floor(sigma):
    # 1/(σ²) would differentiate through 1/σ⁴, which overflows float32 just above the floor.
    v = torch.randn(1, 1, 15, 2, generator=torch.Generator().manual_seed(0))
    mu, amp = torch.full((1, 2, 2), 0.3), torch.ones(1, 2)
    sigma_t = torch.full((1, 2, 2), sigma, requires_grad=True)
    for dense in (True, False):
        (grad,) = torch.autograd.grad(ssog_reference(v, mu, sigma_t, amp, (3, 5), dense=dense).sum(), sigma_t)
        assert torch.isfinite(grad).all()


def test_steered_mixer_with_very_narrow_atoms_stays_finite():
    """Δlog σ = −45 (σ ≈ 1e-20) gave 100 % NaN on the torch backend before; the result is a one-hot mix."""
    from ssog_lab.layers import SSoGMixer

    torch.manual_seed(0)
    mixer = SSoGMixer(32, 4, steered=True, backend="torch")
    with torch.no_grad():
        mixer.steer.bias.view(4, 4, 5)[..., 2:4] = -45.0
    x = torch.randn(2, 100, 32, requires_grad=True)
    y = mixer(x, (10, 10))
    y.sum().backward()
    assert torch.isfinite(y).all() and torch.isfinite(x.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in mixer.parameters() if p.grad is not None)


def test_axis_weights_sum_to_one_in_float32():
    w = ops.axis_weights(torch.arange(7.0)[:, None], torch.tensor([1e4, -3.0, 0.0]), torch.tensor([1e-3, 1e-3, 5.0]), 7)
    assert torch.isfinite(w).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(7, 3))


def test_steered_with_constant_parameters_equals_fixed():
    grid = (4, 6)
    n = 24
    v = torch.randn(3, 2, n, 5, dtype=torch.float64)
    mu, sigma, amp = random_params(2, 4, grid)
    expand = lambda t: t[None, :, None].expand(3, *t.shape[:1], n, *t.shape[1:])  # noqa: E731
    fixed = ops.ssog(v, mu, sigma, amp, grid)
    steered = ops.ssog(v, expand(mu), expand(sigma), expand(amp), grid)
    torch.testing.assert_close(steered, fixed)
    for dense in (True, False):
        torch.testing.assert_close(ssog_reference(v, expand(mu), expand(sigma), expand(amp), grid, dense=dense), fixed)


def test_dense_kernel_is_kronecker_sum():
    grid = (3, 4)
    mu, sigma, amp = random_params(2, 3, grid)
    k = ops.dense_kernel(mu, sigma, amp, grid)
    rows = torch.arange(3.0, dtype=torch.float64)
    cols = torch.arange(4.0, dtype=torch.float64)
    for h in range(2):
        expected = sum(
            amp[h, m] * torch.kron(ops.axis_weights(rows, mu[h, m, 0], sigma[h, m, 0], 3),
                                   ops.axis_weights(cols, mu[h, m, 1], sigma[h, m, 1], 4))
            for m in range(3))
        torch.testing.assert_close(k[h], expected)


def test_axis_matrices_hold_g_of_every_query_position():
    """ops.axis_matrices: G[..., i, j] = g(i → j; μ, σ) from the formula, for any leading shape (heads, M or M)."""
    grid = (3, 5)
    mu, sigma, _ = random_params(2, 3, grid)  # (heads, M, 2)
    g_row, g_col = ops.axis_matrices(mu, sigma, grid)
    assert g_row.shape == (2, 3, 3, 3) and g_col.shape == (2, 3, 5, 5) and g_row.dtype == torch.float64
    for axis, (matrices, length) in enumerate(((g_row, 3), (g_col, 5))):
        for h in range(2):
            for m in range(3):
                expected = [g_line(i, float(mu[h, m, axis]), float(sigma[h, m, axis]), length) for i in range(length)]
                torch.testing.assert_close(matrices[h, m], torch.tensor(expected, dtype=torch.float64))
    one_head = ops.axis_matrices(mu[1], sigma[1], grid)  # one head's (M, 2): (M, H, H), (M, W, W)
    torch.testing.assert_close(one_head[0], g_row[1])
    torch.testing.assert_close(one_head[1], g_col[1])


def test_axis_matrices_of_bfloat16_atoms_are_the_float32_matrices_of_the_same_atoms():
    """Half-precision atoms are computed in float32 from the start: on a 300-long axis the query positions past 256
    are exact (bfloat16 rounds 257 to 256, which would give two rows the same Gaussian)."""
    grid = (300, 3)
    mu = torch.tensor([[0.5, -1.0], [-2.0, 0.25]], dtype=torch.bfloat16)  # (M, 2): exact in bfloat16
    sigma = torch.tensor([[0.75, 1.5], [3.0, 0.5]], dtype=torch.bfloat16)
    half = ops.axis_matrices(mu, sigma, grid)
    single = ops.axis_matrices(mu.float(), sigma.float(), grid)
    assert [m.dtype for m in half] == [torch.float32, torch.float32]
    for got, expected in zip(half, single, strict=True):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
    assert not torch.equal(half[0][0, 257], half[0][0, 256])  # distinct rows past 256


def test_kronecker_kernel_is_the_sum_of_kronecker_products_and_the_dense_kernel():
    """ops.kronecker_kernel = Σ_m α_m G_row,m ⊗ G_col,m entry by entry from the formula, and = ops.dense_kernel
    (float64)."""
    grid = (3, 4)
    mu, sigma, amp = random_params(1, 3, grid)  # (1, M, 2), (1, M)
    kron = ops.kronecker_kernel(mu[0], sigma[0], amp[0], grid)
    assert kron.shape == (12, 12) and kron.dtype == torch.float64
    expected = torch.zeros(12, 12, dtype=torch.float64)
    for r, c, r2, c2 in ((r, c, r2, c2) for r in range(3) for c in range(4) for r2 in range(3) for c2 in range(4)):
        expected[r * 4 + c, r2 * 4 + c2] = sum(
            float(amp[0, m]) * g(r, r2, float(mu[0, m, 0]), float(sigma[0, m, 0]), 3)
            * g(c, c2, float(mu[0, m, 1]), float(sigma[0, m, 1]), 4) for m in range(3))
    torch.testing.assert_close(kron, expected)
    torch.testing.assert_close(kron, ops.dense_kernel(mu, sigma, amp, grid)[0], rtol=1e-13, atol=1e-15)


def test_separability_check_agrees_to_rounding(monkeypatch):
    """ops.separability_check: both differences are float64 rounding on two configurations, the Kronecker sum it
    builds is ops.dense_kernel of its atoms, and it reports a broken identity (the factors in the wrong order)."""
    for grid, atoms, d, seed in (((3, 5), 2, 5, 0), ((4, 2), 3, 2, 1)):
        errors = ops.separability_check(grid=grid, atoms=atoms, d=d, seed=seed)
        assert len(errors) == 2 and all(0 <= error < 1e-12 for error in errors.values())
        generator = torch.Generator().manual_seed(seed)  # the check's own atoms: its first draw from its seed
        mu, sigma, amp = ops.random_atoms(1, atoms, grid, generator=generator, dtype=torch.float64)
        torch.testing.assert_close(ops.kronecker_kernel(mu[0], sigma[0], amp[0], grid),
                                   ops.dense_kernel(mu, sigma, amp, grid)[0], rtol=0, atol=1e-12)
    swapped = lambda mu, sigma, amp, grid: ops.kronecker_kernel(mu.flip(-1), sigma.flip(-1), amp, grid[::-1])
    monkeypatch.setattr(kronecker, "kronecker_kernel", swapped)  # G_col ⊗ G_row: column-major tokens
    broken = ops.separability_check(grid=(3, 5), atoms=2)
    assert broken["max |K_dense − Σ α G_row ⊗ G_col|"] > 1e-3


@pytest.mark.parametrize("steered", [False, True])
@pytest.mark.parametrize("dense", [False, True])
def test_gradcheck(steered, dense):
    grid = (3, 2)
    gen = torch.Generator().manual_seed(1)
    v = torch.randn(2, 2, 6, 2, generator=gen, dtype=torch.float64)
    params = random_params(2, 2, grid, batch=2 if steered else None, gen=gen)
    inputs = [t.clone().requires_grad_() for t in (v, *params)]
    assert torch.autograd.gradcheck(lambda *a: ssog_reference(*a, grid, dense=dense), inputs, check_forward_ad=True)


def test_axis_weights_derivatives_in_every_mode_match_the_formula():
    """The closed-form derivatives (backward and forward mode), under torch.func's transforms and under
    torch.autograd.forward_ad, agree with autograd's chain through the formula α·softmax_j(−(j − i − μ)²/(2σ²))."""
    gen = torch.Generator().manual_seed(3)
    query = torch.arange(5.0, dtype=torch.float64)[:, None]  # (5, 1)
    mu, log_sigma, amp = (torch.randn(3, generator=gen, dtype=torch.float64) for _ in range(3))
    primals = (query, mu, log_sigma.exp(), amp)
    by_formula = lambda q, m, s, a: a[..., None] * torch.softmax(  # noqa: E731
        -(torch.arange(5.0, dtype=torch.float64) - q[..., None] - m[..., None]) ** 2 / (2 * s[..., None] ** 2), -1)
    by_library = lambda q, m, s, a: ops.axis_weights(q, m, s, 5, a)  # noqa: E731
    for jacobian in (torch.func.jacfwd, torch.func.jacrev):
        for arg in range(4):
            torch.testing.assert_close(jacobian(by_library, argnums=arg)(*primals),
                                       jacobian(by_formula, argnums=arg)(*primals))
    # Forward mode with parameters that require grad (a model's): the closed-form jvp, not the plain chain.
    tangents = tuple(torch.randn(t.shape, generator=gen, dtype=torch.float64) for t in primals)
    forward_ad = torch.autograd.forward_ad
    with forward_ad.dual_level():
        duals = [forward_ad.make_dual(t.clone().requires_grad_(), d) for t, d in zip(primals, tangents, strict=True)]
        tangent = forward_ad.unpack_dual(by_library(*duals)).tangent
    torch.testing.assert_close(tangent, torch.func.jvp(by_formula, primals, tangents)[1])


def test_float32_close_to_float64():
    grid = (8, 8)
    v = torch.randn(2, 3, 64, 8, dtype=torch.float64)
    mu, sigma, amp = random_params(3, 4, grid)
    expected = ops.ssog(v, mu, sigma, amp, grid)
    for dense in (True, False):
        got = ssog_reference(*(t.float() for t in (v, mu, sigma, amp)), grid, dense=dense)
        assert got.dtype == torch.float32
        torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-5 * expected.abs().max().item())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_types_mix_in_float32(dtype):
    """Weights, stage-1 intermediate and atom sum in float32, the output rounded once: with cancelling
    amplitudes and centres 1000 tokens off, the result is within 2× the output's rounding (2^-8 for bf16) of
    the exact result for the rounded inputs. Weights in bf16 miss it by 20-60× (dense and separable)."""
    gen = torch.Generator().manual_seed(0)
    grid = (17, 6)
    v = torch.randn(2, 2, 102, 4, generator=gen, dtype=torch.float64)
    mu, sigma, _ = random_params(2, 5, grid, spread=3.0, gen=gen)
    mu[:, :2, 0] += 1e3
    amp = torch.tensor([[1.0, -1.0, 0.8, -0.8, 0.02]] * 2, dtype=torch.float64)  # Σα = 0.02, Σ|α| = 3.6
    low = [t.to(dtype) for t in (v, mu, sigma, amp)]
    expected = ops.ssog(*(t.double() for t in low), grid)
    for dense in (True, False):
        got = ssog_reference(*low, grid, dense=dense)
        assert got.dtype == dtype
        torch.testing.assert_close(got.double(), expected, rtol=8e-3, atol=8e-5 * expected.abs().max().item())


def test_large_grid_never_builds_dense(monkeypatch):
    import ssog_lab.ops.reference as ref

    def fail(*args, **kwargs):
        raise AssertionError("dense kernel built on a large grid")

    monkeypatch.setattr(ref, "dense_kernel_reference", fail)
    out = ops.ssog(torch.randn(1, 2, 16 * 16, 4), *random_params(2, 3, (16, 16), dtype=torch.float32), (16, 16))
    assert out.shape == (1, 2, 256, 4)


@pytest.mark.parametrize("batch, grid", [(1, (6, 6)), (1, (7, 6)), (1, (8, 8)), (64, (8, 8)), (1, (9, 8)),
                                         (64, (17, 16))])
def test_fixed_path_choice_follows_the_cost_model(monkeypatch, batch, grid):
    """Built per call, the fixed dense kernel is used where `_fixed_dense_pays_off` says so (small grids at large
    B·d, never above DENSE_MAX_TOKENS); prepared once (prepare_fixed), for N ≤ DENSE_MAX_TOKENS_PREPARED at any
    batch size."""
    n = grid[0] * grid[1]
    built = []
    real = ref.dense_kernel_reference
    monkeypatch.setattr(ref, "dense_kernel_reference", lambda *a: built.append(1) or real(*a))
    params = random_params(2, 3, grid, dtype=torch.float32)
    ops.ssog(torch.randn(batch, 2, n, 2), *params, grid)
    assert bool(built) == ref._fixed_dense_pays_off(batch * 2, 3, grid)
    assert bool(built) == (batch == 64 and n <= ref.DENSE_MAX_TOKENS)
    assert (ref.prepare_fixed(*params, grid).kernel is not None) == (n <= ref.DENSE_MAX_TOKENS_PREPARED)


@pytest.mark.parametrize("dense", [False, True])
def test_fixed_backward_zero_fills_no_per_atom_buffer(dense):
    """The fixed operator's backward zero-fills no buffer larger than the values (B·heads·N·d numbers): the
    backward of per-atom slices of a saved tensor would allocate and zero-fill a gradient M times that size per
    atom. Counted as the profiler's fill_ / zero_ events (no timing)."""
    from torch.profiler import profile

    gen = torch.Generator().manual_seed(0)
    grid, atoms = (5, 6), 8
    v = torch.randn(2, 3, 30, 4, generator=gen, requires_grad=True)  # (B, heads, N, d)
    params = [t.float().requires_grad_() for t in random_params(3, atoms, grid, gen=gen)]
    y = ssog_reference(v, *params, grid, dense=dense)
    with profile(record_shapes=True) as prof:
        y.backward(torch.ones_like(y))
    filled = [math.prod(e.input_shapes[0]) for e in prof.events() if e.name in ("aten::fill_", "aten::zero_")]
    assert filled and max(filled) <= v.numel()
    assert all(t.grad is not None for t in (v, *params))


@pytest.mark.parametrize("dense", [True, False])
@pytest.mark.parametrize("grid", [(3, 3), (5, 4), (1, 6)])
def test_prepared_fixed_operator_matches_brute_force_at_any_batch(grid, dense):
    """One prepared operator (kernel or factors) serves values of any batch size, in any float dtype."""
    gen = torch.Generator().manual_seed(7)
    mu, sigma, amp = random_params(3, 2, grid, gen=gen)
    op = ref.prepare_fixed(mu, sigma, amp, grid, dense=dense)
    assert (op.kernel is None) == (op.row is not None) == (op.col_t is not None) == (not dense)
    for batch in (1, 4):
        v = torch.randn(batch, 3, grid[0] * grid[1], 2, generator=gen, dtype=torch.float64)
        torch.testing.assert_close(ref.apply_fixed(v, op), brute_force(v, mu, sigma, amp, grid),
                                   rtol=1e-10, atol=1e-12)
        got = ref.apply_fixed(v.float(), op)
        assert got.dtype == torch.float32
        torch.testing.assert_close(got.double(), brute_force(v, mu, sigma, amp, grid), rtol=1e-5, atol=1e-6)


def _good():
    v = torch.randn(2, 2, 12, 4)
    mu, sigma, amp = random_params(2, 3, (3, 4), dtype=torch.float32)
    return dict(v=v, mu=mu, sigma=sigma, amp=amp, grid=(3, 4))


@pytest.mark.parametrize("change, message", [
    (dict(grid=(3, 5)), "N=12"),
    (dict(grid=(3,)), "grid must be a pair"),
    (dict(v=torch.randn(2, 12, 4)), "v must be"),
    (dict(v=torch.zeros(2, 2, 12, 4, dtype=torch.int64)), "v must be"),
    (dict(sigma=torch.zeros(2, 3, 2)), "sigma must be finite and > 0"),
    (dict(sigma=torch.full((2, 3, 2), float("nan"))), "sigma must be finite"),
    (dict(sigma=torch.ones(2, 4, 2)), "sigma must have the shape of mu"),
    (dict(mu=torch.zeros(2, 3, 3), sigma=torch.ones(2, 3, 3)), "mu must have shape"),
    (dict(amp=torch.ones(2, 4)), "amp must have shape"),
    (dict(mu=torch.zeros(3, 3, 2), sigma=torch.ones(3, 3, 2), amp=torch.ones(3, 3)), "mu has 3 heads"),
    (dict(mu=torch.zeros(2, 2, 11, 3, 2), sigma=torch.ones(2, 2, 11, 3, 2), amp=torch.ones(2, 2, 11, 3)), "steered mu"),
    (dict(backend="cuda"), "backend must be one of"),
    (dict(grid=(None, 4)), "grid must be a pair"),
    (dict(grid=(float("inf"), 1)), "grid must be a pair"),
    (dict(grid=(float("nan"), 4)), "grid must be a pair"),
    (dict(grid=(True, 12), v=torch.randn(2, 2, 12, 4)), "grid must be a pair"),
    (dict(grid=(3.0, 4)), "grid must be a pair"),
    (dict(mu=torch.zeros(2, 0, 2), sigma=torch.ones(2, 0, 2), amp=torch.ones(2, 0)), r"M ≥ 1"),
    (dict(mu=torch.zeros(2, 2, 12, 0, 2), sigma=torch.ones(2, 2, 12, 0, 2), amp=torch.ones(2, 2, 12, 0)), r"M ≥ 1"),
    (dict(v=torch.randn(0, 2, 12, 4)), "v must be"),
    (dict(v=torch.randn(2, 2, 12, 0)), "v must be"),
    (dict(v=torch.randn(2, 0, 12, 4), mu=torch.zeros(0, 3, 2), sigma=torch.ones(0, 3, 2), amp=torch.ones(0, 3)),
     "v must be"),
    (dict(v=torch.randn(2, 2, 12, 4).index_fill_(2, torch.tensor([5]), float("nan"))), "v must be finite"),
    (dict(v=torch.randn(2, 2, 12, 4).index_fill_(2, torch.tensor([5]), float("inf"))), "v must be finite"),
    (dict(mu=torch.full((2, 3, 2), float("inf"))), "mu must be finite"),
    (dict(amp=torch.full((2, 3), float("nan"))), "amp must be finite"),
])
def test_bad_input_raises(change, message):
    kwargs = _good() | change
    with pytest.raises(ValueError, match=message):
        ops.ssog(**kwargs)


def test_empty_heads_are_rejected_by_dense_kernel():
    with pytest.raises(ValueError, match="B, heads, N ≥ 1"):
        ops.dense_kernel(torch.zeros(0, 3, 2), torch.ones(0, 3, 2), torch.ones(0, 3), (3, 4))


def test_auto_backend_keeps_cpu_and_fixed_parameters_on_torch():
    from ssog_lab.ops import _triton_pays_off

    v = torch.randn(1, 1, 4, 2)
    assert not _triton_pays_off(v, steered=True)  # CPU tensors: torch, whatever is installed
    assert not _triton_pays_off(v.double(), steered=False)


def test_auto_backend_sends_cuda_float64_to_torch(monkeypatch):
    """The rule on CUDA, without one: a stand-in for a CUDA tensor, CUDA reported available, triton importable
    (stubbed where it is not installed). float32/bfloat16/float16 steered go to Triton; float64 and fixed stay."""
    import sys
    import types

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setitem(sys.modules, "triton", sys.modules.get("triton") or types.ModuleType("triton"))
    on_cuda = lambda dtype: types.SimpleNamespace(is_cuda=True, dtype=dtype, device=torch.device("cuda"))
    assert ops.triton_available("cuda")
    for dtype in (torch.float32, torch.bfloat16, torch.float16):  # the stand-in does reach Triton …
        assert ops._triton_pays_off(on_cuda(dtype), steered=True), dtype
        assert not ops._triton_pays_off(on_cuda(dtype), steered=False), dtype
    assert not ops._triton_pays_off(on_cuda(torch.float64), steered=True)  # … but never in float64


def test_triton_backend_refused_where_it_cannot_run(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(ValueError, match="backend='triton' cannot run"):
        ops.ssog(**_good(), backend="triton")


def test_check_values_false_still_checks_shapes():
    kwargs = _good() | dict(sigma=torch.zeros(2, 3, 2))
    assert torch.isfinite(ops.ssog(**(kwargs | dict(sigma=torch.ones(2, 3, 2))), check_values=False)).all()
    ops.ssog(**kwargs, check_values=False)  # σ = 0 is not looked at …
    with pytest.raises(ValueError, match="amp must have shape"):  # … but shapes still are
        ops.ssog(**(kwargs | dict(amp=torch.ones(2, 4))), check_values=False)
