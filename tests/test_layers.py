"""Mixers against their definitions: nn.MultiheadAttention, masked dense attention, the fixed twin."""

import pytest
import torch
import torch.nn.functional as F

from ssog_lab import ops
from ssog_lab.layers import AxialSDPAMixer, SDPAMixer, SSoGMixer


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


def test_atoms_start_at_several_scales():
    mixer = SSoGMixer(32, 4, atoms=4)
    widths = mixer.log_sigma.detach().exp()[0, :, 0]
    assert widths.min() == pytest.approx(0.5) and widths.max() == pytest.approx(4.0)
    assert mixer.mu.detach().abs().max() <= 2.0


@pytest.mark.parametrize("make", [lambda: SSoGMixer(12, 5), lambda: SDPAMixer(12, 5),
                                  lambda: SSoGMixer(12, 3, atoms=0)])
def test_bad_dimensions_raise(make):
    with pytest.raises(ValueError, match="dim=12|atoms"):
        make()


def test_bad_grid_raises():
    with pytest.raises(ValueError, match="grid 3×3"):
        SSoGMixer(8, 2)(torch.randn(1, 10, 8), (3, 3))
