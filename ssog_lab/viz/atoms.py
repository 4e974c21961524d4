"""Widgets for notebook 01: Gaussian atoms in 1-D, one query token's 2-D kernel, SSoG on a photograph."""

from __future__ import annotations

import ipywidgets as widgets
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from .. import ops
from ..style import series_colour
from ._base import LiveFigure
from .common import (
    apply_to_image,
    as_array,
    atoms_from_lists,
    heatmap,
    image_axes,
    image_row,
    photo_grid,
)

# Named atom sets (mu, sigma as (row, col) pairs in tokens; amp) for the 2-D kernel widget.
KERNEL_PRESETS: dict[str, tuple[list, list, list]] = {
    "one round atom": ([(0, 0)], [(2, 2)], [1.0]),
    "one elongated, offset atom": ([(0, 4)], [(1, 4)], [1.0]),
    "three atoms": ([(0, 0), (-4, 3), (5, -5)], [(1, 1), (2, 3), (3, 1.5)], [0.6, 0.3, 0.1]),
    "centre–surround (α: +1, −1)": ([(0, 0), (0, 0)], [(1, 1), (3, 3)], [1.0, -1.0]),
}



def _slider(kind, value, low, high, step, description):
    return kind(value=value, min=low, max=high, step=step, description=description, continuous_update=True,
                layout=widgets.Layout(width="260px"), style={"description_width": "60px"})


def gaussian_1d_widget(length: int = 32, atoms: tuple[tuple[float, float, float], ...] = (
        (0.0, 1.5, 1.0), (5.0, 3.0, 0.5), (-8.0, 0.8, -0.3)), query: int = 14) -> LiveFigure:
    """1-D atoms on an axis of `length` tokens: sliders for the query position and each atom's μ, σ, α.

    atoms: initial (μ, σ, α) per atom. Top panel: each atom's logit −(j − i − μ)²/(2σ²); bottom panel:
    its softmax g(i → j; μ, σ) (via `ops.axis_weights`) scaled by α, i.e. α·g, and their sum — one row of
    the 1-D kernel. The readout shows that every atom's weights sum to 1, whatever μ and σ.
    """
    if length < 2 or not atoms:
        raise ValueError(f"length must be ≥ 2 and atoms non-empty, got length={length}, atoms={atoms!r}")
    controls: dict[str, widgets.ValueWidget] = {
        "query": _slider(widgets.IntSlider, query, 0, length - 1, 1, "query i")}
    for m, (mu, sigma, amp) in enumerate(atoms, start=1):
        controls[f"mu{m}"] = _slider(widgets.FloatSlider, mu, -length, length, 0.5, f"μ{m}")
        controls[f"sigma{m}"] = _slider(widgets.FloatSlider, sigma, 0.2, length / 2, 0.1, f"σ{m}")
        controls[f"amp{m}"] = _slider(widgets.FloatSlider, amp, -1.5, 1.5, 0.05, f"α{m}")

    figure = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                           subplot_titles=("logit −(j − i − μ)² / (2σ²)", "weights α·g(i → j) and their sum"))
    positions = list(range(length))
    for m in range(1, len(atoms) + 1):
        colour = series_colour(m - 1)
        figure.add_trace(go.Scatter(x=positions, name=f"logit, atom {m}", line={"color": colour}), row=1, col=1)
        figure.add_trace(go.Bar(x=positions, name=f"α{m}·g, atom {m}", marker_color=colour, opacity=0.55),
                         row=2, col=1)
    figure.add_trace(go.Scatter(x=positions, name="Σ α·g (kernel row)", mode="lines+markers",
                                line={"color": "black", "width": 3}), row=2, col=1)
    figure.update_layout(height=520, barmode="overlay", margin={"t": 40, "b": 40},
                         legend={"orientation": "h", "y": -0.12})
    figure.update_xaxes(title_text="position j (tokens)", row=2, col=1)
    figure.update_yaxes(range=[-12, 0.5], title_text="logit ℓ_j", row=1, col=1)
    figure.update_yaxes(title_text="weight", row=2, col=1)

    def redraw(fig: go.Figure, query: int, **params: float) -> str:
        i = torch.tensor(float(query), dtype=torch.float64)
        total = torch.zeros(length, dtype=torch.float64)
        lines = []
        for m in range(1, len(atoms) + 1):
            mu = torch.tensor(params[f"mu{m}"], dtype=torch.float64)
            sigma = torch.tensor(params[f"sigma{m}"], dtype=torch.float64)
            amp = params[f"amp{m}"]
            j = torch.arange(length, dtype=torch.float64)
            logit = -((j - i - mu) ** 2) / (2 * sigma ** 2)  # the quadratic logit of the softmax below
            weights = ops.axis_weights(i, mu, sigma, length)  # (L,): softmax over j
            total += amp * weights
            fig.data[2 * (m - 1)].y = as_array(logit)
            fig.data[2 * (m - 1) + 1].y = as_array(amp * weights)
            lines.append(f"atom {m}: centre i+μ = {query + params[f'mu{m}']:.1f}, Σ_j g = {weights.sum():.4f}")
        fig.data[-1].y = as_array(total)
        amp_sum = sum(params[f"amp{m}"] for m in range(1, len(atoms) + 1))
        return "<br>".join(lines) + f"<br><b>Σ_j Σ_m α_m g_m = {total.sum():.4f} = Σ_m α_m = {amp_sum:.4f}</b>"

    return LiveFigure(figure, controls, redraw)


def query_kernel_widget(grid: tuple[int, int] = (24, 24), preset: str = "three atoms",
                        presets: dict[str, tuple[list, list, list]] | None = None) -> LiveFigure:
    """One query token's row of the N×N SSoG kernel (`ops.dense_kernel`) as a heatmap over the grid.

    Controls: the query's row and column, and a named atom set (`KERNEL_PRESETS` by default).
    Near the border the Gaussians are renormalized over the positions that exist, so each atom's
    weights still sum to 1 (the readout shows the total, Σα).
    """
    presets = presets or KERNEL_PRESETS
    if preset not in presets:
        raise ValueError(f"preset must be one of {list(presets)}, got {preset!r}")
    height, width = grid
    kernels = {}
    for name, (mu, sigma, amp) in presets.items():
        mu_t, sigma_t, amp_t = atoms_from_lists(mu, sigma, amp)
        kernels[name] = (ops.dense_kernel(mu_t[None], sigma_t[None], amp_t[None], grid)[0], amp_t)  # (N, N)
    controls = {
        "row": _slider(widgets.IntSlider, height // 2, 0, height - 1, 1, "row r"),
        "col": _slider(widgets.IntSlider, width // 2, 0, width - 1, 1, "col c"),
        "preset": widgets.Dropdown(options=list(presets), value=preset, description="atoms",
                                   layout=widgets.Layout(width="340px")),
    }
    figure = go.Figure([heatmap([[0.0]], colorscale="RdBu_r", zmid=0.0, colorbar={"title": "K"}),
                        go.Scatter(mode="markers", marker={"symbol": "x", "size": 12, "color": "black"},
                                   name="query token")])
    figure.update_layout(height=480, width=560, margin={"t": 40}, showlegend=False,
                         title="row of K for the query token (x): weight on each token (r′, c′)",
                         xaxis_title="column c′", yaxis_title="row r′")
    image_axes(figure, ticks=True)

    def redraw(fig: go.Figure, row: int, col: int, preset: str) -> str:
        kernel, amp = kernels[preset]
        weights = kernel[row * width + col].reshape(height, width)  # (H, W): K[(r,c), (r',c')]
        peak = int(weights.abs().argmax())
        fig.data[0].z = as_array(weights)
        fig.data[1].x, fig.data[1].y = [col], [row]
        return (f"query (r, c) = ({row}, {col}); Σ weights = {weights.sum():.4f} (Σα = {amp.sum():.4f}); "
                f"largest |weight| {weights.abs().max():.4f} at (r′, c′) = ({peak // width}, {peak % width})")

    return LiveFigure(figure, controls, redraw)


def photo_widget(name: str = "camera", size: int = 128) -> LiveFigure:
    """One Gaussian atom applied to a photograph (each pixel a token, d = 1): input beside output.

    Controls: the atom's widths σ_row, σ_col and offsets μ_row, μ_col (tokens). σ blurs (anisotropically
    when they differ), μ shifts: output token (r, c) gathers around (r + μ_row, c + μ_col).
    """
    image = photo_grid(name, size)  # (size, size)
    controls = {
        "sigma_row": _slider(widgets.FloatSlider, 2.0, 0.2, 12.0, 0.1, "σ row"),
        "sigma_col": _slider(widgets.FloatSlider, 2.0, 0.2, 12.0, 0.1, "σ col"),
        "mu_row": _slider(widgets.FloatSlider, 0.0, -size / 4, size / 4, 0.5, "μ row"),
        "mu_col": _slider(widgets.FloatSlider, 0.0, -size / 4, size / 4, 0.5, "μ col"),
    }
    figure = make_subplots(rows=1, cols=2, subplot_titles=(f"input: skimage.data.{name}, {size}×{size} tokens",
                                                           "output of one atom"), horizontal_spacing=0.04)
    figure.add_trace(heatmap(image, showscale=False, zmin=0, zmax=1), row=1, col=1)
    figure.add_trace(heatmap(image, showscale=False, zmin=0, zmax=1), row=1, col=2)
    figure.update_layout(height=430, width=820, margin={"t": 40, "b": 10})
    image_axes(figure)

    def redraw(fig: go.Figure, sigma_row: float, sigma_col: float, mu_row: float, mu_col: float) -> str:
        mu = torch.tensor([[mu_row, mu_col]], dtype=torch.float64)  # (M=1, 2)
        sigma = torch.tensor([[sigma_row, sigma_col]], dtype=torch.float64)
        out = apply_to_image(image, mu, sigma, torch.ones(1, dtype=torch.float64))  # (size, size)
        fig.data[1].z = as_array(out)
        return (f"grey levels: input in [{image.min():.3f}, {image.max():.3f}], output in [{out.min():.3f}, "
                f"{out.max():.3f}]: each output token is a weighted average (weights ≥ 0 summing to 1)")

    return LiveFigure(figure, controls, redraw)


def edge_response(mu, sigma, amp, name: str = "camera", size: int = 128) -> go.Figure:
    """A learner's atoms (lists, as in `atoms_from_lists`) applied to a photograph: input and response."""
    image = photo_grid(name, size)
    out = apply_to_image(image, *atoms_from_lists(mu, sigma, amp))
    return image_row({"input": image, "response of your atoms (red > 0, blue < 0)": out}, signed=True, height=400)
