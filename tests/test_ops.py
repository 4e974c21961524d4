"""ops.ssog against DESIGN.md §1, evaluated cell by cell in plain Python (float64)."""

import math

import pytest
import torch

from ssog_lab import ops
from ssog_lab.ops.reference import ssog_reference


def g(i: int, j: int, mu: float, sigma: float, length: int) -> float:
    """g(i → j; μ, σ) = softmax_j(−(j − i − μ)²/(2σ²)), with the max subtracted for stability."""
    logits = [-((jj - i - mu) ** 2) / (2 * sigma**2) for jj in range(length)]
    top = max(logits)
    z = sum(math.exp(x - top) for x in logits)
    return math.exp(logits[j] - top) / z


def brute_force(v, mu, sigma, amp, grid):
    """Y from the formulas, one output cell at a time. Fixed or steered parameters."""
    height, width = grid
    b_size, heads, n, d = v.shape
    steered = mu.dim() == 5
    y = torch.zeros_like(v, dtype=torch.float64)
    for b in range(b_size):
        for h in range(heads):
            for r in range(height):
                for c in range(width):
                    out = y[b, h, r * width + c]
                    for m in range(mu.shape[-2]):
                        def p(t, rr, cc, axis=None):
                            sel = t[b, h, rr * width + cc, m] if steered else t[h, m]
                            return float(sel[axis]) if axis is not None else float(sel)
                        alpha = p(amp, r, c)
                        for r2 in range(height):
                            wr = g(r, r2, p(mu, r, c, 0), p(sigma, r, c, 0), height)
                            for c2 in range(width):
                                # The column stage is parameterized by the intermediate token (r2, c).
                                wc = g(c, c2, p(mu, r2, c, 1), p(sigma, r2, c, 1), width)
                                out += alpha * wr * wc * v[b, h, r2 * width + c2].double()
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


@pytest.mark.parametrize("steered", [False, True])
@pytest.mark.parametrize("dense", [False, True])
def test_gradcheck(steered, dense):
    grid = (3, 2)
    gen = torch.Generator().manual_seed(1)
    v = torch.randn(2, 2, 6, 2, generator=gen, dtype=torch.float64)
    params = random_params(2, 2, grid, batch=2 if steered else None, gen=gen)
    inputs = [t.clone().requires_grad_() for t in (v, *params)]
    assert torch.autograd.gradcheck(lambda *a: ssog_reference(*a, grid, dense=dense), inputs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_low_precision_close_to_float64(dtype):
    grid = (8, 8)
    v = torch.randn(2, 3, 64, 8, dtype=torch.float64)
    mu, sigma, amp = random_params(3, 4, grid)
    expected = ops.ssog(v, mu, sigma, amp, grid)
    tol = {torch.float32: 1e-5, torch.bfloat16: 3e-2}[dtype]
    for dense in (True, False):
        got = ssog_reference(*(t.to(dtype) for t in (v, mu, sigma, amp)), grid, dense=dense)
        assert got.dtype == dtype
        torch.testing.assert_close(got.double(), expected, rtol=tol, atol=tol * expected.abs().max().item())


def test_large_grid_never_builds_dense(monkeypatch):
    import ssog_lab.ops.reference as ref

    def fail(*args, **kwargs):
        raise AssertionError("dense kernel built on a large grid")

    monkeypatch.setattr(ref, "dense_kernel_reference", fail)
    out = ops.ssog(torch.randn(1, 2, 16 * 16, 4), *random_params(2, 3, (16, 16), dtype=torch.float32), (16, 16))
    assert out.shape == (1, 2, 256, 4)


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
])
def test_bad_input_raises(change, message):
    kwargs = _good() | change
    with pytest.raises(ValueError, match=message):
        ops.ssog(**kwargs)


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
