"""Widgets for notebook 04: discrete, looped and continuous depth — parameters, token paths, ODE solvers (what
a solve costs and how close it gets is computed in `ssog_lab.ode_cost`)."""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from torch import Tensor

from ..ode_cost import SOLVERS, STEP_COUNTS, TOLERANCES, relative_error, solve_and_count, solve_logits
from ..style import series_colour
from ._base import LiveFigure
from .common import as_array, heatmap, image_axes


def solver_widget(func, y0: Tensor, end_time: float, reference: Tensor, grid: tuple[int, int],
                  rows: list[dict] | None = None, solver: str = "euler · ssog_lab.ode", steps: int = 4) -> LiveFigure:
    """Pick a solver and its steps (or dopri5's tolerance): error against the reference solution and NFE.

    y0, reference: (1, N, C) token states at t = 0 and a fine solution at t = end_time, N = H·W of `grid`.
    Left: error vs NFE (log–log) for the precomputed `rows` of `convergence`, the current choice as a star.
    Right: the current choice's error per token over the grid, ‖y_n − ref_n‖ / mean_n ‖ref_n‖.
    """
    height, width = grid
    if y0.dim() != 3 or y0.shape[:2] != (1, height * width) or reference.shape != y0.shape:
        raise ValueError(f"y0 and reference must both have shape (1, {height * width}, C) for grid {grid}, "
                         f"got {tuple(y0.shape)} and {tuple(reference.shape)}")
    rows = rows or []
    controls = {
        "solver": widgets.Dropdown(options=list(SOLVERS), value=solver, description="solver",
                                   layout=widgets.Layout(width="360px")),
        "steps": widgets.SelectionSlider(options=STEP_COUNTS, value=steps, description="steps",
                                         continuous_update=False),
        "rtol": widgets.SelectionSlider(options=TOLERANCES, value=1e-4, description="dopri5 rtol",
                                        continuous_update=False, style={"description_width": "80px"}),
    }
    figure = make_subplots(rows=1, cols=2, column_widths=[0.6, 0.4], horizontal_spacing=0.12,
                           subplot_titles=("relative error of x(T) vs function evaluations (NFE)",
                                           "error per token (current choice)"))
    for i, name in enumerate(dict.fromkeys(r["solver"] for r in rows)):
        curve = [r for r in rows if r["solver"] == name]
        figure.add_trace(go.Scatter(x=[r["nfe"] for r in curve], y=[r["error"] for r in curve], mode="lines+markers",
                                    name=name, line={"color": series_colour(i)}), row=1, col=1)
    for trace in reference_slopes(rows):
        figure.add_trace(trace, row=1, col=1)
    figure.add_trace(go.Scatter(mode="markers", name="current choice",
                                marker={"symbol": "star", "size": 18, "color": "black"}), row=1, col=1)
    figure.add_trace(heatmap(np.zeros(grid), colorscale="Viridis", colorbar={"x": 1.02, "title": "error"}),
                     row=1, col=2)
    figure.update_xaxes(type="log", dtick=1, title_text="NFE (evaluations of f)", row=1, col=1)
    figure.update_yaxes(type="log", exponentformat="power", title_text="‖x(T) − x_ref(T)‖ / ‖x_ref(T)‖", row=1, col=1)
    figure.update_layout(height=460, width=980, margin={"t": 40}, legend={"orientation": "h", "y": -0.2})
    image_axes(figure, subplots=[2], ticks=True)
    figure.update_xaxes(title_text="column (tokens)", row=1, col=2)
    figure.update_yaxes(title_text="row", row=1, col=2)
    scale = reference[0].norm(dim=-1).mean()

    def redraw(fig: go.Figure, solver: str, steps: int, rtol: float) -> str:
        controls["steps"].disabled = SOLVERS[solver][1] == "dopri5"  # dopri5 picks its own steps
        controls["rtol"].disabled = not controls["steps"].disabled
        y, nfe = solve_and_count(func, y0, end_time, solver, steps=steps, rtol=rtol)
        error = relative_error(y, reference)
        per_token = ((y - reference)[0].norm(dim=-1) / scale).reshape(height, width)  # (H, W)
        fig.data[-2].x, fig.data[-2].y = [nfe], [max(error, 1e-17)]
        fig.data[-1].z = as_array(per_token)
        adaptive = SOLVERS[solver][1] == "dopri5"
        setting = f"rtol = {rtol:g}" if adaptive else f"{steps} step(s) of h = {end_time / steps:g}"
        return (f"<b>{solver}</b>, {setting}: NFE = {nfe}, relative error = {error:.2e}; "
                f"worst token error {per_token.max():.2e}")

    return LiveFigure(figure, controls, redraw)


def solver_independence_widget(models: dict[str, torch.nn.Module], images: Tensor, labels: Tensor,
                               classes: list[str], rtol: float = 1e-3) -> LiveFigure:
    """Solve trained ODE models again with dopri5 at a tolerance you pick and watch whether their answer moves.

    models: name -> ODE ViT (eval mode); images (K, C, H, W) and labels (K,) a few test images; classes their names.
    One panel per model: the class probabilities of the chosen image under the model's own training solver (outline)
    and under dopri5 at `rtol` (filled). The readout gives each model's prediction and its accuracy over the K
    images under both, with dopri5's NFE. A model that is a solution of its ODE keeps its answers (but for
    near-ties) under any tolerance that solves it well; one trained through a coarse grid learned that grid's map,
    and its answers move. rtol: the starting tolerance, one of TOLERANCES[:7].
    """
    if rtol not in TOLERANCES[:7]:
        raise ValueError(f"rtol must be one of {TOLERANCES[:7]}, got {rtol!r}")
    if images.dim() != 4 or labels.shape != images.shape[:1]:
        raise ValueError(f"images must be (K, C, H, W) and labels (K,), got {tuple(images.shape)} and "
                         f"{tuple(labels.shape)}")
    own = {name: solve_logits(model, images)[0].softmax(-1) for name, model in models.items()}  # (K, classes) each
    solved: dict[float, dict[str, tuple[Tensor, int]]] = {}  # rtol -> name -> (probabilities (K, classes), NFE)
    controls = {
        "image": widgets.IntSlider(min=0, max=len(images) - 1, value=0, description="test image",
                                   continuous_update=False),
        "rtol": widgets.SelectionSlider(options=TOLERANCES[:7], value=rtol, description="dopri5 rtol",
                                        continuous_update=False, style={"description_width": "80px"}),
    }
    figure = make_subplots(rows=1, cols=len(models), subplot_titles=list(models), horizontal_spacing=0.08)
    for col in range(1, len(models) + 1):
        figure.add_trace(go.Bar(x=classes, name="own training solver", showlegend=col == 1,
                                marker={"color": "rgba(0,0,0,0)", "line": {"color": "black", "width": 2}}),
                         row=1, col=col)
        figure.add_trace(go.Bar(x=classes, name="dopri5 at the chosen rtol", showlegend=col == 1,
                                marker={"color": series_colour(1), "opacity": 0.6}), row=1, col=col)
        figure.update_yaxes(range=[0, 1], title_text="probability" if col == 1 else None, row=1, col=col)
    figure.update_layout(barmode="overlay", height=400, width=980, margin={"t": 50},
                         legend={"orientation": "h", "y": -0.35})

    def redraw(fig: go.Figure, image: int, rtol: float) -> str:
        if rtol not in solved:
            solved[rtol] = {}
            for name, model in models.items():
                logits, nfe = solve_logits(model, images, ode_method="dopri5", ode_solver="torchdiffeq",
                                           ode_rtol=rtol, ode_atol=rtol)
                solved[rtol][name] = logits.softmax(-1), nfe
        lines = [f"test image {image}: <b>{classes[int(labels[image])]}</b>"]
        for i, name in enumerate(models):
            fine, nfe = solved[rtol][name]
            fig.data[2 * i].y, fig.data[2 * i + 1].y = as_array(own[name][image]), as_array(fine[image])
            accuracy = [100 * (p.argmax(-1) == labels).double().mean().item() for p in (own[name], fine)]
            moved = (own[name].argmax(-1) != fine.argmax(-1)).sum().item()
            lines.append(f"<b>{name}</b>: predicts {classes[int(own[name][image].argmax())]} → "
                         f"{classes[int(fine[image].argmax())]}; accuracy on {len(images)} images "
                         f"{accuracy[0]:.1f} % → {accuracy[1]:.1f} % ({moved} answers moved), dopri5 NFE {nfe}")
        return "<br>".join(lines)

    return LiveFigure(figure, controls, redraw)


def reference_slopes(rows: list[dict], orders: tuple[int, ...] = (1, 2, 4)) -> list[go.Scatter]:
    """Dotted lines error ∝ NFE^(−p) through the middle of the `convergence` rows, one per order p, kept
    inside the rows' error range: a method of order p runs parallel to its line on the log–log chart."""
    points = [(r["nfe"], r["error"]) for r in rows if r["nfe"] > 0 and r["error"] > 0]
    if len(points) < 2:
        return []
    nfe, error = np.log10([p[0] for p in points]), np.log10([p[1] for p in points])
    x0, y0 = (nfe.min() + nfe.max()) / 2, (error.min() + error.max()) / 2
    traces = []
    for p in orders:
        low = max(nfe.min(), x0 - (error.max() - y0) / p)  # where the line leaves the error range
        high = min(nfe.max(), x0 + (y0 - error.min()) / p)
        xs = np.array([low, high])
        traces.append(go.Scatter(x=10 ** xs, y=10 ** (y0 - p * (xs - x0)), mode="lines+text", name=f"slope −{p}",
                                 text=["", f"slope −{p}"], textposition="bottom left", showlegend=False,
                                 line={"color": "grey", "dash": "dot", "width": 1}, hoverinfo="skip"))
    return traces


def pca_basis(states: Tensor, components: int = 3) -> tuple[Tensor, Tensor, Tensor]:
    """Principal axes of a cloud of token states (…, C): (mean (C,), axes (C, k), explained variance ratio (k,))."""
    cloud = states.reshape(-1, states.shape[-1]).double()  # (points, C)
    mean = cloud.mean(0)
    _, singular, vh = torch.linalg.svd(cloud - mean, full_matrices=False)
    variance = singular ** 2
    return mean, vh[:components].T, variance[:components] / variance.sum()


def spread_tokens(grid: tuple[int, int], count: int) -> list[int]:
    """`count` token indices spread over an H×W grid (row-major), on a coarse lattice from corner to corner."""
    height, width = grid
    side = max(1, int(np.ceil(np.sqrt(count))))
    rows = np.linspace(0, height - 1, side).round().astype(int)
    cols = np.linspace(0, width - 1, side).round().astype(int)
    return [int(r * width + c) for r in rows for c in cols][:count]


def _check_paths(paths: dict[str, tuple[Tensor, Tensor]], grid: tuple[int, int]) -> None:
    if not paths:
        raise ValueError("paths must name at least one depth form")
    n = grid[0] * grid[1]
    for name, (times, states) in paths.items():
        if states.dim() != 3 or states.shape[1] != n or len(times) != states.shape[0]:
            raise ValueError(f"paths[{name!r}] must be (times (S,), states (S, {n}, C)), got "
                             f"{tuple(times.shape)} and {tuple(states.shape)}")


def trajectory_widget(paths: dict[str, tuple[Tensor, Tensor]], grid: tuple[int, int], max_tokens: int = 9,
                      tokens: int = 4) -> LiveFigure:
    """Token states through depth, projected on their principal axes (one PCA for all depth forms).

    paths: name -> (times (S,), states (S, N, C)) — e.g. layer indices 0…L and `model.states(images)[:, 0]`
    for discrete and looped depth, a fine time grid on [0, T] for the ODE. Controls: how many tokens
    (spread over the grid), which depth forms, which pair of principal axes.
    """
    _check_paths(paths, grid)
    width = grid[1]
    chosen = spread_tokens(grid, max_tokens)
    mean, axes, explained = pca_basis(torch.cat([s for _, s in paths.values()]))
    projected = {name: ((s.double() - mean) @ axes) for name, (_, s) in paths.items()}  # (S, N, 3)
    pairs = {"PC1 · PC2": (0, 1), "PC1 · PC3": (0, 2), "PC2 · PC3": (1, 2)}
    controls = {
        "tokens": widgets.IntSlider(value=tokens, min=1, max=len(chosen), description="tokens"),
        "forms": widgets.SelectMultiple(options=list(paths), value=tuple(paths), description="depth",
                                        rows=min(len(paths), 4)),
        "axes": widgets.Dropdown(options=list(pairs), value="PC1 · PC2", description="axes"),
    }
    figure = go.Figure()
    for f, name in enumerate(paths):
        times = paths[name][0]
        fine = len(times) > 12  # a fine ODE time grid: draw a curve, mark only integer times
        marker_size = [9 if abs(float(t) - round(float(t))) < 1e-6 else 0 for t in times] if fine else 8
        for k, token in enumerate(chosen):
            figure.add_trace(go.Scatter(
                mode="lines+markers", name=name, legendgroup=name, showlegend=k == 0,
                line={"color": series_colour(f), "dash": "solid" if f % 2 == 0 else "dot"},
                marker={"size": marker_size}, hoverinfo="text",
                text=[f"{name}, token ({token // width}, {token % width}), t = {float(t):g}" for t in times]))
    figure.add_trace(go.Scatter(mode="markers", name="start (t = 0)", marker={"symbol": "circle-open", "size": 13,
                                                                               "color": "black"}))
    figure.update_layout(height=520, width=760, margin={"t": 80},
                         title="token states through depth (markers: after each layer, or at integer t)")

    def redraw(fig: go.Figure, tokens: int, forms: tuple[str, ...], axes: str) -> str:
        a, b = pairs[axes]
        starts = []
        for f, name in enumerate(paths):
            for k, token in enumerate(chosen):
                trace = fig.data[f * len(chosen) + k]
                trace.x = as_array(projected[name][:, token, a])
                trace.y = as_array(projected[name][:, token, b])
                trace.visible = name in forms and k < tokens
                if trace.visible:
                    starts.append((float(trace.x[0]), float(trace.y[0])))
        fig.data[-1].x, fig.data[-1].y = [s[0] for s in starts], [s[1] for s in starts]
        fig.layout.xaxis.title, fig.layout.yaxis.title = f"PC{a + 1}", f"PC{b + 1}"
        ends = {name: projected[name][-1, chosen[:tokens]] for name in forms}
        shown = ", ".join(f"PC{i + 1} {100 * float(r):.0f}%" for i, r in enumerate(explained))
        gaps = [f"{x} ↔ {y}: {float((ends[x] - ends[y]).norm(dim=-1).mean()):.3f}"
                for i, x in enumerate(forms) for y in list(forms)[i + 1:]]
        return (f"variance explained: {shown}. Mean end-point distance in these 3 PCs: "
                + ("; ".join(gaps) if gaps else "pick two forms to compare"))

    return LiveFigure(figure, controls, redraw)


def parameter_widget(rows: list[dict]) -> LiveFigure:
    """Parameter counts from `models.parameter_table` rows as grouped bars: mixer × depth, one preset at a time."""
    presets = list(dict.fromkeys(r["preset"] for r in rows))
    depths = list(dict.fromkeys(r["depth"] for r in rows))
    mixers = list(dict.fromkeys(r["mixer"] for r in rows))
    if not presets:
        raise ValueError("rows must hold at least one row of models.parameter_table")
    controls = {"preset": widgets.Dropdown(options=presets, value=presets[0], description="preset")}
    figure = go.Figure([go.Bar(name=depth, x=mixers, marker_color=series_colour(i), textposition="outside")
                        for i, depth in enumerate(depths)])
    figure.update_layout(barmode="group", height=420, width=820, yaxis_title="parameters", margin={"t": 50},
                         title="parameters per mixer and depth form (label: saving vs sdpa at the same depth)")

    def redraw(fig: go.Figure, preset: str) -> str:
        table = {(r["depth"], r["mixer"]): r for r in rows if r["preset"] == preset}
        for trace, depth in zip(fig.data, depths, strict=True):
            picked = [table.get((depth, m)) for m in mixers]
            trace.y = [r["params"] if r else None for r in picked]
            trace.text = [f"{100 * r['saving_vs_sdpa']:.0f}%" if r else "" for r in picked]
        lines = [f"{d}: sdpa {table[(d, 'sdpa')]['params']:,} → ssog {table[(d, 'ssog')]['params']:,} "
                 f"({100 * table[(d, 'ssog')]['saving_vs_sdpa']:.1f}% fewer)"
                 for d in depths if (d, "sdpa") in table and (d, "ssog") in table]
        return f"<b>{preset}</b>: " + "; ".join(lines)

    return LiveFigure(figure, controls, redraw)
