"""Small fixed-grid ODE solvers for teaching, with torchdiffeq's calling convention.

    odeint(func, y0, t, method="rk4", step_size=None) -> (len(t), *y0.shape)

func(t, y) -> dy/dt (t a 0-d tensor, y of y0's shape). Every method is one explicit Runge–Kutta
Butcher tableau run by the same step function:

    euler        order 1, 1 evaluation per step
    midpoint     order 2, 2 evaluations (explicit midpoint)
    rk4          order 4, 4 evaluations; Kutta's 3/8 rule, the variant torchdiffeq's "rk4" uses
    rk4-classic  order 4, 4 evaluations; the classical 1/6, 1/3, 1/3, 1/6 scheme

Grid: each interval [t_i, t_{i+1}] is split into the fewest equal steps no longer than `step_size`
(one step when step_size is None). Where step_size divides every interval this is torchdiffeq's grid,
and the two libraries agree to rounding. Wrap func in `CountNFE` to count its evaluations.

`solve(...)` is the one call the models use: these solvers or torchdiffeq's (fixed grid, dopri5, adjoint).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["odeint", "solve", "CountNFE", "TABLEAUS", "METHODS", "SolverDivergedError"]


class SolverDivergedError(FloatingPointError):
    """An adaptive solver's step size underflowed: the ODE's state or right-hand side is not finite or blows up."""


@dataclass(frozen=True)
class Tableau:
    """Explicit Runge–Kutta scheme: stage i evaluates f at t + c[i]·h, y + h·Σ_j a[i][j]·k_j; y ← y + h·Σ b_i k_i."""

    order: int
    c: tuple[float, ...]
    a: tuple[tuple[float, ...], ...]
    b: tuple[float, ...]


TABLEAUS = {
    "euler": Tableau(1, (0.0,), ((),), (1.0,)),
    "midpoint": Tableau(2, (0.0, 0.5), ((), (0.5,)), (0.0, 1.0)),
    "rk4": Tableau(4, (0.0, 1 / 3, 2 / 3, 1.0), ((), (1 / 3,), (-1 / 3, 1.0), (1.0, -1.0, 1.0)),
                   (1 / 8, 3 / 8, 3 / 8, 1 / 8)),
    "rk4-classic": Tableau(4, (0.0, 0.5, 0.5, 1.0), ((), (0.5,), (0.0, 0.5), (0.0, 0.0, 1.0)),
                           (1 / 6, 1 / 3, 1 / 3, 1 / 6)),
}
METHODS = tuple(TABLEAUS)


def _combine(weights: tuple[float, ...], slopes: list[Tensor]) -> Tensor | None:
    """Σ_j w_j k_j over the non-zero weights (None when all are zero)."""
    terms = [w * k for w, k in zip(weights, slopes, strict=False) if w != 0.0]
    return sum(terms[1:], terms[0]) if terms else None


def rk_step(func: Callable[[Tensor, Tensor], Tensor], t: Tensor, y: Tensor, h: Tensor, tableau: Tableau) -> Tensor:
    """One explicit Runge–Kutta step of size h from (t, y)."""
    slopes: list[Tensor] = []
    for c, a in zip(tableau.c, tableau.a, strict=True):
        increment = _combine(a, slopes)
        slopes.append(func(t + c * h, y if increment is None else y + h * increment))
    return y + h * _combine(tableau.b, slopes)


def odeint(func: Callable[[Tensor, Tensor], Tensor], y0: Tensor, t: Tensor, method: str = "rk4",
           step_size: float | None = None) -> Tensor:
    """Solve dy/dt = func(t, y), y(t[0]) = y0; return y at every time in t, shape (len(t), *y0.shape).

    t: 1-D, strictly increasing or strictly decreasing. step_size: largest step (same units as t),
    None = one step per interval of t.
    """
    if method not in TABLEAUS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if not isinstance(y0, Tensor) or not y0.is_floating_point():
        raise ValueError(f"y0 must be a floating-point tensor, got {type(y0).__name__}")
    t = torch.as_tensor(t, dtype=y0.dtype, device=y0.device)
    if t.dim() != 1 or len(t) < 1:
        raise ValueError(f"t must be a non-empty 1-D tensor of times, got shape {tuple(t.shape)}")
    gaps = t.diff()
    if len(gaps) and not (bool((gaps > 0).all()) or bool((gaps < 0).all())):
        raise ValueError("t must be strictly increasing or strictly decreasing")
    if step_size is not None and not step_size > 0:
        raise ValueError(f"step_size must be > 0 or None, got {step_size}")
    tableau = TABLEAUS[method]
    out = [y0]
    for t0, gap in zip(t[:-1], gaps, strict=True):
        steps = 1 if step_size is None else max(1, math.ceil(abs(gap.item()) / step_size - 1e-9))
        h = gap / steps
        y = out[-1]
        for i in range(steps):
            y = rk_step(func, t0 + i * h, y, h, tableau)
        out.append(y)
    return torch.stack(out)


def solve(func: Callable[[Tensor, Tensor], Tensor], y0: Tensor, t: Tensor, method: str = "rk4",
          step_size: float | None = None, rtol: float = 1e-3, atol: float = 1e-4, adjoint: bool = False,
          solver: str = "torchdiffeq") -> Tensor:
    """y at every time in t, (len(t), *y0.shape), by `solver`:

    "torchdiffeq": its odeint (odeint_adjoint when adjoint, func then must be an nn.Module); fixed-grid
                   methods use step_size, adaptive ones ("dopri5", ...) use rtol and atol;
    "ssog_lab":    this module's odeint (fixed grid only; adjoint not available).

    Raises SolverDivergedError when an adaptive method's step size underflows (a non-finite state or slope).
    """
    if solver == "ssog_lab":
        if adjoint:
            raise ValueError("adjoint=True needs solver='torchdiffeq'")
        return odeint(func, y0, t, method=method, step_size=step_size)
    if solver != "torchdiffeq":
        raise ValueError(f"solver must be 'torchdiffeq' or 'ssog_lab', got {solver!r}")
    import torchdiffeq

    integrate = torchdiffeq.odeint_adjoint if adjoint else torchdiffeq.odeint
    if method in ("euler", "midpoint", "rk4"):
        return integrate(func, y0, t, method=method, options=dict(step_size=step_size))
    try:
        return integrate(func, y0, t, method=method, rtol=rtol, atol=atol)
    except AssertionError as err:  # torchdiffeq's only report that the adaptive step size fell to nothing
        if "underflow in dt" not in str(err):
            raise
        raise SolverDivergedError(f"the adaptive solver {method} could not advance ({err}): the state or its "
                                  "derivative is not finite or blows up (a NaN input, or diverging weights)") from err


class CountNFE:
    """Wrap func(t, y) and count its evaluations in `.nfe` (the cost of an ODE solve)."""

    def __init__(self, func: Callable[[Tensor, Tensor], Tensor]):
        self.func, self.nfe = func, 0

    def __call__(self, t: Tensor, y: Tensor) -> Tensor:
        self.nfe += 1
        return self.func(t, y)
