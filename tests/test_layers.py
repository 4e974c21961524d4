"""Mixers against their definitions: nn.MultiheadAttention, masked dense attention, the fixed twin."""

import math

import pytest
import torch
import torch.nn.functional as F

from ssog_lab import ops
from ssog_lab.layers import AxialSDPAMixer, SDPAMixer, SSoGMixer
from ssog_lab.models import ViTConfig


@pytest.mark.parametrize("backend", ["auto", "math"])
def test_sdpa_mixer_equals_multihead_attention(backend):
    torch.manual_seed(0)
    dim, heads = 24, 3
    mixer = SDPAMixer(dim, heads, backend=backend).double()
    mha = torch.nn.MultiheadAttention(dim, heads, batch_first=True).double()
    with torch.no_grad():
        mha.in_proj_weight.copy_(mixer.qkv.weight)
        mha.in_proj_bias.copy_(mixer.qkv.bias)
        mha.out_proj.weight.copy_(mixer.proj.weight)
        mha.out_proj.bias.copy_(mixer.proj.bias)
    x = torch.randn(2, 12, dim, dtype=torch.float64)
    expected, _ = mha(x, x, x, need_weights=False)
    torch.testing.assert_close(mixer(x, grid=(3, 4)), expected)


def test_axial_mixer_equals_masked_dense_attention():
    torch.manual_seed(1)
    dim, heads, grid = 16, 2, (3, 5)
    mixer = AxialSDPAMixer(dim, heads).double()
    x = torch.randn(2, 15, dim, dtype=torch.float64)
    q, k, v = (t.reshape(2, 15, heads, 8).transpose(1, 2) for t in mixer.qkv(x).chunk(3, -1))
    r, c = torch.arange(15) // 5, torch.arange(15) % 5
    same_row, same_col = r[:, None] == r[None], c[:, None] == c[None]
    z = F.scaled_dot_product_attention(q, k, v, attn_mask=same_row)
    y = F.scaled_dot_product_attention(q, k, z, attn_mask=same_col)
    expected = mixer.proj(y.transpose(1, 2).reshape(2, 15, dim))
    torch.testing.assert_close(mixer(x, grid), expected)


def test_ssog_mixer_matches_operator_and_kernel():
    torch.manual_seed(2)
    mixer = SSoGMixer(12, 3, atoms=4).double()
    x = torch.randn(2, 20, 12, dtype=torch.float64)
    v = mixer.value(x).reshape(2, 20, 3, 4).transpose(1, 2)  # (B, heads, N, d)
    kernel = ops.dense_kernel(mixer.mu, mixer.log_sigma.exp(), mixer.amp, (4, 5))  # (heads, N, N)
    expected = mixer.proj((kernel @ v).transpose(1, 2).reshape(2, 20, 12))
    torch.testing.assert_close(mixer(x, (4, 5)), expected)


def _fresh(mixer: SSoGMixer, x: torch.Tensor, grid) -> torch.Tensor:
    """The fixed mixer's output built from the current parameters, without its cache."""
    v = mixer.value(x).reshape(*x.shape[:2], mixer.heads, -1).transpose(1, 2)  # (B, heads, N, d)
    kernel = ops.dense_kernel(mixer.mu, mixer.log_sigma.exp(), mixer.amp, grid)  # (heads, N, N)
    return mixer.proj((kernel.to(v.dtype) @ v).transpose(1, 2).reshape(x.shape))


@pytest.mark.parametrize("grid", [(4, 5), (9, 8)])  # dense and separable prepared operators
def test_fixed_mixer_cache_follows_every_parameter_change(grid):
    """Without autograd the fixed mixer reuses its Gaussian matrices; each way of changing the parameters, the
    grid or the dtype must give the output of the new parameters, never the cached one."""
    torch.manual_seed(4)
    mixer = SSoGMixer(12, 3, atoms=3).double()
    n = grid[0] * grid[1]
    x = torch.randn(2, n, 12, dtype=torch.float64)

    def check(g=grid, inputs=x):
        with torch.no_grad():
            want = _fresh(mixer, inputs, g)
            tol = 1e-10 if inputs.dtype == torch.float64 else 1e-5  # dense kernel against separable factors
            torch.testing.assert_close(mixer(inputs, g), want, rtol=tol, atol=tol * want.abs().max().item())

    check()
    first = mixer._prepared[1]
    check()
    assert mixer._prepared[1] is first  # a hit: same parameters, same grid
    # An optimizer step (in place, after a backward pass with autograd on).
    opt = torch.optim.SGD(mixer.parameters(), lr=0.5)
    mixer(x, grid).square().sum().backward()
    opt.step()
    check()
    # load_state_dict, copy_ and a single-entry write under no_grad, and a replaced parameter.
    state = {k: t + 0.1 for k, t in mixer.state_dict().items()}
    mixer.load_state_dict(state)
    check()
    with torch.no_grad():
        mixer.log_sigma.copy_(mixer.log_sigma * 0.5)
    check()
    with torch.no_grad():
        mixer.amp[1, 2] = -3.0
    check()
    mixer.mu = torch.nn.Parameter(mixer.mu.detach() + 1.0)
    check()
    # Another grid, another dtype, inference mode.
    check((grid[1], grid[0]))
    mixer.float()
    check(inputs=x.float())
    with torch.inference_mode():
        mixer(x.float(), grid)
    check(inputs=x.float())  # the operator prepared in inference mode serves no_grad calls


def test_fixed_mixer_built_under_inference_mode_runs():
    """Parameters created in inference mode are inference tensors, without the version counter the cache needs."""
    with torch.inference_mode():
        mixer = SSoGMixer(8, 2, atoms=2)
        x = torch.randn(1, 20, 8)
        torch.testing.assert_close(mixer(x, (4, 5)), _fresh(mixer, x, (4, 5)))
        with torch.no_grad():
            mixer.mu.add_(1.0)  # in place, untracked: the next call must see it
        torch.testing.assert_close(mixer(x, (4, 5)), _fresh(mixer, x, (4, 5)))


def test_fixed_mixer_keeps_no_large_matrices(monkeypatch):
    """Above FIXED_CACHE_MAX_ENTRIES the prepared matrices are used for the call and then dropped."""
    import ssog_lab.layers as layers

    torch.manual_seed(6)
    mixer = SSoGMixer(8, 2, atoms=2).double()
    x = torch.randn(1, 72, 8, dtype=torch.float64)
    monkeypatch.setattr(layers, "FIXED_CACHE_MAX_ENTRIES", 2 * 2 * (8 * 8 + 9 * 9) - 1)  # heads·M·(H² + W²) − 1
    with torch.no_grad():
        torch.testing.assert_close(mixer(x, (8, 9)), _fresh(mixer, x, (8, 9)))
        assert mixer._prepared is None
        mixer(x[:, :6], (2, 3))  # dense, heads·N² = 72 entries: kept
        assert mixer._prepared is not None and mixer._prepared[1].kernel is not None


def test_fixed_mixer_under_autograd_builds_its_matrices_and_gives_gradients():
    """With autograd on (even after a cached no_grad or inference_mode call) the atoms get exact gradients."""
    torch.manual_seed(5)
    mixer = SSoGMixer(8, 2, atoms=2).double()
    x = torch.randn(1, 30, 8, dtype=torch.float64)
    with torch.inference_mode():
        mixer(x, (5, 6))
    with torch.no_grad():
        mixer(x, (5, 6))
    params = (mixer.mu, mixer.log_sigma, mixer.amp)
    grads = torch.autograd.grad(mixer(x, (5, 6)).sin().sum(), params)
    expected = torch.autograd.grad(_fresh(mixer, x, (5, 6)).sin().sum(), params)
    for got, want in zip(grads, expected, strict=True):
        assert got.abs().sum() > 0
        torch.testing.assert_close(got, want)


def test_steered_mixer_starts_as_fixed_twin_and_then_steers():
    torch.manual_seed(3)
    fixed = SSoGMixer(16, 4, atoms=3).double()
    steered = SSoGMixer(16, 4, atoms=3, steered=True).double()
    steered.load_state_dict(fixed.state_dict(), strict=False)
    x = torch.randn(2, 36, 16, dtype=torch.float64)
    torch.testing.assert_close(steered(x, (6, 6)), fixed(x, (6, 6)))
    mu, sigma, amp = steered.atom_parameters(x)
    assert mu.shape == (2, 4, 36, 3, 2) and amp.shape == (2, 4, 36, 3)
    # The steering head receives gradient at zero init, so training can move it.
    steered(x, (6, 6)).square().sum().backward()
    assert steered.steer.weight.grad.abs().sum() > 0
    # It is light: cheaper than the Q and K projections (2·C² + 2·C) that SSoG removes.
    steering = sum(p.numel() for p in (*steered.steer_down.parameters(), *steered.steer.parameters()))
    assert steering < 2 * 16 * 16 + 2 * 16


@pytest.mark.parametrize(("spread", "atoms", "expected"), [
    (3.5, 4, [0.5, 0.5 * 7 ** (1 / 3), 0.5 * 7 ** (2 / 3), 3.5]),  # geometric from half a token to the spread
    (0.2, 3, [0.5, 0.5, 0.5]),  # never narrower than half a token
    (8.0, 1, [2.0]),  # one atom: the geometric mean of 0.5 and 8
])
def test_atoms_start_at_several_scales_within_the_spread(spread, atoms, expected):
    torch.manual_seed(0)
    mixer = SSoGMixer(64, 64, atoms=atoms, init_spread=spread)
    widths = mixer.log_sigma.detach().exp()  # (heads, M, 2)
    torch.testing.assert_close(widths, torch.tensor(expected)[None, :, None].expand_as(widths))
    offsets = mixer.mu.detach()  # (heads, M, 2): uniform in ±spread, so they reach out to near both ends
    assert offsets.abs().max() <= spread and offsets.min() < -0.8 * spread and offsets.max() > 0.8 * spread


@pytest.mark.parametrize("spread", [-1.0, math.inf, math.nan])
def test_init_spread_must_be_finite_and_not_negative(spread):
    with pytest.raises(ValueError, match="init_spread"):
        SSoGMixer(32, 4, init_spread=spread)


def test_amplitudes_start_as_centre_surround_or_as_a_blur():
    """Centre-surround: +1, −1, … from the narrowest atom, so each head's kernel along a line of constant input
    sums to 0 for an even atom count (it passes no uniform field); blur: 1/M each, a kernel summing to 1."""
    line = torch.ones(1, 1, 9, 1)  # (B, heads, N, d): a uniform field on a 3×3 grid
    for kind, atoms, total in (("centre-surround", 4, 0.0), ("centre-surround", 3, 1.0), ("blur", 4, 1.0)):
        mixer = SSoGMixer(8, 2, atoms=atoms, init_spread=0.0, init_amplitudes=kind)
        amp = mixer.amp.detach()  # (heads, M)
        expected = (-1.0) ** torch.arange(atoms) if kind == "centre-surround" else torch.full((atoms,), 1 / atoms)
        assert torch.equal(amp, expected.expand_as(amp))
        mu, sigma, _ = mixer.atom_parameters()
        out = ops.ssog(line, mu[:1].detach(), sigma[:1].detach(), amp[:1], (3, 3))  # offsets 0: no mass leaves
        torch.testing.assert_close(out, torch.full_like(out, total))
    with pytest.raises(ValueError, match="init_amplitudes"):
        SSoGMixer(8, 2, init_amplitudes="gabor")


def test_vit_config_starts_the_atoms_over_half_its_grid():
    assert ViTConfig(image_size=28, patch_size=4).ssog_init_spread == 3.5
    assert ViTConfig(image_size=28, patch_size=2, ssog_init_spread=1.0).ssog_init_spread == 1.0


@pytest.mark.parametrize("make", [lambda: SSoGMixer(12, 5), lambda: SDPAMixer(12, 5),
                                  lambda: SSoGMixer(12, 3, atoms=0)])
def test_bad_dimensions_raise(make):
    with pytest.raises(ValueError, match="dim=12|atoms"):
        make()


def test_bad_grid_raises():
    with pytest.raises(ValueError, match="grid 3×3"):
        SSoGMixer(8, 2)(torch.randn(1, 10, 8), (3, 3))
