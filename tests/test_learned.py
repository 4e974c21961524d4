"""ssog_lab.learned: a layer's atoms are the ones its mixer uses, fixed or per token, and the untrained twin starts
where the trained model started, so the atoms' change against it is what training moved."""

import pytest
import torch

from ssog_lab import learned, models, ops


def steered_model(depth: str = "discrete"):
    """A small steered-SSoG model whose steering head is switched on (random, non-zero weights)."""
    torch.manual_seed(0)
    model = models.build_model("nano", depth=depth, mixer="ssog-steered", image_size=16, dim=16, layers=2, heads=2,
                               ssog_heads=2, in_chans=1, num_classes=3).double().eval()
    for mixer in learned.ssog_mixers(model):
        torch.nn.init.normal_(mixer.steer.weight, std=0.3)
    return model, torch.randn(3, 1, 16, 16, dtype=torch.float64)


def test_layer_atoms_are_what_the_mixer_uses():
    model, images = steered_model()
    assert learned.token_grid(model, images) == (4, 4)
    mu, sigma, amp = learned.layer_atoms(model, images, 1)
    assert mu.shape == (3, 2, 16, 4, 2) and sigma.shape == mu.shape and amp.shape == (3, 2, 16, 4)
    with torch.no_grad():
        states = model.states(images)  # (L + 1, B, N, C)
        block = model.blocks[1]
        v = block.mixer.value(block.norm(states[1])).reshape(3, 16, 2, 8).transpose(1, 2)  # (B, heads, N, d)
        expected = block.mixer(block.norm(states[1]), (4, 4))
        y = ops.ssog(v, mu, sigma, amp, (4, 4))  # (B, heads, N, d)
        rebuilt = block.mixer.proj(y.transpose(1, 2).reshape(3, 16, 16))
    torch.testing.assert_close(rebuilt, expected)
    base_mu, base_sigma, base_amp = learned.learned_atoms(model, 1)
    assert base_mu.shape == (2, 4, 2) and not torch.allclose(mu[0, :, 0], base_mu)  # steering moved the atoms
    fixed = models.build_model("nano", depth="looped", mixer="ssog", image_size=16, dim=16, layers=2, heads=2,
                               ssog_heads=2, in_chans=1, num_classes=3).double()
    mu_f, _, amp_f = learned.layer_atoms(fixed, images, 1)
    assert mu_f.shape == (3, 2, 16, 4, 2) and torch.equal(mu_f[2, 1, 7], fixed.blocks[0].mixer.mu[1].detach())
    with pytest.raises(ValueError, match="SSoG"):
        learned.layer_atoms(models.build_model("nano", image_size=16, dim=16, layers=1, heads=2), images, 0)
    with pytest.raises(ValueError, match="layer"):
        learned.layer_atoms(model, images, 2)


def test_initial_twin_and_atom_change_compare_against_the_untrained_model():
    model, _ = steered_model()
    twin = learned.initial_twin(model, seed=0)  # steered_model seeds 0 before it builds: the same initial atoms
    assert all(r["mu_moved_max"] == 0.0 for r in learned.atom_change(model, twin))
    with torch.no_grad():
        learned.ssog_mixers(model)[1].mu[0, 2, 1] += 0.75
        learned.ssog_mixers(model)[1].amp[1, 0] = -0.1  # the narrowest atom starts at +1 (centre-surround: +1, -1, ...)
    rows = learned.atom_change(model, twin)
    assert rows[1]["mu_moved_max"] == pytest.approx(0.75) and rows[0]["mu_moved_max"] == 0.0
    assert rows[0]["negative"] == 4 and rows[1]["negative"] == 5 and rows[1]["total"] == 8
    assert rows[1]["amp_init"] == (-1.0, 1.0) and rows[1]["amp_learned"] == (-1.0, 1.0)
