"""ViT family: every depth × mixer runs at two resolutions; looped = one block; ODE-Euler = looped."""

import pytest
import torch

from ssog_lab import models
from ssog_lab.models import DEPTHS, MIXERS, ViTConfig, build_model, rk4_residual


@pytest.mark.parametrize("mixer", MIXERS)
@pytest.mark.parametrize("depth", DEPTHS)
def test_every_depth_and_mixer_trains_at_two_resolutions(depth, mixer):
    torch.manual_seed(0)
    model = build_model("nano", depth=depth, mixer=mixer, in_chans=1, num_classes=10, layers=2)
    for size in (32, 48):
        images = torch.randn(2, 1, size, size, requires_grad=True)
        logits = model(images)
        assert logits.shape == (2, 10) and torch.isfinite(logits).all()
        model.zero_grad()
        logits.square().sum().backward()
        grads = [p.grad for p in model.parameters()]
        assert all(g is not None and torch.isfinite(g).all() for g in grads)
        assert images.grad is not None and images.grad.abs().sum() > 0


def test_non_square_input_and_resolution_errors():
    model = build_model("nano", mixer="ssog")
    assert model(torch.randn(1, 3, 32, 48)).shape == (1, 100)
    with pytest.raises(ValueError, match="multiples of patch_size=4"):
        model(torch.randn(1, 3, 30, 32))
    with pytest.raises(ValueError, match=r"images must have shape \(B, 3, H, W\)"):
        model(torch.randn(1, 1, 32, 32))


def test_model_built_at_224_evaluates_at_1024():
    model = build_model("tiny", mixer="ssog", layers=1, num_classes=10)
    with torch.no_grad():
        assert model(torch.randn(1, 3, 1024, 1024)).shape == (1, 10)


def test_positional_embedding_is_the_table_at_the_build_grid_and_resized_elsewhere():
    model = build_model("nano", layers=1)
    _, grid = model.embed(torch.zeros(1, 3, 32, 32))
    tokens, big_grid = model.embed(torch.zeros(1, 3, 64, 64))
    assert grid == (8, 8) and big_grid == (16, 16)
    bias = model.patch_embed.bias  # zero images: tokens are conv bias + positional embedding
    torch.testing.assert_close(model.embed(torch.zeros(1, 3, 32, 32))[0][0] - bias,
                               model.pos_embed[0].flatten(1).T)
    resized = torch.nn.functional.interpolate(model.pos_embed, size=(16, 16), mode="bilinear")
    torch.testing.assert_close(tokens[0] - bias, resized[0].flatten(1).T)


def test_looped_and_ode_hold_one_block_discrete_holds_layers():
    counts = {d: models.count_parameters(build_model("nano", depth=d, mixer="ssog")) for d in DEPTHS}
    block = models.count_parameters(models.Branch(ViTConfig(**models.PRESETS["nano"], mixer="ssog")))
    looped = build_model("nano", depth="looped", mixer="ssog")
    assert len(looped.blocks) == 1
    assert counts["looped"] == counts["ode"]
    assert counts["discrete"] - counts["looped"] == (looped.config.layers - 1) * block


@pytest.mark.parametrize("solver", ["torchdiffeq", "ssog_lab"])
def test_ode_euler_step_one_equals_looped_step_for_step(solver):
    torch.manual_seed(1)
    ode = build_model("nano", depth="ode", mixer="ssog-steered", ode_method="euler", ode_step_size=1.0,
                      ode_solver=solver)
    with torch.no_grad():  # move the steering head off zero so the test covers a steered layer
        ode.blocks[0].mixer.steer.weight.normal_(0, 0.02)
    looped = build_model("nano", depth="looped", mixer="ssog-steered")
    looped.load_state_dict(ode.state_dict())
    images = torch.randn(2, 3, 32, 32)
    ode_states, looped_states = ode.states(images), looped.states(images)
    assert ode_states.shape == looped_states.shape == (5, 2, 64, 64)
    assert torch.equal(ode_states, looped_states)
    assert torch.equal(ode(images), looped(images))
    assert ode.nfe == 4  # one evaluation per Euler step, counted for the last forward pass


@pytest.mark.parametrize(("method", "per_step"), [("euler", 1), ("midpoint", 2), ("rk4", 4)])
def test_ode_nfe_counts_fixed_grid_steps(method, per_step):
    model = build_model("nano", depth="ode", ode_method=method, ode_step_size=0.5, layers=2)
    model(torch.randn(1, 3, 32, 32))
    assert model.nfe == per_step * 4  # T = layers = 2, step 0.5: 4 steps


def test_rk4_residual_is_one_rk4_step_over_the_whole_interval():
    torch.manual_seed(3)
    model = build_model("nano", depth="ode", mixer="ssog", **rk4_residual(4.0)).double().eval()
    images = torch.randn(2, 3, 32, 32, dtype=torch.float64)
    x, grid = model.embed(images)  # (B, N, C)
    f, h = (lambda z: model.blocks[0](z, grid)), 4.0
    k1 = f(x)  # the stages of Kutta's 3/8 rule (ssog_lab.ode's and torchdiffeq's "rk4"), from the formula
    k2 = f(x + h / 3 * k1)
    k3 = f(x + h * (k2 - k1 / 3))
    k4 = f(x + h * (k1 - k2 + k3))
    end = x + h / 8 * (k1 + 3 * k2 + 3 * k3 + k4)
    torch.testing.assert_close(model(images), model.head(model.norm(end).mean(dim=1)))
    assert model.nfe == 4


def test_ode_dopri5_and_adjoint_run_and_count():
    torch.manual_seed(2)
    adaptive = build_model("nano", depth="ode", mixer="ssog", ode_method="dopri5", layers=1, ode_rtol=1e-2)
    images = torch.randn(1, 3, 16, 16)
    adaptive(images).sum().backward()
    assert adaptive.nfe >= 6  # at least one accepted dopri5 step (FSAL: 6 new evaluations)
    # The adjoint integrates backwards with its own rk4 grid: gradients agree up to discretization error.
    options = dict(depth="ode", mixer="ssog", layers=1, ode_step_size=0.0625)
    adjoint = build_model("nano", ode_adjoint=True, **options).double()
    plain = build_model("nano", **options).double()
    plain.load_state_dict(adjoint.state_dict())
    adjoint(images.double()).sum().backward()
    plain(images.double()).sum().backward()
    for a, p in zip(adjoint.parameters(), plain.parameters(), strict=True):
        torch.testing.assert_close(a.grad, p.grad, rtol=1e-4, atol=1e-6)


def test_states_times_only_for_ode():
    with pytest.raises(ValueError, match="times applies to depth='ode' only"):
        build_model("nano", layers=1).states(torch.zeros(1, 3, 32, 32), times=torch.tensor([0.0, 1.0]))


def test_presets_and_ssog_heads_default():
    tiny = ViTConfig(**models.PRESETS["tiny"], mixer="ssog")
    assert (tiny.dim, tiny.heads, tiny.layers, tiny.patch_size, tiny.image_size) == (192, 3, 12, 16, 224)
    assert tiny.ssog_heads == 24 and tiny.mixer_heads == 24
    assert ViTConfig(**models.PRESETS["base"]).mixer_heads == 12
    assert build_model("nano", mixer="ssog", ssog_heads=16).blocks[0].mixer.heads == 16


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(preset="huge"), r"preset must be one of \('nano', 'tiny', 'small', 'base'\)"),
    (dict(mixer="linear"), r"mixer must be one of \('sdpa', 'sdpa-math', 'axial', 'ssog', 'ssog-steered'\)"),
    (dict(depth="deep"), r"depth must be one of \('discrete', 'looped', 'ode'\)"),
    (dict(widht=64), r"unknown ViTConfig field\(s\) \['widht'\]; valid fields: \[.*'dim'"),
    (dict(ode_method="bdf"), "ode_method must be one of"),
    (dict(dim=60, mixer="ssog"), "multiple of the mixer's heads"),
    (dict(depth="ode", ode_solver="ssog_lab", ode_method="dopri5"), "need ode_solver='torchdiffeq'"),
])
def test_bad_arguments_name_the_valid_choices(kwargs, message):
    with pytest.raises(ValueError, match=message):
        build_model(**{"preset": "nano", **kwargs})


def test_parameter_table_saving_is_the_qk_projections():
    rows = models.parameter_table(presets=("tiny",), mixers=("sdpa", "ssog"))
    by_mixer = {r["mixer"]: r for r in rows}
    c, layers, heads, atoms = 192, 12, 24, 4
    qk = 2 * (c * c + c)  # Q and K weights and biases
    assert by_mixer["sdpa"]["params"] - by_mixer["ssog"]["params"] == layers * (qk - heads * atoms * 5)
    assert 0.15 < by_mixer["ssog"]["saving_vs_sdpa"] < 0.17
    assert by_mixer["sdpa"]["params"] == models.count_parameters(build_model("tiny"))


def test_params_command_prints_markdown(capsys):
    from ssog_lab.bench import params

    assert params.main(["--presets", "nano", "--mixers", "sdpa", "ssog"]) == 0
    out = capsys.readouterr().out
    assert "| nano | discrete | ssog |" in out and "saving vs sdpa" in out


def test_default_ssog_heads_per_variant():
    """Fixed SSoG: dim // 8 heads (nearly free); steered: max(2, dim // 48) (per-token weight work per head)."""
    from ssog_lab.models import ViTConfig

    assert ViTConfig(dim=192, mixer="ssog").ssog_heads == 24
    assert ViTConfig(dim=192, mixer="ssog-steered").ssog_heads == 4
    assert ViTConfig(dim=64, mixer="ssog-steered").ssog_heads == 2
    assert ViTConfig(dim=64, mixer="ssog-steered", ssog_heads=8).ssog_heads == 8


def test_solved_with_changes_only_the_solver_and_restores_it():
    model = build_model("nano", depth="ode", mixer="ssog", layers=2).eval()
    own = model.config
    images = torch.randn(1, 3, 32, 32)
    with model.solved_with(ode_method="euler", ode_step_size=1.0), torch.no_grad():
        model(images)
        assert model.nfe == 2 and model.config.ode_method == "euler"  # T = 2, two Euler steps
    assert model.config is own
    with pytest.raises(RuntimeError), model.solved_with(ode_method="euler"):
        raise RuntimeError("inside")
    assert model.config is own  # restored after an error too
    with pytest.raises(ValueError, match=r"solved_with takes only ode_\* fields, got \['dim'\]"):
        model.solved_with(dim=8)
    with pytest.raises(ValueError, match="ode_method"):
        model.solved_with(ode_method="leapfrog")
