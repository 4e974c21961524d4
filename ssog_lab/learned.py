"""What a trained model learned: its SSoG mixers, the atoms of a layer (fixed or per token), the untrained twin,
how far the atoms moved (notebook 06 and its exercises; `viz.learned` draws them).

Offsets μ and widths σ are in token units on the model's token grid (image side / patch size), (row, column) in
the last axis; amplitudes α are plain weights. An SSoG model has one mixer per block, or one shared mixer for
looped and ODE depth.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .layers import SSoGMixer
from .models import ViT


def ssog_mixers(model: ViT) -> list[SSoGMixer]:
    """The SSoG mixer of every block (one for looped/ODE depth); ValueError for a model without SSoG."""
    mixers = [block.mixer for block in model.blocks]
    if not all(isinstance(m, SSoGMixer) for m in mixers):
        raise ValueError(f"model must use an SSoG mixer ('ssog' or 'ssog-steered'), got {model.config.mixer!r}")
    return mixers


def _layer_mixer(model: ViT, layer: int) -> SSoGMixer:
    """The SSoG mixer that `layer` applies (the shared one for looped/ODE depth); ValueError for a layer outside
    [0, layers)."""
    mixers = ssog_mixers(model)
    if not 0 <= layer < model.config.layers:
        raise ValueError(f"layer must be in [0, {model.config.layers - 1}], got {layer}")
    return mixers[0 if len(mixers) == 1 else layer]


def token_grid(model: ViT, images: Tensor) -> tuple[int, int]:
    """The token grid (H, W) of images (B, C, H·S, W·S) for the model's patch side S: rows and columns of tokens."""
    p = model.config.patch_size
    return images.shape[-2] // p, images.shape[-1] // p


@torch.no_grad()
def layer_atoms(model: ViT, images: Tensor, layer: int) -> tuple[Tensor, Tensor, Tensor]:
    """Per-token atom parameters of `layer` for images (B, C, H, W):
    mu, sigma (B, heads, N, M, 2) in tokens, amp (B, heads, N, M).

    The mixer sees LN(x_layer), the state entering the layer (for ODE depth: x(t = layer)); a fixed
    mixer's parameters are the same for every token and are broadcast to the per-token shapes.
    """
    mixer = _layer_mixer(model, layer)
    states = model.states(images)  # (L + 1, B, N, C)
    block = model.blocks[layer if model.config.depth == "discrete" else 0]
    mu, sigma, amp = mixer.atom_parameters(block.norm(states[layer]))
    if mu.dim() == 3:  # fixed: (heads, M, 2) -> (B, heads, N, M, 2)
        b, n = images.shape[0], states.shape[2]
        mu, sigma = (t[None, :, None].expand(b, -1, n, -1, -1) for t in (mu, sigma))
        amp = amp[None, :, None].expand(b, -1, n, -1)  # (B, heads, N, M)
    return mu.detach(), sigma.detach(), amp.detach()


def learned_atoms(model: ViT, layer: int) -> tuple[Tensor, Tensor, Tensor]:
    """The unsteered (learned, token-independent) atoms of `layer` in float64:
    mu, sigma (heads, M, 2) in tokens, amp (heads, M)."""
    mu, sigma, amp = _layer_mixer(model, layer).atom_parameters()
    return mu.detach().double(), sigma.detach().double(), amp.detach().double()


def initial_twin(model: ViT, seed: int = 0) -> ViT:
    """The same architecture (`model.config`) built under `torch.manual_seed(seed)` and left untrained: the
    initialization a training run with that seed started from (the train CLI seeds before it builds). The caller's
    random state is left as it was, so re-running a cell that calls this gives the same results."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return ViT(model.config).eval()


def atom_change(model: ViT, initial: ViT) -> list[dict]:
    """Per layer: how far the learned atoms moved from `initial`'s (the untrained twin), and their ranges.

    Rows {layer, mu_moved_max (tokens), mu_init_max, mu_learned_max (max |μ| over both axes, tokens), sigma_init,
    sigma_learned ((min, max) in tokens), amp_init, amp_learned ((min, max)), negative (count of α < 0), total
    (count of α: heads × M)}.
    """
    rows = []
    for layer in range(len(ssog_mixers(model))):
        mu, sigma, amp = learned_atoms(model, layer)
        mu0, sigma0, amp0 = learned_atoms(initial, layer)
        rows.append(dict(layer=layer, mu_moved_max=float((mu - mu0).abs().max()), mu_init_max=float(mu0.abs().max()),
                         mu_learned_max=float(mu.abs().max()),
                         sigma_init=(float(sigma0.min()), float(sigma0.max())),
                         sigma_learned=(float(sigma.min()), float(sigma.max())),
                         amp_init=(float(amp0.min()), float(amp0.max())),
                         amp_learned=(float(amp.min()), float(amp.max())),
                         negative=int((amp < 0).sum()), total=amp.numel()))
    return rows
