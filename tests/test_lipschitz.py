"""Lipschitz tools against their definitions: dense kernels, full Jacobians, closed-form ODE solutions."""

import math

import pytest
import torch

from ssog_lab import lipschitz, ops
from ssog_lab.layers import SDPAMixer, SSoGMixer
from ssog_lab.models import Branch, ViTConfig


def random_atoms(seed, heads=3, atoms=4):
    generator = torch.Generator().manual_seed(seed)
    mu = torch.randn(heads, atoms, 2, generator=generator, dtype=torch.float64) * 3  # some centres far off
    sigma = torch.rand(heads, atoms, 2, generator=generator, dtype=torch.float64) * 4 + 0.2
    amp = torch.randn(heads, atoms, generator=generator, dtype=torch.float64)  # signed: centre–surround
    return mu, sigma, amp


@pytest.mark.parametrize(("seed", "grid"), [(0, (9, 10)), (1, (4, 5)), (2, (12, 7))])
def test_ssog_power_iteration_equals_dense_kernel_norm_and_respects_bound(seed, grid):
    mu, sigma, amp = random_atoms(seed)
    exact = lipschitz.ssog_spectral_norm(mu, sigma, amp, grid)
    dense = lipschitz.ssog_dense_spectral_norm(mu, sigma, amp, grid)
    assert exact.shape == (3,)
    torch.testing.assert_close(exact, dense, rtol=1e-6, atol=0)
    # K ⊗ I_d has the norm of K: check the definition on the kernel acting on d = 3 value channels.
    kron = torch.kron(ops.dense_kernel(mu, sigma, amp, grid)[0], torch.eye(3, dtype=torch.float64))
    torch.testing.assert_close(torch.linalg.matrix_norm(kron, ord=2), dense[0])
    assert (exact <= lipschitz.ssog_lipschitz_bound(mu, sigma, amp, grid) * (1 + 1e-12)).all()


def test_bound_is_tight_for_one_atom():
    mu, sigma, amp = random_atoms(3, atoms=1)
    torch.testing.assert_close(lipschitz.ssog_lipschitz_bound(mu, sigma, amp, (6, 8)),
                               lipschitz.ssog_dense_spectral_norm(mu, sigma, amp, (6, 8)))


def full_jacobian_norm(func, x):
    jacobian = torch.autograd.functional.jacobian(func, x, vectorize=True).reshape(x.numel(), x.numel())
    return torch.linalg.matrix_norm(jacobian, ord=2)


def test_jacobian_power_iteration_equals_full_jacobian_norm():
    torch.manual_seed(4)
    x = torch.randn(1, 12, 16, dtype=torch.float64)
    attention = SDPAMixer(16, 2).double()
    branch = Branch(ViTConfig(dim=16, heads=2, ssog_heads=4, mixer="ssog-steered")).double()
    with torch.no_grad():
        branch.mixer.steer.weight.normal_(0, 0.1)  # a non-linear SSoG branch
    for func in (lambda z: attention(z, (3, 4)), lambda z: branch(z, (3, 4))):
        torch.testing.assert_close(lipschitz.jacobian_spectral_norm(func, x), full_jacobian_norm(func, x),
                                   rtol=1e-6, atol=0)


def test_fixed_ssog_mixer_norm_is_that_of_its_linear_map():
    torch.manual_seed(5)
    dim, heads, grid = 8, 4, (3, 5)
    n = grid[0] * grid[1]
    mixer = SSoGMixer(dim, heads).double()
    kernel = ops.dense_kernel(*mixer.atom_parameters(), grid)  # (heads, N, N)
    channel_head = torch.arange(dim) // (dim // heads)  # head of each channel
    # Token-major flattening (n, c): per-channel kernel K_h(c) between tokens, identity across channels.
    mixing = torch.einsum("cnm,cd->ncmd", kernel[channel_head], torch.eye(dim, dtype=torch.float64))
    linear = (torch.kron(torch.eye(n, dtype=torch.float64), mixer.proj.weight) @ mixing.reshape(n * dim, n * dim)
              @ torch.kron(torch.eye(n, dtype=torch.float64), mixer.value.weight))
    x = torch.randn(1, n, dim, dtype=torch.float64)
    torch.testing.assert_close(lipschitz.jacobian_spectral_norm(lambda z: mixer(z, grid), x),
                               torch.linalg.matrix_norm(linear.detach(), ord=2), rtol=1e-6, atol=0)


def trained_like_branch(seed, dim=8, heads=2):
    """A fixed-SSoG branch in float64 with every weight moved off its initialization (γ not 1)."""
    torch.manual_seed(seed)
    branch = Branch(ViTConfig(dim=dim, ssog_heads=heads, mixer="ssog", mlp_ratio=2)).double()
    with torch.no_grad():
        branch.norm.weight.uniform_(0.5, 1.5)
        branch.mixer.amp.normal_()
    return branch


def test_gelu_max_slope_is_the_largest_derivative():
    x = torch.linspace(-6, 6, 200_001, dtype=torch.float64, requires_grad=True)
    (slope,) = torch.autograd.grad(torch.nn.functional.gelu(x).sum(), x)
    assert slope.abs().max().item() == pytest.approx(lipschitz.GELU_MAX_SLOPE, rel=1e-9)  # |min slope| ≈ 0.13


def test_mlp_bound_is_reached_in_one_dimension():
    """A 1-unit MLP w₂·GELU(w₁x + b) with its pre-activation at √2 (GELU's steepest point) attains ‖W₂‖·1.129·‖W₁‖."""
    branch = Branch(ViTConfig(dim=1, heads=1, ssog_heads=1, mixer="ssog", mlp_ratio=1)).double()
    with torch.no_grad():
        branch.mlp[0].weight.fill_(0.8), branch.mlp[0].bias.fill_(2**0.5), branch.mlp[2].weight.fill_(-1.5)
    bound = lipschitz.branch_lipschitz_bound(branch, (1, 1))
    slope = full_jacobian_norm(branch.mlp, torch.zeros(1, 1, 1, dtype=torch.float64))
    assert slope.item() == pytest.approx(bound["mlp"], rel=1e-9)
    assert bound["mlp"] == pytest.approx(1.2 * 1.129, rel=1e-3)


@pytest.mark.parametrize("seed", [0, 1])
def test_branch_bound_holds_at_any_input_and_its_factors_are_the_definitions(seed):
    branch, grid = trained_like_branch(seed), (3, 4)
    bound = lipschitz.branch_lipschitz_bound(branch, grid)
    f = lambda z: branch(z, grid)  # noqa: E731
    generator = torch.Generator().manual_seed(seed)
    # Ordinary inputs, and nearly constant tokens (variance ≪ ε), where LayerNorm's slope is steepest.
    flat = torch.ones(1, 12, 8, dtype=torch.float64) + 1e-4 * torch.randn(1, 12, 8, generator=generator,
                                                                            dtype=torch.float64)
    for x in (torch.randn(1, 12, 8, generator=generator, dtype=torch.float64) * 3, flat):
        assert full_jacobian_norm(f, x) <= bound["total"]
    # Each factor against its definition: the mixer's and the MLP's Jacobians stay below their products of norms,
    # and LayerNorm's Jacobian at a constant token (var = 0) is exactly its factor.
    mixer, mlp = branch.mixer, branch.mlp
    x = torch.randn(1, 12, 8, generator=generator, dtype=torch.float64)
    assert full_jacobian_norm(lambda z: mixer(z, grid), x) <= bound["mixer"] * (1 + 1e-12)
    assert full_jacobian_norm(mlp, x) <= bound["mlp"] * (1 + 1e-12)
    constant = torch.full((1, 1, 8), 0.7, dtype=torch.float64)
    assert full_jacobian_norm(branch.norm, constant).item() == pytest.approx(bound["layernorm"], rel=1e-9)
    assert bound["total"] == pytest.approx(bound["layernorm"] * (bound["mixer"] + bound["mlp"]))


def test_branch_bound_rejects_branches_without_a_closed_form():
    for mixer in ("ssog-steered", "sdpa"):
        branch = Branch(ViTConfig(dim=8, heads=2, ssog_heads=2, mixer=mixer))
        with pytest.raises(ValueError, match="branch must be a residual branch with a fixed SSoG mixer"):
            lipschitz.branch_lipschitz_bound(branch, (2, 2))


def test_ray_sweep_attention_grows_fixed_ssog_stays():
    """Dense attention is not globally Lipschitz (Kim, Papamakarios & Mnih, 2021). Construction: random tokens
    with one token at the origin and Q/K biases zero. That token's logits are 0 at every scale s, so its
    attention stays uniform and never saturates, while the derivative of its output with respect to itself
    grows like s² (through the keys and values of the other tokens, both ∝ s). Fixed SSoG is linear."""
    torch.manual_seed(6)
    grid, scales = (4, 4), [1.0, 10.0, 100.0]
    x = torch.randn(1, 16, 16, dtype=torch.float64)
    x[0, 0] = 0.0
    attention = SDPAMixer(16, 2).double()
    with torch.no_grad():
        attention.qkv.bias.zero_()
    ssog = SSoGMixer(16, 4).double()
    attention_norms = lipschitz.ray_sweep(lambda z: attention(z, grid), x, scales)
    ssog_norms = lipschitz.ray_sweep(lambda z: ssog(z, grid), x, scales)
    assert attention_norms[-1] >= 10 * attention_norms[0]
    assert (attention_norms.diff() > 0).all()
    assert ((ssog_norms - ssog_norms[0]).abs() <= 0.01 * ssog_norms[0]).all()


def test_ray_points_are_unit_rms_and_the_tied_one_ties_the_zero_tokens_scores():
    """lipschitz.ray_point: random tokens of unit RMS (generic), or one token (index 1) chosen so that every zero
    token's scores against all tokens are equal at every s, in each head of the attention mixers of ray_mixers."""
    generic = lipschitz.ray_point()
    assert generic.shape == (1, 16, 16) and generic.dtype == torch.float64
    torch.testing.assert_close(generic.pow(2).mean(-1), torch.ones(1, 16, dtype=torch.float64))
    torch.testing.assert_close(lipschitz.ray_point(), generic)  # the same seed, the same ray
    x = lipschitz.ray_point(tied=True)
    assert [int(n) for n in (x.abs().sum(-1) > 0).nonzero()[:, 1]] == [1]  # one non-zero token, at index 1
    assert float(x[0, 1].pow(2).mean()) == pytest.approx(1.0)
    modules = lipschitz._ray_modules(16, 2, 0)
    assert list(modules) == list(lipschitz.ray_mixers()) == ["SDPA (dense attention)", "axial attention", "fixed SSoG"]
    for module in (m for m in modules.values() if hasattr(m, "qkv")):
        for s in (1.0, 10.0):
            q, k, _ = module.qkv(s * x).chunk(3, dim=-1)  # (1, N, C) each
            scores = (q[0, 0].reshape(2, 8)[:, None] * k[0].reshape(16, 2, 8).transpose(0, 1)).sum(-1)  # (heads, N)
            torch.testing.assert_close(scores, scores[:, :1].expand_as(scores))  # a zero token's scores: all equal
    sdpa = lipschitz.ray_mixers()["SDPA (dense attention)"]
    norms = lipschitz.ray_sweep(sdpa, x, [256.0, 1024.0], steps=30, tol=1e-6)
    assert 10 < float(norms[1] / norms[0]) < 20  # ‖J‖ ∝ s² on the tied ray: ×16 from s = 256 to 1024


def test_ray_mixers_and_ray_point_leave_the_global_rng_state_as_it_was():
    """The rays' mixers are built under a forked RNG: building them (ray_mixers, or ray_point's tied point, which
    builds them too) neither reseeds the caller's global generator nor draws from it."""
    torch.manual_seed(1234)
    state = torch.random.get_rng_state()
    mixers = lipschitz.ray_mixers((3, 5), 8, 2, 7)
    lipschitz.ray_point((3, 5), 8, 2, 7, tied=True)
    assert torch.equal(torch.random.get_rng_state(), state)
    expected = torch.Generator().manual_seed(1234)
    assert torch.equal(torch.rand(4), torch.rand(4, generator=expected))  # the caller's stream goes on unchanged
    again = lipschitz.ray_mixers((3, 5), 8, 2, 7)  # the same seed, the same mixers, whatever the global state
    x = lipschitz.ray_point((3, 5), 8, 2, 7)
    for name, func in mixers.items():
        torch.testing.assert_close(func(x), again[name](x), rtol=0, atol=0)


def test_picard_iterates_converge_to_the_linear_ode_solution():
    a = torch.tensor([[0.0, 1.0], [-1.0, -0.1]], dtype=torch.float64)  # damped oscillator
    t = torch.linspace(0, 2, 201, dtype=torch.float64)
    x0 = torch.tensor([1.0, 0.0], dtype=torch.float64)
    iterates = lipschitz.picard(lambda s, x: a @ x, x0, t, iterations=12)
    assert iterates.shape == (13, 201, 2)
    exact = torch.stack([torch.linalg.matrix_exp(a * s) @ x0 for s in t])  # (T, 2)
    errors = (iterates - exact).abs().amax(dim=(1, 2))
    assert (errors[2:11].diff() < 0).all()  # contraction until the quadrature floor
    assert errors[-1] < 1e-4 and errors[0] > 1


def test_picard_on_exponential_gives_taylor_partial_sums():
    t = torch.linspace(0, 1, 401, dtype=torch.float64)
    iterates = lipschitz.picard(lambda s, x: x, torch.ones(1, dtype=torch.float64), t, iterations=4)
    torch.testing.assert_close(iterates[1, :, 0], 1 + t)  # trapezoid is exact on a linear integrand
    taylor = sum(t**j / math.factorial(j) for j in range(5))
    torch.testing.assert_close(iterates[4, :, 0], taylor, rtol=0, atol=1e-5)


def test_bad_arguments():
    mixer = SSoGMixer(8, 2, steered=True)
    steered = mixer.atom_parameters(torch.randn(1, 6, 8))
    with pytest.raises(ValueError, match=r"mu must be fixed parameters \(heads, M, 2\)"):
        lipschitz.ssog_spectral_norm(*steered, (2, 3))
    with pytest.raises(ValueError, match=r"mu must be fixed parameters \(heads, M, 2\)"):
        lipschitz.ssog_lipschitz_bound(*steered, (2, 3))
    with pytest.raises(ValueError, match="t must be a 1-D grid of at least 2 times"):
        lipschitz.picard(lambda s, x: x, torch.ones(1), torch.zeros(1))


def test_picard_bound_is_the_exponential_series_tail():
    assert lipschitz.picard_bound(1.0, 1.0, 1.0, 0) == pytest.approx(math.e - 1)
    assert lipschitz.picard_bound(2.0, 3.0, 0.5, 2) == pytest.approx(1.5 * (math.e - 1 - 1 - 0.5))
    # Λ = 0 is the limit Λ → 0 of the series: F₀T for the starting guess, exact after one iterate
    assert lipschitz.picard_bound(0.0, 3.0, 0.5, 0) == pytest.approx(lipschitz.picard_bound(1e-9, 3.0, 0.5, 0))
    assert lipschitz.picard_bound(0.0, 3.0, 0.5, 1) == 0.0
    # a small ΛT: the tail is its first term, (F₀/Λ)(ΛT)⁴/4! here, not the noise of exp(ΛT) minus its head
    assert lipschitz.picard_bound(1e-6, 1.0, 1.0, 3) == pytest.approx(1e-18 / 24, rel=1e-5)
    for bad in ((-1.0, 1.0, 1.0, 0), (1.0, -1.0, 1.0, 0), (1.0, 1.0, -1.0, 0), (1.0, 1.0, 1.0, -1),
                (math.nan, 1.0, 1.0, 0)):
        with pytest.raises(ValueError, match="must be ≥ 0"):
            lipschitz.picard_bound(*bad)


def test_the_spectral_norm_iteration_refuses_zero_steps():
    x = torch.randn(1, 4, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="steps must be ≥ 1, got 0"):
        lipschitz.jacobian_spectral_norm(torch.tanh, x, steps=0)


def test_jacobian_norm_along_ray_of_a_linear_map_is_its_norm_at_every_scale():
    x = torch.randn(1, 4, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for s in (0.5, 1.0, 8.0):
        assert lipschitz.jacobian_norm_along_ray(lambda y: 2.0 * y, x, s) == pytest.approx(2.0, rel=1e-4)
