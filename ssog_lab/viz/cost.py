"""Widgets for notebook 02: the Kronecker (separable) structure of the SSoG kernel, FLOP and memory
formulas against dense attention, and live timings on this machine. They only draw: the Kronecker factors and
sum come from `ops` (`axis_matrices`, `kronecker_kernel`), the formulas and timings from `bench.operator`
(`flop_counts`, `operator_timings`), the fitted exponents from `results.stats.loglog_slope`."""

from __future__ import annotations

import math

import ipywidgets as widgets
import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from .. import ops
from ..bench.operator import OPERATORS, flop_counts, operator_timings
from ..results.stats import loglog_slope
from ..style import OPERATOR_COLOURS
from ._base import LiveFigure
from .common import as_array, heatmap, image_axes

_COLOURS = {name: OPERATOR_COLOURS[name] for name in OPERATORS}
_SDPA, _SEPARABLE, _DENSE = OPERATORS  # bench.operator's names, spelled out only there
# The FLOP formulas' exponents in N (notebook 02's table): 4N²d for attention, 4MN√N·d for separable SSoG.
_REFERENCE_SLOPES = {_SDPA: 2.0, _SEPARABLE: 1.5}
_BAR_LABELS = {_SDPA: "SDPA", _SEPARABLE: "SSoG<br>separable",
               _DENSE: "SSoG via<br>N×N kernel"}  # short enough to sit under a bar


def _slider(kind, value, low, high, step, description, width="300px"):
    return kind(value=value, min=low, max=high, step=step, description=description, continuous_update=False,
                layout=widgets.Layout(width=width), style={"description_width": "80px"})


def kronecker_widget(grid: tuple[int, int] = (5, 6)) -> LiveFigure:
    """One atom: its row matrix G_row (H×H), column matrix G_col (W×W), their Kronecker product and the
    N×N kernel from `ops.dense_kernel`, side by side. Sliders for σ and μ on each axis."""
    height, width = grid
    controls = {
        "sigma_row": _slider(widgets.FloatSlider, 1.0, 0.2, 4.0, 0.1, "σ row"),
        "sigma_col": _slider(widgets.FloatSlider, 2.0, 0.2, 4.0, 0.1, "σ col"),
        "mu_row": _slider(widgets.FloatSlider, 0.0, -height, height, 0.5, "μ row"),
        "mu_col": _slider(widgets.FloatSlider, 1.0, -width, width, 0.5, "μ col"),
    }
    titles = (f"G_row ({height}×{height})", f"G_col ({width}×{width})", "G_row ⊗ G_col (N×N)",
              "ops.dense_kernel (N×N)")
    figure = make_subplots(rows=1, cols=4, subplot_titles=titles, column_widths=[0.16, 0.2, 0.32, 0.32],
                           horizontal_spacing=0.07)
    # The factors share one colour scale, the two N×N kernels another (their entries are products of the factors').
    for col in range(1, 5):
        figure.add_trace(heatmap(np.zeros((1, 1)), coloraxis="coloraxis" if col < 3 else "coloraxis2"),
                         row=1, col=col)
    bar = {"thickness": 10, "len": 0.75}
    figure.update_layout(height=340, width=1040, margin={"t": 40, "b": 10, "r": 70},
                         coloraxis={"colorscale": "Viridis", "cmin": 0,
                                    "colorbar": {**bar, "x": figure.layout.xaxis2.domain[1] + 0.005}},
                         coloraxis2={"colorscale": "Viridis", "cmin": 0,
                                     "colorbar": {**bar, "x": 1.01, "title": {"text": "weight", "side": "right"}}})
    image_axes(figure)

    def redraw(fig: go.Figure, sigma_row: float, sigma_col: float, mu_row: float, mu_col: float) -> str:
        mu = torch.tensor([[mu_row, mu_col]], dtype=torch.float64)  # (M=1, 2)
        sigma = torch.tensor([[sigma_row, sigma_col]], dtype=torch.float64)
        amp = torch.ones(1, dtype=torch.float64)
        g_row, g_col = ops.axis_matrices(mu, sigma, grid)  # (1, H, H), (1, W, W)
        kron = ops.kronecker_kernel(mu, sigma, amp, grid)  # (N, N)
        dense = ops.dense_kernel(mu[None], sigma[None], amp[None], grid)[0]
        for trace, z in zip(fig.data, (g_row[0], g_col[0], kron, dense), strict=True):
            trace.z = as_array(z)
        return (f"max |G_row ⊗ G_col − K| = {float((kron - dense).abs().max()):.1e}: the N×N kernel holds "
                f"N² = {(height * width) ** 2} numbers, the two factors only H² + W² = {height ** 2 + width ** 2}")

    return LiveFigure(figure, controls, redraw)


def cost_widget(sides: tuple[int, ...] = (4, 8, 14, 16, 32, 64, 128)) -> LiveFigure:
    """FLOPs and memory of `flop_counts` against N (log–log), sliders for the atoms M and the head width d.
    The readout gives the fitted exponents and the grid from which separable SSoG needs fewer FLOPs."""
    controls = {"atoms": _slider(widgets.IntSlider, 4, 1, 16, 1, "atoms M"),
                "d": _slider(widgets.IntSlider, 64, 8, 256, 8, "head dim d")}
    tokens = [s * s for s in sides]
    figure = make_subplots(rows=1, cols=2, subplot_titles=("FLOPs per head and image", "numbers held (memory)"))
    for name, colour in _COLOURS.items():
        for col in (1, 2):
            figure.add_trace(go.Scatter(x=tokens, mode="lines+markers", name=name, line={"color": colour},
                                        legendgroup=name, showlegend=col == 1), row=1, col=col)
    figure.update_xaxes(type="log", title_text="tokens N", dtick=1)  # decades only: readable labels
    figure.update_yaxes(type="log", title_text="FLOPs", dtick=2, exponentformat="power", row=1, col=1)
    figure.update_yaxes(type="log", title_text="numbers held", dtick=2, exponentformat="power", row=1, col=2)
    figure.update_layout(height=400, width=950, margin={"t": 40}, legend={"orientation": "h", "y": -0.2})

    def redraw(fig: go.Figure, atoms: int, d: int) -> str:
        counts = [flop_counts(s, d, atoms) for s in sides]
        slopes = []
        for k, name in enumerate(_COLOURS):
            flops = [c[name]["flops"] for c in counts]
            fig.data[2 * k].y = flops
            fig.data[2 * k + 1].y = [c[name]["memory"] for c in counts]
            slopes.append(f"{name}: FLOPs ∝ N^{loglog_slope(tokens[-3:], flops[-3:]):.2f}")
        # separable < SDPA  ⇔  2M·N·2s·d < 4N²d  ⇔  s > M
        return " · ".join(slopes) + f"<br>separable SSoG needs fewer FLOPs than SDPA once the side exceeds M = {atoms}"

    return LiveFigure(figure, controls, redraw)


def timing_widget(sweep: tuple[int, ...] = (8, 16, 24, 32, 48), slider_max: int = 64, d: int = 32,
                  heads: int = 2, atoms: int = 4) -> LiveFigure:
    """Left: a sweep measured once when built (ms against N, log–log, fitted slopes in the legend);
    right: the three operators timed afresh at the slider's grid side."""
    sweep_rows = [operator_timings(s, d, heads, atoms) for s in sweep]
    tokens = [s * s for s in sweep]
    controls = {"side": _slider(widgets.IntSlider, sweep[len(sweep) // 2], 4, slider_max, 4, "grid side", "420px")}
    figure = make_subplots(rows=1, cols=2, column_widths=[0.6, 0.4],
                           subplot_titles=("sweep on this machine (ms, log–log)", "at the slider's grid"))
    slopes = {}
    for name, colour in _COLOURS.items():
        times = [row[name] for row in sweep_rows]
        finite = [(n, t) for n, t in zip(tokens, times, strict=True) if math.isfinite(t)]
        upper = finite[len(finite) // 2:] if len(finite) >= 4 else finite  # small grids are overhead-bound
        slopes[name] = loglog_slope(*zip(*upper, strict=True)) if len(upper) >= 2 else math.nan
        shown = [t if math.isfinite(t) else None for t in times]  # None: not measured (JSON has no NaN)
        figure.add_trace(go.Scatter(x=tokens, y=shown, mode="lines+markers", line={"color": colour},
                                    name=f"{name}: slope {slopes[name]:.2f}"), row=1, col=1)
        if name in _REFERENCE_SLOPES and upper:
            # the formula's exponent, drawn through the first point of the fitted range
            n0, t0 = upper[0]
            exponent = _REFERENCE_SLOPES[name]
            figure.add_trace(go.Scatter(x=[n0, tokens[-1]], y=[t0, t0 * (tokens[-1] / n0) ** exponent], mode="lines",
                                        line={"color": colour, "dash": "dot", "width": 1},
                                        name=f"∝ N^{exponent:g} (formula)"), row=1, col=1)
    figure.add_trace(go.Bar(x=[_BAR_LABELS[name] for name in _COLOURS], marker_color=list(_COLOURS.values()),
                            showlegend=False), row=1, col=2)
    figure.update_xaxes(type="log", title_text="tokens N", tickvals=tokens, row=1, col=1)
    figure.update_yaxes(type="log", title_text="ms", dtick=1, row=1, col=1)  # decades only: readable labels
    figure.update_yaxes(title_text="ms", row=1, col=2)
    figure.update_layout(height=420, width=1000, margin={"t": 40}, legend={"orientation": "h", "y": -0.25})

    def redraw(fig: go.Figure, side: int) -> str:
        timings = operator_timings(side, d, heads, atoms)
        fig.data[-1].y = [0.0 if math.isnan(t) else t for t in timings.values()]
        parts = [f"{name}: {t:.3g} ms" if math.isfinite(t) else f"{name}: skipped (N² too large)"
                 for name, t in timings.items()]
        return f"grid {side}×{side} (N = {side * side}), d = {d}, {heads} heads, M = {atoms}: " + " · ".join(parts)

    widget = LiveFigure(figure, controls, redraw)
    widget.slopes = slopes
    return widget
