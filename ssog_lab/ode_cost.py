"""What an ODE solve costs and how close it gets: the function evaluations (NFE) counted, the error against a
reference, for the library's fixed-grid solvers (`ode`) and torchdiffeq's side by side (notebooks 03, 04, 05).

The helpers take any right-hand side func(t, y) -> dy/dt (for a model: `models.Dynamics`).

    y, nfe = solve_and_count(func, y0, end_time, "rk4 (3/8 rule) · ssog_lab.ode", steps=8)
    rows = convergence(func, y0, end_time, reference, list(SOLVERS))   # {solver, steps, rtol, nfe, error}
    ode_nfe(model, images)                                             # {rtol: dopri5's NFE} of an ODE ViT
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torchdiffeq
from torch import Tensor

from . import ode
from .bench.report import markdown_table
from .models import Dynamics

# Label -> (library, method). Fixed-grid methods take a step count; dopri5 (adaptive) takes a tolerance.
SOLVERS: dict[str, tuple[str, str]] = {
    "euler · ssog_lab.ode": ("ssog_lab", "euler"),
    "midpoint · ssog_lab.ode": ("ssog_lab", "midpoint"),
    "rk4 (3/8 rule) · ssog_lab.ode": ("ssog_lab", "rk4"),
    "rk4 classic · ssog_lab.ode": ("ssog_lab", "rk4-classic"),
    "euler · torchdiffeq": ("torchdiffeq", "euler"),
    "midpoint · torchdiffeq": ("torchdiffeq", "midpoint"),
    "rk4 · torchdiffeq": ("torchdiffeq", "rk4"),
    "dopri5 (adaptive) · torchdiffeq": ("torchdiffeq", "dopri5"),
}
STEP_COUNTS = (1, 2, 4, 8, 16, 32, 64)
TOLERANCES = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8)


def solve_and_count(func, y0: Tensor, end_time: float, solver: str, steps: int = 8,
                    rtol: float = 1e-5) -> tuple[Tensor, int]:
    """y(end_time) of dy/dt = func(t, y), y(0) = y0, and the number of func evaluations it took.

    solver: a key of `SOLVERS`. Fixed-grid methods take `steps` equal steps on [0, end_time];
    dopri5 adapts its steps to the tolerance rtol (atol = rtol / 10).
    """
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {list(SOLVERS)}, got {solver!r}")
    if steps < 1:
        raise ValueError(f"steps must be ≥ 1, got {steps}")
    library, method = SOLVERS[solver]
    counted = ode.CountNFE(func)
    times = torch.tensor([0.0, end_time], dtype=y0.dtype)
    with torch.no_grad():
        y = ode.solve(counted, y0, times, method=method, step_size=end_time / steps, rtol=rtol, atol=rtol / 10,
                      solver=library)
    return y[-1], counted.nfe


def relative_error(y: Tensor, reference: Tensor) -> float:
    """‖y − reference‖ / ‖reference‖ (Frobenius norms over all entries)."""
    return float((y - reference).norm() / reference.norm())


def convergence(func, y0: Tensor, end_time: float, reference: Tensor, solvers: list[str],
                steps: tuple[int, ...] = STEP_COUNTS[:6], tolerances: tuple[float, ...] = TOLERANCES[:6]) -> list[dict]:
    """Rows {solver, steps, rtol, nfe, error} for each solver at each step count (dopri5: each tolerance);
    error is `relative_error` of y(end_time) against `reference`."""
    rows = []
    for solver in solvers:
        adaptive = SOLVERS[solver][1] == "dopri5"
        for setting in (tolerances if adaptive else steps):
            kwargs = dict(rtol=setting) if adaptive else dict(steps=setting)
            y, nfe = solve_and_count(func, y0, end_time, solver, **kwargs)
            rows.append(dict(solver=solver, steps=None if adaptive else setting, rtol=setting if adaptive else None,
                             nfe=nfe, error=relative_error(y, reference)))
    return rows


def solve_logits(model, images: Tensor, **solver) -> tuple[Tensor, int]:
    """Logits (B, classes) of an ODE model on images (B, C, H, W) solved with `solver` (ViTConfig ode_* fields; none:
    the model's own, the one it was trained through), and the NFE of that solve (`ViT.solved_with`)."""
    with model.solved_with(**solver), torch.no_grad():
        return model(images), model.nfe


def ode_nfe(model, images: Tensor, rtols: tuple[float, ...] = (1e-3, 1e-5)) -> dict[float, int]:
    """dopri5's NFE (torchdiffeq, atol = rtol / 10) to solve a continuous-depth model's ODE on [0, T] for a
    batch of images (B, C, H, W), per rtol: the cost an adaptive solver pays for this model's f."""
    if model.config.depth != "ode":
        raise ValueError(f"model must have depth 'ode', got {model.config.depth!r}")
    with torch.no_grad():
        x0, grid = model.embed(images.to(next(model.parameters()).dtype))  # (B, N, C)
    f = Dynamics(model.blocks[0], grid)
    return {rtol: solve_and_count(f, x0, model.config.end_time, "dopri5 (adaptive) · torchdiffeq", rtol=rtol)[1]
            for rtol in rtols}


def ode_nfe_markdown(runs: dict[str, tuple[dict[float, int], dict[float, int]]], baseline: str = "sdpa") -> str:
    """Markdown: per run (name -> (NFE per rtol before training, after training), as `ode_nfe` gives them) a
    table row, then one sentence per rtol that says, from the numbers, how each run compares with `baseline`
    after training and how training changed its NFE."""
    rtols = sorted({rtol for before, after in runs.values() for rtol in (*before, *after)}, reverse=True)
    head = " / ".join(f"{rtol:g}" for rtol in rtols)
    def per_rtol(counts: dict[float, int]) -> str:
        return " / ".join(str(counts.get(r, "–")) for r in rtols)

    table = markdown_table([dict(run=name, before=per_rtol(before), after=per_rtol(after))
                            for name, (before, after) in runs.items()],
                           {"run": "run", f"dopri5 NFE before training (rtol {head})": "before",
                            "after training": "after"}, align="lrr")
    words = []
    base = runs.get(baseline)
    for rtol in rtols:
        for name, (before, after) in runs.items():
            if name == baseline or base is None or rtol not in after or rtol not in base[1]:
                continue
            diff = after[rtol] - base[1][rtol]
            more = "more" if diff > 0 else "fewer"
            versus = "the same NFE as" if diff == 0 else f"{abs(diff)} {more} evaluations than"
            change = after[rtol] - before.get(rtol, after[rtol])
            direction = "up" if change > 0 else "down"
            trained = "unchanged by training" if change == 0 else f"{direction} {abs(change)} with training"
            words.append(f"- rtol {rtol:g}: after training, {name} needs {versus} {baseline} ({after[rtol]} against "
                         f"{base[1][rtol]}); its NFE is {trained}.")
    return table + ("\n\n" + "\n".join(words) if words else "")


def dopri5_nfe_along_ray(func: Callable[[Tensor], Tensor], x: Tensor, s: float, end_time: float = 1.0,
                         rtol: float = 1e-5, atol: float = 1e-7) -> float:
    """Evaluations dopri5 needs for dx/dt = func(x), x(0) = s·x, on [0, end_time] (torchdiffeq)."""
    counted = ode.CountNFE(lambda t, y: func(y))
    with torch.no_grad():
        torchdiffeq.odeint(counted, s * x, torch.tensor([0.0, end_time], dtype=x.dtype), method="dopri5",
                           rtol=rtol, atol=atol)
    return float(counted.nfe)
