"""Exercises of notebook 04 (registered with `@exercise`; see the package docstring)."""

from __future__ import annotations

import math

import torch

from .. import models, ode
from ._registry import close, exercise, same_function

_NANO = dict(in_chans=1, num_classes=10)  # the notebook's models: MNIST digits


def _count(depth: str) -> int:
    with torch.device("meta"):
        return models.count_parameters(models.build_model("nano", depth=depth, mixer="ssog", **_NANO))


@exercise("04.discrete_parameters", judge=close(0.0),
          wrong=4 * _count("looped"),
          hint="the embedding, the positional table and the classifier exist once in every depth form; only the "
               "branch is repeated. How many more branches does the discrete model have than the looped one?",
          explain="the discrete model adds L − 1 = 3 branches to the looped model's parameters.")
def discrete_parameters() -> int:
    return _count("discrete")


def _decay(t, y):
    return -y


@exercise("04.rk4_nfe", judge=close(0.0), wrong=8,
          hint="count the steps on [0, 4] with h = 0.5, then how many times one RK4 step evaluates f.",
          explain="8 steps × 4 stages: a fixed-grid method pays stages × T / h evaluations.")
def rk4_nfe() -> int:
    counted = ode.CountNFE(_decay)
    ode.odeint(counted, torch.ones(1), torch.tensor([0.0, 4.0]), method="rk4", step_size=0.5)
    return counted.nfe


def _linear_problem():
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(3, 3, generator=generator, dtype=torch.float64) * 0.5
    y0 = torch.randn(4, 3, generator=generator, dtype=torch.float64)
    return (lambda t, y: y @ a.T), y0, y0 @ torch.linalg.matrix_exp(a).T


@exercise("04.midpoint_order", judge=close(0.15), wrong=1.0,  # fast mode's coarser study measures ≈ 1.8
          hint="take the two finest midpoint rows; the order is log₂ of the ratio of their errors (not of their "
               "NFE), since the step halves between them.",
          explain="halving h divides the midpoint method's error by about 2² = 4: order 2.")
def midpoint_order() -> float:
    func, y0, exact = _linear_problem()
    errors = []
    for steps in (16, 32):
        y = ode.odeint(func, y0, torch.tensor([0.0, 1.0], dtype=torch.float64), method="midpoint",
                       step_size=1 / steps)[-1]
        errors.append(float((y - exact).norm() / exact.norm()))
    return math.log2(errors[0] / errors[1])


def _step_inputs():
    generator = torch.Generator().manual_seed(1)
    a = torch.randn(4, 4, generator=generator, dtype=torch.float64)
    x = torch.randn(3, 4, generator=generator, dtype=torch.float64)

    def f(t, y):  # depends on t and nonlinearly on y, so a slope taken at the wrong point shows
        return torch.tanh(y @ a.T) + torch.cos(t) * y

    return f, torch.tensor(0.3, dtype=torch.float64), x, torch.tensor(0.25, dtype=torch.float64)


def _library_step(method: str):
    return lambda f, t, x, h: ode.rk_step(f, t, x, h, ode.TABLEAUS[method])


_STEPPERS = (ode.rk_step, ode.odeint, ode.solve)  # what the step exercises ask the learner to write


@exercise("04.euler_step", judge=same_function(_step_inputs, rtol=1e-10, atol=1e-12, forbid=_STEPPERS),
          wrong=lambda f, t, x, h: x + f(t, x),
          hint="one Euler step moves x along the slope f(t, x) for a time h; check that h appears in your update.",
          explain="your step equals ssog_lab.ode's Euler step (the looped model's update when h = 1).")
def euler_step():
    return _library_step("euler")


def _rk4_missing_half(f, t, x, h):
    k1 = f(t, x)
    k2 = f(t + h / 2, x + h * k1)  # the mistake: a full step where half a step belongs
    k3 = f(t + h / 2, x + h / 2 * k2)
    k4 = f(t + h, x + h * k3)
    return x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


@exercise("04.rk4_step", judge=same_function(_step_inputs, rtol=1e-10, atol=1e-12, forbid=_STEPPERS),
          wrong=_rk4_missing_half,
          hint="the classic RK4 takes k₂ and k₃ at t + h/2 from x + (h/2)·k₁ and x + (h/2)·k₂, k₄ at t + h from "
               "x + h·k₃, and weights them 1, 2, 2, 1 over 6.",
          explain="your step equals ssog_lab.ode's classic RK4 ('rk4-classic') to rounding.")
def rk4_step():
    return _library_step("rk4-classic")
