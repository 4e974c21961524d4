"""Widgets for notebook 03: the norm and bound of fixed SSoG, Jacobian norms and solver step counts along
a ray s·x for each mixer, and Picard iterates converging (or not) on small ODEs."""

from __future__ import annotations

import math
from collections.abc import Callable

import ipywidgets as widgets
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from torch import Tensor

from .. import lipschitz, ops
from ..lipschitz import jacobian_norm_along_ray, picard_bound, ray_mixers, ray_point
from ..ode_cost import dopri5_nfe_along_ray
from ..style import OPERATOR_COLOURS, series_colour
from ._base import LiveFigure
from .common import as_array, heatmap, image_axes

_COLOURS = {name: OPERATOR_COLOURS[name] for name in ("SDPA (dense attention)", "axial attention", "fixed SSoG")}


def _slider(kind, value, low, high, step, description, width="300px"):
    return kind(value=value, min=low, max=high, step=step, description=description, continuous_update=False,
                layout=widgets.Layout(width=width), style={"description_width": "110px"})


def two_atom_head(sigma: float, mu_col: float, amp2: float) -> tuple[Tensor, Tensor, Tensor]:
    """One head, two atoms: atom 1 round (width σ, column offset μ_col, α = 1), atom 2 centred, σ = 3,
    amplitude amp2. Returns mu, sigma (1, 2, 2) and amp (1, 2), float64."""
    mu = torch.tensor([[[0.0, mu_col], [0.0, 0.0]]], dtype=torch.float64)
    sigmas = torch.tensor([[[sigma, sigma], [3.0, 3.0]]], dtype=torch.float64)
    return mu, sigmas, torch.tensor([[1.0, amp2]], dtype=torch.float64)


def ssog_norm_widget(grid: tuple[int, int] = (12, 12)) -> LiveFigure:
    """‖·‖₂ of a fixed two-atom SSoG head: matrix-free exact norm, dense N×N reference, closed-form bound.

    Controls: atom 1's width σ and column offset μ_col, atom 2's amplitude α₂. Right panel: the column
    sums of K (how much each input token feeds the output in total); offsets pile weight onto the border,
    which is what pushes ‖K‖₂ above Σ|α|.
    """
    height, width = grid
    controls = {
        "sigma": _slider(widgets.FloatSlider, 1.0, 0.3, 6.0, 0.1, "σ (atom 1)"),
        "mu_col": _slider(widgets.FloatSlider, 0.0, -2.0 * width, 2.0 * width, 0.5, "μ_col (atom 1)"),
        "amp2": _slider(widgets.FloatSlider, 0.0, -1.0, 1.0, 0.05, "α₂ (atom 2)"),
    }
    names = ["exact (matrix-free)", "exact (dense N×N)", "closed-form bound", "Σ|α|"]
    figure = make_subplots(rows=1, cols=2, column_widths=[0.5, 0.5], horizontal_spacing=0.12,
                           subplot_titles=("‖K‖₂ and its bound", "column sums of K (input token's total weight)"))
    # A dot plot, not bars: the four values are close to each other, and bars from 0 would hide their gaps.
    figure.add_trace(go.Scatter(x=names, mode="markers+text", textposition="top center", texttemplate="%{y:.4f}",
                                marker={"size": 14, "color": [series_colour(i) for i in range(len(names))]}),
                     row=1, col=1)
    figure.add_trace(heatmap(torch.zeros(grid), colorscale="Viridis", colorbar={"x": 1.02}), row=1, col=2)
    figure.update_layout(height=400, width=900, showlegend=False, margin={"t": 40})
    figure.update_yaxes(title_text="‖·‖₂ (autoscaled, not from 0)", row=1, col=1)
    figure.update_xaxes(range=[-0.5, len(names) - 0.5], tickangle=-20, row=1, col=1)  # room for the value labels
    image_axes(figure, subplots=[2], ticks=True)
    figure.update_xaxes(title_text="input column c′ (tokens)", row=1, col=2)
    figure.update_yaxes(title_text="input row r′", row=1, col=2)

    def redraw(fig: go.Figure, sigma: float, mu_col: float, amp2: float) -> str:
        mu, sigmas, amp = two_atom_head(sigma, mu_col, amp2)
        exact = float(lipschitz.ssog_spectral_norm(mu, sigmas, amp, grid, steps=30, tol=1e-6)[0])
        dense = float(lipschitz.ssog_dense_spectral_norm(mu, sigmas, amp, grid)[0])
        bound = float(lipschitz.ssog_lipschitz_bound(mu, sigmas, amp, grid)[0])
        kernel = ops.dense_kernel(mu, sigmas, amp, grid)[0]  # (N, N)
        fig.data[0].y = [exact, dense, bound, float(amp.abs().sum())]
        fig.data[1].z = as_array(kernel.sum(0).reshape(height, width))
        return (f"‖K‖₂ = {exact:.4f} (dense reference {dense:.4f}) ≤ bound {bound:.4f}: "
                f"‖K‖₂ / bound = {exact / bound:.3f}; Σ|α| = {float(amp.abs().sum()):.2f}")

    return LiveFigure(figure, controls, redraw)


RAYS = {"generic ray (random tokens)": False, "tied-score ray (one token, tied scores)": True}


def _ray_widget(measure: Callable[[Callable, Tensor, float], float], title: str, y_title: str, log_y: bool,
                scales: tuple[float, ...], grid: tuple[int, int], dim: int, rays: tuple[str, ...]) -> LiveFigure:
    """One figure for any quantity measured along a ray: a precomputed curve per mixer over `scales`, and a
    marker per mixer at the slider's s, measured afresh on every move. With several `rays` (keys of RAYS), a
    menu picks the ray and the curves are redrawn from the precomputed ones."""
    mixers = ray_mixers(grid, dim)
    points = {ray: ray_point(grid, dim, tied=RAYS[ray]) for ray in rays}
    curves = {ray: {name: [measure(func, x, s) for s in scales] for name, func in mixers.items()}
              for ray, x in points.items()}
    low, high = math.log2(min(scales)), math.log2(max(scales))
    controls = {"s": widgets.FloatLogSlider(value=1.0, base=2, min=low, max=high, step=0.25, description="scale s",
                                            continuous_update=False, layout=widgets.Layout(width="420px"),
                                            style={"description_width": "110px"})}
    if len(rays) > 1:
        controls["ray"] = widgets.Dropdown(options=list(rays), value=rays[0], description="ray",
                                           layout=widgets.Layout(width="420px"))
    figure = go.Figure()
    for name in mixers:
        figure.add_trace(go.Scatter(x=list(scales), mode="lines+markers", name=name,
                                    line={"color": _COLOURS[name]}, marker={"size": 5}, legendgroup=name))
    for name in mixers:
        figure.add_trace(go.Scatter(mode="markers", marker={"size": 14, "color": _COLOURS[name], "symbol": "diamond",
                                                            "line": {"width": 1, "color": "black"}},
                                    name=f"{name} at s", legendgroup=name, showlegend=False))
    figure.update_layout(title=title, height=420, width=760, xaxis={"type": "log", "title": "scale s of the input s·x"},
                         yaxis={"type": "log" if log_y else "linear", "title": y_title}, margin={"t": 50})

    def redraw(fig: go.Figure, s: float, ray: str = rays[0]) -> str:
        parts = []
        for k, (name, func) in enumerate(mixers.items()):
            value = measure(func, points[ray], s)
            fig.data[k].y = curves[ray][name]
            fig.data[len(mixers) + k].x, fig.data[len(mixers) + k].y = [s], [value]
            parts.append(f"{name}: <b>{value:.4g}</b>")
        return f"{ray}, at s = {s:.4g}: " + " · ".join(parts)

    return LiveFigure(figure, controls, redraw)


def ray_widget(scales: tuple[float, ...] = (0.25, 1, 4, 16, 32, 64, 256, 1024), grid: tuple[int, int] = (4, 4),
               dim: int = 16) -> LiveFigure:
    """Jacobian spectral norm of each bare mixer at s·x (`lipschitz.jacobian_spectral_norm`): a slider for s,
    a menu for the ray (`RAYS`: generic, where attention's softmax saturates, or tied scores, where it grows)."""
    return _ray_widget(jacobian_norm_along_ray, "Jacobian spectral norm ‖∂f/∂x‖₂ at s·x", "‖J‖₂", True,
                       scales, grid, dim, tuple(RAYS))


def nfe_widget(scales: tuple[float, ...] = (0.5, 1, 2, 4, 8), grid: tuple[int, int] = (4, 4),
               dim: int = 16) -> LiveFigure:
    """dopri5's function evaluations for dx/dt = mixer(x) from x(0) = s·x (generic ray) on [0, 1]: a slider for s."""
    return _ray_widget(dopri5_nfe_along_ray, "adaptive solver cost: dopri5 evaluations (rtol 1e-5) for dx/dt = f(x)",
                       "function evaluations (NFE)", False, scales, grid, dim, tuple(RAYS)[:1])


def picard_problems(end_time: float = 2.0, points: int = 201) -> dict[str, dict]:
    """Three initial-value problems for the Picard widget, each: func(t, x), x0, t grid, exact solution on the
    grid (NaN where it does not exist), and a global Lipschitz constant L (None if there is none)."""
    t = torch.linspace(0.0, end_time, points, dtype=torch.float64)
    one = torch.ones(1, dtype=torch.float64)
    grid = (5, 5)
    mu, sigma, amp = two_atom_head(1.0, 1.0, -0.5)
    kernel = ops.dense_kernel(mu, sigma, amp, grid)[0]  # (N, N): exact solution through the matrix exponential
    x0 = torch.linspace(-1.0, 1.0, grid[0] * grid[1], dtype=torch.float64)  # (N,) a ramp over the tokens
    ssog = lambda s, x: kernel @ x  # (N,) -> (N,): Y = K V with d = 1, on a grid small enough for K
    blow_up = torch.where(t < 1.0, 1.0 / (1.0 - t).clamp_min(1e-12), torch.full_like(t, math.nan))
    return {
        "x′ = x, x(0) = 1 (solution eᵗ)": dict(func=lambda s, x: x, x0=one, t=t, exact=t.exp()[:, None],
                                                  lipschitz=1.0),
        "x′ = x², x(0) = 1 (blows up at t = 1)": dict(func=lambda s, x: x * x, x0=one, t=t,
                                                        exact=blow_up[:, None], lipschitz=None),
        "x′ = SSoG(x) on a 5×5 grid (25 tokens)": dict(
            func=ssog, x0=x0, t=t, exact=torch.stack([torch.linalg.matrix_exp(s * kernel) @ x0 for s in t]),
            lipschitz=float(lipschitz.ssog_spectral_norm(mu, sigma, amp, grid)[0])),
    }


def picard_widget(max_iterations: int = 12, end_time: float = 2.0, points: int = 201) -> LiveFigure:
    """Picard iterates x_k(t) (`lipschitz.picard`) against the exact solution: a slider for k, a problem menu.

    The readout compares the measured sup-norm error with the a-priori bound where a global Lipschitz
    constant exists. For the vector problem the figure shows three tokens of the 25.
    """
    problems = picard_problems(end_time, points)
    iterates = {name: lipschitz.picard(p["func"], p["x0"], p["t"], max_iterations) for name, p in problems.items()}
    shown = [0, 12, 24]  # tokens plotted for the vector problem
    controls = {
        "k": _slider(widgets.IntSlider, 3, 0, max_iterations, 1, "iterates k", "420px"),
        "problem": widgets.Dropdown(options=list(problems), value=list(problems)[0], description="problem",
                                    layout=widgets.Layout(width="420px")),
    }
    shown_values = lambda values: values.clamp(-1e6, 1e6)  # x² iterates overflow float32 past t = 1
    figure = go.Figure()
    for j in range(len(shown)):
        figure.add_trace(go.Scatter(mode="lines", line={"color": "black", "dash": "dash", "width": 2},
                                    name="exact solution", showlegend=j == 0, legendgroup="exact"))
    for j in range(len(shown)):
        figure.add_trace(go.Scatter(mode="lines", line={"color": series_colour(3), "width": 3},
                                    name="iterate k", showlegend=j == 0, legendgroup="k"))
    figure.add_trace(go.Scatter(mode="lines", line={"color": series_colour(0), "width": 1}, opacity=0.5,
                                name="iterates 0 … k−1", connectgaps=False))
    figure.update_layout(height=440, width=800, xaxis_title="t", yaxis_title="x(t)", margin={"t": 30})

    def redraw(fig: go.Figure, k: int, problem: str) -> str:
        p, xs = problems[problem], iterates[problem]  # xs (K + 1, T, D)
        t, exact = p["t"], p["exact"]  # (T,), (T, D)
        tokens = shown if exact.shape[1] > 1 else [0]
        for j in range(len(shown)):
            column = tokens[j] if j < len(tokens) else None
            fig.data[j].x = as_array(t) if column is not None else []
            fig.data[j].y = as_array(exact[:, column]) if column is not None else []
            fig.data[len(shown) + j].x = as_array(t) if column is not None else []
            fig.data[len(shown) + j].y = as_array(shown_values(xs[k, :, column])) if column is not None else []
        # earlier iterates as one trace, separated by NaN gaps
        earlier = [torch.cat([shown_values(xs[i, :, c]), torch.tensor([math.nan], dtype=xs.dtype)])
                   for i in range(k) for c in tokens]
        gap_t = torch.cat([t, torch.tensor([math.nan], dtype=t.dtype)])
        fig.data[-1].x = as_array(gap_t.repeat(len(earlier))) if earlier else []
        fig.data[-1].y = as_array(torch.cat(earlier)) if earlier else []
        exists = torch.isfinite(exact).all(dim=1)  # times where the solution exists
        top = float(exact[exists].abs().max()) * 1.5
        fig.layout.yaxis.range = [float(exact[exists].min()) - 0.1 * top, top]
        sup_error = lambda mask: float((xs[k][mask] - exact[mask]).norm(dim=1).max())
        if p["lipschitz"] is None:
            return (f"k = {k}: sup error on [0, 0.25] = {sup_error(t <= 0.25):.3g}, on [0, 0.9] = "
                    f"{sup_error(t <= 0.9):.3g}. f(x) = x² is only locally Lipschitz: Picard–Lindelöf guarantees "
                    "[0, 0.25], the solution blows up at t = 1, and past it the iterates grow without limit")
        slope = float(p["func"](t[0], p["x0"]).norm())
        bound = picard_bound(p["lipschitz"], slope, float(t[-1]), k)
        floor = sup_error(exists) if k == len(xs) - 1 else float((xs[-1] - exact).norm(dim=1).max())
        return (f"k = {k}: sup_t ‖x_k(t) − x(t)‖ = {sup_error(exists):.3g}; a-priori bound (exact integrals) "
                f"{bound:.3g} with Λ = {p['lipschitz']:.4g}, T = {float(t[-1]):g}. The trapezoid rule on this time "
                f"grid adds ≈ {floor:.1g} (the error left after {len(xs) - 1} iterates)")

    return LiveFigure(figure, controls, redraw)
