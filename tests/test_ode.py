"""Own fixed-grid solvers against torchdiffeq and against a closed-form solution (convergence order)."""

import math

import pytest
import torch
import torchdiffeq

from ssog_lab import ode

ORDERS = {"euler": 1, "midpoint": 2, "rk4": 4, "rk4-classic": 4}
STAGES = {"euler": 1, "midpoint": 2, "rk4": 4, "rk4-classic": 4}


def rhs(t, y):  # dy/dt = cos(t)·y, solution y(t) = y(0)·exp(sin t): non-autonomous on purpose
    return torch.cos(t) * y


Y0 = torch.tensor([1.0, -0.5, 2.0], dtype=torch.float64)


def exact(t):
    return Y0 * math.exp(math.sin(t))


@pytest.mark.parametrize("method", ["euler", "midpoint", "rk4"])
def test_matches_torchdiffeq_on_the_same_grid(method):
    t = torch.linspace(0, 2, 9, dtype=torch.float64)
    ours = ode.odeint(rhs, Y0, t, method=method)
    theirs = torchdiffeq.odeint(rhs, Y0, t, method=method)
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
    coarse = torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64)  # step 0.25 divides both intervals
    ours = ode.odeint(rhs, Y0, coarse, method=method, step_size=0.25)
    theirs = torchdiffeq.odeint(rhs, Y0, coarse, method=method, options=dict(step_size=0.25))
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("method", list(ORDERS))
def test_convergence_order_and_nfe(method):
    t = torch.tensor([0.0, 2.0], dtype=torch.float64)
    errors = []
    for steps in (32, 64, 128):
        counted = ode.CountNFE(rhs)
        y = ode.odeint(counted, Y0, t, method=method, step_size=2.0 / steps)
        assert y.shape == (2, 3)
        assert counted.nfe == STAGES[method] * steps
        errors.append((y[-1] - exact(2.0)).abs().max().item())
    observed = [math.log2(errors[i] / errors[i + 1]) for i in range(2)]
    assert all(abs(p - ORDERS[method]) < 0.35 for p in observed), observed


def test_backward_in_time_returns_to_the_start():
    t = torch.tensor([2.0, 0.0], dtype=torch.float64)
    y = ode.odeint(rhs, exact(2.0), t, method="rk4", step_size=0.01)
    torch.testing.assert_close(y[-1], Y0, rtol=1e-8, atol=1e-8)


def test_bad_arguments():
    t = torch.tensor([0.0, 1.0])
    with pytest.raises(ValueError, match=r"method must be one of \('euler', 'midpoint', 'rk4', 'rk4-classic'\)"):
        ode.odeint(rhs, Y0.float(), t, method="dopri5")
    with pytest.raises(ValueError, match="strictly increasing or strictly decreasing"):
        ode.odeint(rhs, Y0.float(), torch.tensor([0.0, 1.0, 0.5]))
    with pytest.raises(ValueError, match="step_size must be > 0"):
        ode.odeint(rhs, Y0.float(), t, step_size=0.0)
    with pytest.raises(ValueError, match="y0 must be a floating-point tensor"):
        ode.odeint(rhs, torch.tensor([1, 2]), t)


def test_solve_dispatches_to_both_libraries():
    t = torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64)
    ours = ode.solve(rhs, Y0, t, method="rk4", step_size=0.5, solver="ssog_lab")
    theirs = ode.solve(rhs, Y0, t, method="rk4", step_size=0.5, solver="torchdiffeq")
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
    adaptive = ode.solve(rhs, Y0, t, method="dopri5", rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(adaptive[-1], exact(2.0), rtol=1e-8, atol=1e-8)
    with pytest.raises(ValueError, match="adjoint=True needs solver='torchdiffeq'"):
        ode.solve(rhs, Y0, t, adjoint=True, solver="ssog_lab")
    with pytest.raises(ValueError, match="solver must be 'torchdiffeq' or 'ssog_lab'"):
        ode.solve(rhs, Y0, t, solver="scipy")
