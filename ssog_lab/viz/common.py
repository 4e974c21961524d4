"""Small pieces every notebook widget shares: fast mode, photographs as token grids, heatmaps."""

from __future__ import annotations

import os

import numpy as np
import plotly.graph_objects as go
import torch
import torch.nn.functional as F
from torch import Tensor

from .. import data, ops


def fast_mode() -> bool:
    """True when SSOG_LAB_FAST=1 (CI): notebooks and widgets shrink their sizes."""
    return os.environ.get("SSOG_LAB_FAST") == "1"


def photo_grid(name: str = "camera", size: int = 64) -> Tensor:
    """A photograph (`ssog_lab.data.photo`) as a grey-level token grid: (size, size) float64 in [0, 1].

    The photo is centre-cropped to a square, turned grey (ITU-R 601 luma) and resized with antialiasing
    to size×size, so each token is one block of pixels of a real image.
    """
    if size < 2:
        raise ValueError(f"size must be ≥ 2 tokens, got {size}")
    rgb = data.photo(name)  # (3, H, W) in [0, 1]
    side = min(rgb.shape[1:])
    top, left = (rgb.shape[1] - side) // 2, (rgb.shape[2] - side) // 2
    square = rgb[:, top:top + side, left:left + side]  # (3, side, side)
    grey = torch.tensordot(torch.tensor([0.299, 0.587, 0.114]), square, dims=1)  # (side, side)
    small = F.interpolate(grey[None, None], size=(size, size), mode="bilinear", antialias=True)  # (1, 1, size, size)
    return small[0, 0].clamp(0, 1).double()


def apply_to_image(image: Tensor, mu: Tensor, sigma: Tensor, amp: Tensor) -> Tensor:
    """Run fixed SSoG with one head on a grey image, each pixel one token with d = 1.

    image (H, W); mu, sigma (M, 2); amp (M,). Returns (H, W).
    """
    height, width = image.shape
    v = image.reshape(1, 1, height * width, 1)  # (B=1, heads=1, N, d=1)
    y = ops.ssog(v, mu[None], sigma[None], amp[None], (height, width), backend="torch")  # (1, 1, N, 1)
    return y.reshape(height, width)


def atoms_from_lists(mu, sigma, amp, dtype: torch.dtype = torch.float64) -> tuple[Tensor, Tensor, Tensor]:
    """Turn plain Python lists (as a learner types them) into one head's atom tensors.

    mu, sigma: M pairs (row, col) or M scalars (same on both axes); amp: M numbers.
    Returns mu (M, 2), sigma (M, 2), amp (M,).
    """
    def pairs(x, name: str) -> Tensor:
        t = torch.as_tensor(x, dtype=dtype)
        if t.dim() == 1:
            t = t[:, None].expand(-1, 2)  # (M,) -> (M, 2): the same value on both axes
        if t.dim() != 2 or t.shape[1] != 2:
            raise ValueError(f"{name} must be a list of M numbers or M (row, col) pairs, got shape {tuple(t.shape)}")
        return t.contiguous()

    mu_t, sigma_t = pairs(mu, "mu"), pairs(sigma, "sigma")
    amp_t = torch.as_tensor(amp, dtype=dtype).reshape(-1)
    if not (len(mu_t) == len(sigma_t) == len(amp_t)):
        raise ValueError(f"mu, sigma and amp must list the same number of atoms, got {len(mu_t)}, "
                         f"{len(sigma_t)}, {len(amp_t)}")
    return mu_t, sigma_t, amp_t


def as_array(values) -> np.ndarray:
    """Tensor or nested list -> float32 numpy array (plotly sends numpy arrays to the browser in binary)."""
    if isinstance(values, Tensor):
        values = values.detach().cpu().numpy()
    return np.asarray(values, dtype=np.float32)


def heatmap(z, colorscale: str = "Greys_r", zmid: float | None = None, **kwargs) -> go.Heatmap:
    """A heatmap trace for a token grid (tensor or array), row 0 at the top (as in an image)."""
    return go.Heatmap(z=as_array(z), colorscale=colorscale, zmid=zmid, **kwargs)


def image_row(images: dict[str, Tensor], signed: bool = False, height: int = 330) -> go.Figure:
    """Grey images (H, W) side by side, titled by their keys; signed=True uses a red–blue scale centred at 0."""
    from plotly.subplots import make_subplots

    figure = make_subplots(rows=1, cols=len(images), subplot_titles=list(images), horizontal_spacing=0.03)
    for col, z in enumerate(images.values(), start=1):
        trace = heatmap(z, colorscale="RdBu_r", zmid=0.0) if signed and col > 1 else \
            heatmap(z, showscale=False)
        figure.add_trace(trace, row=1, col=col)
    image_axes(figure)
    figure.update_layout(height=height, width=300 * len(images) + 60, margin={"t": 40, "b": 10})
    return figure


def image_axes(figure: go.Figure, subplots: list[int] | None = None, ticks: bool = False) -> None:
    """Square pixels, row 0 at the top, for the given subplots (1, 2, …; default all). Tick labels only with
    ticks=True (token grids whose coordinates the text refers to); photographs need none."""
    names = [name for name in figure.layout if name.startswith("yaxis")]
    for name in names:
        index = int(name[5:] or 1)
        if subplots is not None and index not in subplots:
            continue
        suffix = "" if index == 1 else str(index)
        figure.layout[name].update(autorange="reversed", showticklabels=ticks, constrain="domain",
                                   scaleanchor=figure.layout[name].anchor or "x")
        figure.layout["xaxis" + suffix].update(showticklabels=ticks, constrain="domain")
