"""Notebook 00: SSoG beside dense attention on a photograph, and a check of the environment."""

from __future__ import annotations

import importlib
import os
import platform

import ipywidgets as widgets
import plotly.graph_objects as go
import torch
import torch.nn.functional as F
from plotly.subplots import make_subplots
from torch import Tensor

from .. import __version__, ops
from ..bench.measure import machine
from ..style import series_colour
from ._base import LiveFigure
from .atoms import KERNEL_PRESETS
from .common import as_array, atoms_from_lists, fast_mode, heatmap, image_axes, photo_grid

_PACKAGES = ("torch", "triton", "torchdiffeq", "numpy", "plotly", "ipywidgets", "skimage", "mlxtend", "jupyterlab")


def environment_report() -> dict[str, str]:
    """What this machine offers the suite: versions, CPU/GPU, and where the Triton kernel can run. The CPU and
    torch's threads are read as a measurement's provenance is (`bench.measure.machine`): the processor decides,
    e.g., how slow subnormal floats are (notebook 02)."""
    host = machine()
    report = {"ssog_lab": __version__, "python": platform.python_version(),
              "platform": f"{platform.system()} {platform.machine()}", "CPU": host["cpu_model"],
              "CPU cores": str(os.cpu_count()), "torch threads": str(host["threads"])}
    for name in _PACKAGES:
        try:
            report[name] = getattr(importlib.import_module(name), "__version__", "installed")
        except ImportError:
            report[name] = "not installed"
    cuda = torch.cuda.is_available()
    report["CUDA GPU"] = torch.cuda.get_device_name(0) if cuda else "none"
    report["Triton on the GPU"] = "yes" if ops.triton_available("cuda") else "no" + ("" if cuda else " (no GPU)")
    interpreter = ops.triton_available("cpu")
    # Off is the normal state: only notebook 08 switches the interpreter on (TRITON_INTERPRET=1 before import).
    report["Triton interpreter on the CPU"] = "on" if interpreter else (
        "off (as expected here; notebook 08 switches it on)" if report["triton"] != "not installed"
        else "unavailable: triton not installed")
    report["fast mode (SSOG_LAB_FAST=1)"] = "on" if fast_mode() else "off"
    return report


def environment_table(report: dict[str, str] | None = None) -> go.Figure:
    """`environment_report()` as a two-column plotly table."""
    report = report or environment_report()
    figure = go.Figure(go.Table(header={"values": ["", "this machine"], "align": "left"},
                                cells={"values": [list(report), list(report.values())], "align": "left"},
                                columnwidth=[0.45, 0.55]))
    # plotly draws 20-pixel rows under a 28-pixel header: the height fits the table, with no empty band below
    figure.update_layout(height=50 + 21 * len(report), width=700, margin={"t": 10, "b": 10, "l": 10, "r": 10})
    return figure


def patch_tokens(image: Tensor, patch: int) -> tuple[Tensor, tuple[int, int]]:
    """Cut a grey image (H, W) into patch×patch tokens, each standardized: (N, patch²) and the token grid."""
    height, width = image.shape[0] // patch, image.shape[1] // patch
    tokens = image[:height * patch, :width * patch].reshape(height, patch, width, patch)  # (h, p, w, p)
    tokens = tokens.permute(0, 2, 1, 3).reshape(height * width, patch * patch)  # (N, p²)
    tokens = (tokens - tokens.mean()) / tokens.std()
    return tokens.float(), (height, width)


def attention_row(tokens: Tensor, query: int, scale: float = 1.0) -> Tensor:
    """Dense attention's weights for one query token with identity projections (q = k = scale · token):
    `scaled_dot_product_attention` applied to identity values returns the row of A = softmax(XW_Q(XW_K)ᵀ/√d), here
    with W_Q = W_K = scale·I. (N,)."""
    n, d = tokens.shape
    q = (scale * tokens[query]).reshape(1, 1, 1, d)  # (B, heads, 1, d)
    k = (scale * tokens).reshape(1, 1, n, d)  # (B, heads, N, d)
    eye = torch.eye(n, dtype=tokens.dtype).reshape(1, 1, n, n)  # values = identity, so the output is the weights
    return F.scaled_dot_product_attention(q, k, eye)[0, 0, 0]  # (N,)


def ssog_vs_attention_widget(name: str = "astronaut", size: int | None = None, patch: int = 4,
                             preset: str = "three atoms") -> LiveFigure:
    """One query token on a photograph: SSoG's kernel row (fixed atoms, `ops.dense_kernel`) beside dense
    attention's (content scores between raw patch tokens). Sliders for the query's row and column.

    size: photo side in pixels (default 128, 64 in fast mode); tokens are patch×patch pixel blocks.
    """
    size = size or (64 if fast_mode() else 128)
    image = photo_grid(name, size)  # (size, size)
    tokens, grid = patch_tokens(image, patch)
    height, width = grid
    mu, sigma, amp = atoms_from_lists(*KERNEL_PRESETS[preset])
    kernel = ops.dense_kernel(mu[None], sigma[None], amp[None], grid)[0]  # (N, N)
    controls = {"row": widgets.IntSlider(value=height // 3, min=0, max=height - 1, description="query row",
                                         continuous_update=False),
                "col": widgets.IntSlider(value=width // 2, min=0, max=width - 1, description="query col",
                                         continuous_update=False)}
    figure = make_subplots(rows=1, cols=3, horizontal_spacing=0.09, subplot_titles=(
        f"photo, {height}×{width} tokens of {patch}×{patch} px", f"SSoG: {preset} (fixed, local)",
        "dense attention (content, global)"))
    figure.add_trace(heatmap(tokens.mean(1).reshape(grid), showscale=False), row=1, col=1)
    # Signed scale for SSoG (an atom set may hold negative amplitudes); each weight panel has its colour bar,
    # placed just right of its own subplot.
    for col, scale in ((2, {"colorscale": "RdBu_r", "zmid": 0.0}), (3, {"colorscale": "Reds"})):
        right = figure.layout[f"xaxis{col}"].domain[1]
        figure.add_trace(heatmap(torch.zeros(grid), colorbar={"x": right + 0.005, "len": 0.8, "thickness": 12,
                                                             "title": "weight"}, **scale), row=1, col=col)
    for col in (1, 2, 3):
        figure.add_trace(go.Scatter(mode="markers", marker={"symbol": "x", "size": 11, "color": series_colour(2),
                                                            "line": {"width": 2}}, showlegend=False), row=1, col=col)
    figure.update_layout(height=380, width=1040, margin={"t": 40, "b": 30})
    image_axes(figure, ticks=True)
    figure.update_xaxes(title_text="column c′ (tokens)")
    figure.update_yaxes(title_text="row r′", col=1)

    def redraw(fig: go.Figure, row: int, col: int) -> str:
        query = row * width + col
        ssog_row = kernel[query]  # (N,)
        attention = attention_row(tokens, query)  # (N,)
        fig.data[1].z = as_array(ssog_row.reshape(grid))
        fig.data[2].z = as_array(attention.reshape(grid))
        for trace in fig.data[3:]:
            trace.x, trace.y = [col], [row]
        far = lambda weights: float(weights.reshape(grid)[  # weight beyond 5 tokens of the query
            (torch.arange(height)[:, None] - row).abs().maximum((torch.arange(width)[None] - col).abs()) > 5].sum())
        return (f"query token ({row}, {col}): weight farther than 5 tokens away — SSoG {far(ssog_row):.3f}, "
                f"attention {far(attention):.3f}")

    return LiveFigure(figure, controls, redraw)
