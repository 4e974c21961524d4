"""Widgets for notebook 06: what a trained SSoG model's atoms look like, how steering moves them, and
a query token's receptive field (its row of the N×N kernel) on a real digit. What they show is computed in
`ssog_lab.learned` (the mixers, a layer's atoms, the untrained twin, how far the atoms moved).

All positions are in token units on the model's token grid (image side / patch size); a pixel image is
drawn on the same axes, each token covering patch × patch pixels.
"""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from torch import Tensor

from .. import ops
from ..bench.report import markdown_table
from ..learned import layer_atoms, learned_atoms, ssog_mixers, token_grid
from ..style import MIXER_COLOURS, series_colour
from ._base import LiveFigure
from .common import as_array, heatmap, image_axes

STEERED = MIXER_COLOURS["ssog-steered"]  # steering shifts are drawn in the steered mixer's colour


def _ellipse(centre_row: float, centre_col: float, sigma_row: float, sigma_col: float, points: int = 48):
    """The 1σ ellipse of an atom as (x = column, y = row) coordinates."""
    angle = np.linspace(0, 2 * np.pi, points)
    return centre_col + sigma_col * np.cos(angle), centre_row + sigma_row * np.sin(angle)


def _image_trace(image: Tensor, patch: int, **kwargs) -> go.Heatmap:
    """A pixel image (H·S, W·S), S the patch side, drawn in token coordinates: pixel i sits at (i + 0.5) / S − 0.5."""
    return heatmap(image, showscale=False, x0=0.5 / patch - 0.5, dx=1 / patch, y0=0.5 / patch - 0.5,
                   dy=1 / patch, **kwargs)


def _slider(kind, value, low, high, description):
    return kind(value=value, min=low, max=high, description=description, continuous_update=False,
                layout=widgets.Layout(width="250px"), style={"description_width": "70px"})


def token_axes(figure: go.Figure, subplots: tuple[int, ...]) -> None:
    """Integer tick labels (token row / column) on the given image subplots (1, 2, …) of `figure`."""
    for index in subplots:
        suffix = "" if index == 1 else str(index)
        figure.layout["xaxis" + suffix].update(showticklabels=True, dtick=1, title_text="column c′ (tokens)")
        figure.layout["yaxis" + suffix].update(showticklabels=True, dtick=1, title_text="row r′ (tokens)")


def atom_change_markdown(rows: list[dict]) -> str:
    """The rows of `learned.atom_change` as a markdown table (offsets and widths in tokens)."""
    def span(pair: tuple[float, float], digits: int = 2) -> str:
        return f"{pair[0]:.{digits}f} – {pair[1]:.{digits}f}"

    return markdown_table(rows, {
        "layer": "layer", "largest change of an offset μ": lambda r: f"{r['mu_moved_max']:.2f}",
        "max abs(μ): initial → learned": lambda r: f"{r['mu_init_max']:.2f} → {r['mu_learned_max']:.2f}",
        "σ: initial → learned": lambda r: f"{span(r['sigma_init'])} → {span(r['sigma_learned'])}",
        "α: initial → learned": lambda r: f"{span(r['amp_init'], 3)} → {span(r['amp_learned'], 3)}",
        "α < 0": lambda r: f"{r['negative']} of {r['total']}"}, align="rrrrrr")


def atom_change_figure(model, initial) -> go.Figure:
    """Learned against initial value of every atom parameter (all layers and heads): offsets μ, widths σ and
    amplitudes α, one panel each, with the line y = x (an atom on it did not move)."""
    figure = make_subplots(rows=1, cols=3, horizontal_spacing=0.08,
                           subplot_titles=("offsets μ (tokens)", "widths σ (tokens)", "amplitudes α"))
    for layer in range(len(ssog_mixers(model))):
        learned, start = learned_atoms(model, layer), learned_atoms(initial, layer)
        for col, (now, before) in enumerate(zip(learned, start, strict=True), start=1):
            figure.add_trace(go.Scatter(x=as_array(before.flatten()), y=as_array(now.flatten()), mode="markers",
                                        name=f"layer {layer}", legendgroup=str(layer), showlegend=col == 1,
                                        marker={"color": series_colour(layer), "size": 5, "opacity": 0.7}),
                             row=1, col=col)
    for col in (1, 2, 3):
        xs = [v for trace in figure.data if trace.xaxis == ("x" if col == 1 else f"x{col}") for v in trace.x]
        low, high = float(min(xs)), float(max(xs))
        figure.add_trace(go.Scatter(x=[low, high], y=[low, high], mode="lines", showlegend=col == 1,
                                    name="y = x (unchanged)", line={"color": "grey", "dash": "dot"}), row=1, col=col)
        figure.update_xaxes(title_text="at initialization", row=1, col=col)
        figure.update_yaxes(title_text="after training", row=1, col=col)
    figure.update_layout(height=380, width=1000, margin={"t": 40}, legend={"orientation": "h", "y": -0.25})
    return figure


def atoms_widget(model, query: tuple[int, int] | None = None) -> LiveFigure:
    """The learned (unsteered) atoms of one layer and head, drawn around a query token of the build grid.

    Each atom m is a 1σ ellipse centred at query + μ_m (rows down, columns right), coloured by atom,
    solid for α > 0 and dashed for α < 0, line width growing with |α|. Right: every head's atom centres
    of the chosen layer (marker size ∝ |α|), so the spread of offsets over heads is visible at once.
    """
    mixers = ssog_mixers(model)
    side = model.config.image_size // model.config.patch_size
    query = query or (side // 2, side // 2)
    heads, atoms = mixers[0].heads, mixers[0].atoms
    controls = {"layer": _slider(widgets.IntSlider, 0, 0, len(mixers) - 1, "layer"),
                "head": _slider(widgets.IntSlider, 0, 0, heads - 1, "head")}
    figure = make_subplots(rows=1, cols=2, horizontal_spacing=0.08,
                           subplot_titles=("atoms of one head (1σ ellipses)", "all heads: atom centres μ"))
    for m in range(atoms):
        figure.add_trace(go.Scatter(mode="lines", name=f"atom {m + 1}", fill="toself", opacity=0.8,
                                    line={"color": series_colour(m)}), row=1, col=1)
    figure.add_trace(go.Scatter(x=[query[1]], y=[query[0]], mode="markers", name="query token",
                                marker={"symbol": "x", "size": 12, "color": "black"}), row=1, col=1)
    figure.add_trace(go.Scatter(mode="markers", name="centres, all heads", showlegend=False,
                                marker={"color": "#888", "opacity": 0.6}), row=1, col=2)
    figure.add_trace(go.Scatter(mode="markers", name="chosen head", showlegend=False,
                                marker={"color": "black", "symbol": "diamond"}), row=1, col=2)
    figure.update_xaxes(range=[-0.5, side - 0.5], title_text="column (tokens)", row=1, col=1)
    figure.update_yaxes(range=[side - 0.5, -0.5], title_text="row (tokens)", scaleanchor="x", row=1, col=1)
    figure.update_xaxes(title_text="μ_col (tokens)", zeroline=True, row=1, col=2)
    figure.update_yaxes(title_text="μ_row (tokens)", autorange="reversed", zeroline=True, row=1, col=2)
    figure.update_layout(height=470, width=960, margin={"t": 40})

    def redraw(fig: go.Figure, layer: int, head: int) -> str:
        mu, sigma, amp = learned_atoms(model, layer)  # (heads, M, 2), (heads, M, 2), (heads, M)
        scale = float(amp.abs().max()) or 1.0
        lines = []
        for m in range(atoms):
            x, y = _ellipse(query[0] + float(mu[head, m, 0]), query[1] + float(mu[head, m, 1]),
                            float(sigma[head, m, 0]), float(sigma[head, m, 1]))
            trace = fig.data[m]
            trace.x, trace.y = as_array(x), as_array(y)
            trace.line = {"color": series_colour(m), "dash": "solid" if amp[head, m] >= 0 else
                          "dash", "width": 1 + 4 * abs(float(amp[head, m])) / scale}
            lines.append(f"atom {m + 1}: μ = ({mu[head, m, 0]:+.2f}, {mu[head, m, 1]:+.2f}), "
                         f"σ = ({sigma[head, m, 0]:.2f}, {sigma[head, m, 1]:.2f}), α = {amp[head, m]:+.3f}")
        sizes = as_array(6 + 18 * amp.abs() / scale)  # (heads, M)
        fig.data[-2].x, fig.data[-2].y = as_array(mu[..., 1].flatten()), as_array(mu[..., 0].flatten())
        fig.data[-2].marker.size = sizes.flatten()
        fig.data[-1].x, fig.data[-1].y = as_array(mu[head, :, 1]), as_array(mu[head, :, 0])
        fig.data[-1].marker.size = sizes[head]
        return f"<b>layer {layer}, head {head}</b> (offsets, widths in tokens, (row, col)):<br>" + "<br>".join(lines)

    return LiveFigure(figure, controls, redraw)


def steering_widget(model, images: Tensor) -> LiveFigure:
    """How steering moves one atom on real images: per token, a segment from the unsteered centre
    (token + μ) to the steered one (token + μ(x_token)), over the image; right: the steered width
    relative to the unsteered one, log₂(σ(x)/σ), mean over the two axes, per token.

    images: (B, C, H, W) normalized as the model was trained. Controls: image, layer, head, atom.
    """
    mixers = ssog_mixers(model)
    grid = token_grid(model, images)
    patch = model.config.patch_size
    controls = {"image": _slider(widgets.IntSlider, 0, 0, images.shape[0] - 1, "image"),
                "layer": _slider(widgets.IntSlider, 0, 0, model.config.layers - 1, "layer"),
                "head": _slider(widgets.IntSlider, 0, 0, mixers[0].heads - 1, "head"),
                "atom": _slider(widgets.IntSlider, 0, 0, mixers[0].atoms - 1, "atom")}
    figure = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                           subplot_titles=("centre shift per token: unsteered → steered ●",
                                           "width change log₂(σ(x) / σ)"))
    figure.add_trace(_image_trace(images[0, 0], patch, zmin=float(images.min()), zmax=float(images.max()),
                                  opacity=0.55), row=1, col=1)
    figure.add_trace(go.Scatter(mode="lines", line={"color": STEERED, "width": 1.5}, name="shift"), row=1, col=1)
    figure.add_trace(go.Scatter(mode="markers", marker={"color": STEERED, "size": 5}, name="steered centre"),
                     row=1, col=1)
    figure.add_trace(heatmap(np.zeros(grid), colorscale="RdBu_r", zmid=0.0, colorbar={"x": 1.02}), row=1, col=2)
    figure.update_xaxes(range=[-3.5, grid[1] + 2.5], row=1, col=1)
    figure.update_yaxes(range=[grid[0] + 2.5, -3.5], scaleanchor="x", row=1, col=1)
    image_axes(figure, subplots=[2])
    token_axes(figure, (2,))
    figure.update_xaxes(title_text="column (tokens)", row=1, col=1)
    figure.update_yaxes(title_text="row (tokens)", row=1, col=1)
    figure.update_xaxes(title_text="query column c (tokens)", row=1, col=2)  # one cell per query token
    figure.update_yaxes(title_text="query row r (tokens)", row=1, col=2)
    figure.data[3].colorbar.title = "log₂ σ(x)/σ"
    figure.update_layout(height=470, width=960, margin={"t": 40}, showlegend=False)
    cache: dict[tuple[int, int], tuple[Tensor, Tensor, Tensor]] = {}
    rows, cols = torch.meshgrid(torch.arange(grid[0]), torch.arange(grid[1]), indexing="ij")
    position = torch.stack([rows.flatten(), cols.flatten()], -1).double()  # (N, 2): (row, col) of each token

    def redraw(fig: go.Figure, image: int, layer: int, head: int, atom: int) -> str:
        if (image, layer) not in cache:
            cache[(image, layer)] = layer_atoms(model, images[image:image + 1], layer)
        mu, sigma, amp = (t[0, head, :, atom].double() for t in cache[(image, layer)])  # (N, 2), (N, 2), (N,)
        base_mu, base_sigma, base_amp = (t[head, atom] for t in learned_atoms(model, layer))  # (2,), (2,), ()
        start, end = position + base_mu, position + mu  # (N, 2) in (row, col)
        segments_x = np.stack([start[:, 1], end[:, 1], np.full(len(start), np.nan)], 1).flatten()
        segments_y = np.stack([start[:, 0], end[:, 0], np.full(len(start), np.nan)], 1).flatten()
        fig.data[0].z = as_array(images[image, 0])
        fig.data[1].x, fig.data[1].y = segments_x, segments_y
        fig.data[2].x, fig.data[2].y = as_array(end[:, 1]), as_array(end[:, 0])
        width_change = torch.log2(sigma / base_sigma).mean(-1).reshape(grid)  # (H, W)
        fig.data[3].z = as_array(width_change)
        shift = (mu - base_mu).norm(dim=-1)  # (N,)
        return (f"image {image}, layer {layer}, head {head}, atom {atom}: unsteered μ = ({base_mu[0]:+.2f}, "
                f"{base_mu[1]:+.2f}), σ = ({base_sigma[0]:.2f}, {base_sigma[1]:.2f}), α = {base_amp:+.3f}. "
                f"Steering shifts the centre by {shift.mean():.2f} tokens on average (max {shift.max():.2f}), "
                f"scales σ by 2^[{width_change.min():+.2f}, {width_change.max():+.2f}], "
                f"α ranges over [{amp.min():+.3f}, {amp.max():+.3f}]")

    return LiveFigure(figure, controls, redraw)


def receptive_field_widget(model, images: Tensor, query: tuple[int, int] | None = None) -> LiveFigure:
    """A query token's row of the N×N kernel (`ops.dense_kernel`) with the steered parameters of the
    chosen image, layer and head, beside the same row with steering switched off (the learned fixed atoms).

    Controls: image, layer, head, query row and column. Left: the image with the query marked.
    """
    mixers = ssog_mixers(model)
    grid = token_grid(model, images)
    patch = model.config.patch_size
    query = query or (grid[0] // 2, grid[1] // 2)
    controls = {"image": _slider(widgets.IntSlider, 0, 0, images.shape[0] - 1, "image"),
                "layer": _slider(widgets.IntSlider, 0, 0, model.config.layers - 1, "layer"),
                "head": _slider(widgets.IntSlider, 0, 0, mixers[0].heads - 1, "head"),
                "row": _slider(widgets.IntSlider, query[0], 0, grid[0] - 1, "query row"),
                "col": _slider(widgets.IntSlider, query[1], 0, grid[1] - 1, "query col")}
    figure = make_subplots(rows=1, cols=3, horizontal_spacing=0.06,
                           subplot_titles=("image and query token", "kernel row, steered", "kernel row, unsteered"))
    figure.add_trace(_image_trace(images[0, 0], patch), row=1, col=1)
    for col in (2, 3):  # one colour axis for both rows, so equal colours mean equal weights
        figure.add_trace(heatmap(np.zeros(grid), coloraxis="coloraxis"), row=1, col=col)
    for col in (1, 2, 3):  # gold with a black rim: visible on the black background and on the kernel
        figure.add_trace(go.Scatter(mode="markers", marker={"symbol": "x", "size": 13, "color": "gold",
                                                            "line": {"color": "black", "width": 1}}), row=1, col=col)
    figure.update_layout(height=380, width=1050, margin={"t": 40}, showlegend=False,
                         coloraxis={"colorscale": "RdBu_r", "cmid": 0.0, "colorbar": {"title": "K"}})
    image_axes(figure)
    token_axes(figure, (2, 3))
    n = grid[0] * grid[1]

    def redraw(fig: go.Figure, image: int, layer: int, head: int, row: int, col: int) -> str:
        mu, sigma, amp = (t[:, head:head + 1].double() for t in layer_atoms(model, images[image:image + 1], layer))
        steered = ops.dense_kernel(mu, sigma, amp, grid)[0, 0]  # (N, N)
        fixed_mu, fixed_sigma, fixed_amp = (t[head:head + 1] for t in learned_atoms(model, layer))
        fixed = ops.dense_kernel(fixed_mu, fixed_sigma, fixed_amp, grid)[0]  # (N, N)
        query_index = row * grid[1] + col
        steered_row = steered[query_index].reshape(grid)  # (H, W): weight on each token
        fixed_row = fixed[query_index].reshape(grid)
        fig.data[0].z = as_array(images[image, 0])
        fig.data[1].z, fig.data[2].z = as_array(steered_row), as_array(fixed_row)
        for trace in fig.data[3:]:
            trace.x, trace.y = [col], [row]
        peak = int(steered_row.abs().argmax())
        change = float((steered_row - fixed_row).abs().sum() / fixed_row.abs().sum().clamp_min(1e-12))
        return (f"query ({row}, {col}) of {grid[0]}×{grid[1]} tokens ({n} in all): Σ weights = "
                f"{steered_row.sum():.3f} steered, {fixed_row.sum():.3f} unsteered; largest |weight| at "
                f"({peak // grid[1]}, {peak % grid[1]}); steering changes the row by {100 * change:.0f}% (ℓ₁)")

    return LiveFigure(figure, controls, redraw)
