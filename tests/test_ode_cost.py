"""The cost of an ODE solve (`ssog_lab.ode_cost`): evaluations counted, convergence at each method's order, dopri5's
NFE of an ODE ViT and the sentence that reads the numbers."""

import math

import pytest
import torch

from ssog_lab import models, ode_cost


def linear_problem(n: int = 4, c: int = 3):
    """dy/dt = A y with a known solution y(T) = exp(T·A) y0, shaped like token states (1, N, C)."""
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(c, c, generator=generator, dtype=torch.float64) * 0.5
    y0 = torch.randn(1, n, c, generator=generator, dtype=torch.float64)
    return (lambda t, y: y @ a.T), y0, (y0 @ torch.linalg.matrix_exp(a).T)  # T = 1


def test_solve_counts_evaluations_and_converges_at_the_method_order():
    func, y0, exact = linear_problem()
    for solver, stages, order in [("euler · ssog_lab.ode", 1, 1), ("midpoint · ssog_lab.ode", 2, 2),
                                  ("rk4 (3/8 rule) · ssog_lab.ode", 4, 4), ("rk4 · torchdiffeq", 4, 4)]:
        coarse, nfe = ode_cost.solve_and_count(func, y0, 1.0, solver, steps=8)
        fine, _ = ode_cost.solve_and_count(func, y0, 1.0, solver, steps=16)
        assert nfe == 8 * stages
        measured = math.log2(ode_cost.relative_error(coarse, exact) / ode_cost.relative_error(fine, exact))
        assert abs(measured - order) < 0.25, (solver, measured)
    ours, _ = ode_cost.solve_and_count(func, y0, 1.0, "rk4 (3/8 rule) · ssog_lab.ode", steps=5)
    theirs, _ = ode_cost.solve_and_count(func, y0, 1.0, "rk4 · torchdiffeq", steps=5)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-13)
    tight, _ = ode_cost.solve_and_count(func, y0, 1.0, "dopri5 (adaptive) · torchdiffeq", rtol=1e-8)
    assert ode_cost.relative_error(tight, exact) < 1e-6
    with pytest.raises(ValueError, match="solver"):
        ode_cost.solve_and_count(func, y0, 1.0, "rk9")


def test_ode_nfe_counts_dopri5_and_the_markdown_reads_the_numbers():
    torch.manual_seed(0)
    model = models.build_model("nano", depth="ode", mixer="ssog", image_size=8, dim=16, layers=2, heads=2,
                               in_chans=1, num_classes=3).double().eval()
    images = torch.randn(2, 1, 8, 8, dtype=torch.float64)
    nfe = ode_cost.ode_nfe(model, images, rtols=(1e-2, 1e-6))
    with torch.no_grad():
        x0, grid = model.embed(images)
    expected = ode_cost.solve_and_count(models.Dynamics(model.blocks[0], grid), x0, 2.0,
                                        "dopri5 (adaptive) · torchdiffeq", rtol=1e-6)[1]
    assert nfe[1e-6] == expected and nfe[1e-2] <= nfe[1e-6]
    assert (nfe[1e-6] - 2) % 6 == 0  # 2 to pick the first step, then 6 new evaluations per step (FSAL)
    with pytest.raises(ValueError, match="ode"):
        ode_cost.ode_nfe(models.build_model("nano", image_size=8, dim=16, layers=1, heads=2), images.float())
    text = ode_cost.ode_nfe_markdown({"sdpa": ({1e-3: 32}, {1e-3: 32}), "ssog": ({1e-3: 32}, {1e-3: 26})})
    assert "| ssog | 32 | 26 |" in text and text.startswith("| run | dopri5 NFE before training (rtol 0.001) |")
    assert "ssog needs 6 fewer evaluations than sdpa (26 against 32); its NFE is down 6 with training" in text
    same = ode_cost.ode_nfe_markdown({"sdpa": ({1e-3: 32}, {1e-3: 38}), "ssog": ({1e-3: 32}, {1e-3: 38})})
    assert "the same NFE as sdpa" in same and "up 6 with training" in same
