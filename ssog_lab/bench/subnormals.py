"""Where a model's activations hold subnormal floats: a census of every module's output, and of the attention
probabilities that SDPA keeps inside its kernel.

Subnormal operands slow matrix products many-fold on some CPUs (Intel's MKL, unless the process flushes them to
zero), so a figure measured on one CPU can fail to hold on another. The SSoG operator cuts its Gaussian tails to
exact zeros (`ssog_lab/ops/reference.py`); this census checks the rest of the model — LayerNorm, GELU, the
linear layers and the baselines' softmax — on real inputs:

    rows = subnormal_census(model, images)     # one row per kind of tensor: entries, subnormal entries
    print(census_markdown(rows))

`python scripts/subnormal_census.py` runs it over the mixers and writes docs/results/subnormals_cpu.md.
"""

from __future__ import annotations

import math
from collections import defaultdict

import torch
from torch import Tensor, nn

from ..layers import AxialSDPAMixer, SDPAMixer, SSoGMixer, _AttentionBase
from .report import markdown_table

MIXER_TYPES = (SSoGMixer, SDPAMixer, AxialSDPAMixer)


def count_subnormal(t: Tensor) -> int:
    """Entries of `t` that are neither zero nor a normal float of its dtype (0 for non-float tensors)."""
    if not t.is_floating_point():
        return 0
    return int(((t != 0) & (t.abs() < torch.finfo(t.dtype).tiny)).sum())


def attention_probabilities(mixer: _AttentionBase, x: Tensor, grid: tuple[int, int]) -> list[Tensor]:
    """The softmax probabilities the attention `mixer` computes on its input x (B, N, C), made explicit:
    one (B, heads, N, N) tensor for dense attention, the two stages' (B, heads·H, W, W) and (B, heads·W, H, H)
    for axial attention (the stage-2 values differ, its probabilities do not: the same q and k)."""
    q, k, _ = mixer._project(x)  # (B, heads, N, d) each
    scale = 1.0 / math.sqrt(q.shape[-1])
    if isinstance(mixer, SDPAMixer):
        return [torch.softmax(q @ k.transpose(-1, -2) * scale, dim=-1)]  # (B, heads, N, N)
    stages = ((stage(q, grid), stage(k, grid)) for stage in (AxialSDPAMixer.col_stage, AxialSDPAMixer.row_stage))
    return [torch.softmax(qq @ kk.transpose(-1, -2) * scale, dim=-1) for qq, kk in stages]


@torch.no_grad()
def subnormal_census(model: nn.Module, images: Tensor) -> list[dict]:
    """Run `model` on `images` and count the subnormal entries of the output of every leaf module and mixer,
    grouped by the module's class, plus the attention probabilities of SDPA and axial mixers ("softmax (inside SDPA)").

    Returns rows {"tensor", "entries", "subnormal", "share"} (share = subnormal / entries), sorted by tensor name.
    """
    entries: dict[str, int] = defaultdict(int)
    subnormal: dict[str, int] = defaultdict(int)

    def record(name: str, t: Tensor) -> None:
        entries[name] += t.numel()
        subnormal[name] += count_subnormal(t)

    def hook(module: nn.Module, inputs: tuple, output) -> None:
        if isinstance(output, Tensor):
            record(type(module).__name__, output)
        if isinstance(module, (SDPAMixer, AxialSDPAMixer)):
            for probabilities in attention_probabilities(module, inputs[0], module_grid[module]):
                record("softmax (inside SDPA)", probabilities)

    module_grid: dict[nn.Module, tuple[int, int]] = {}

    def grid_hook(module: nn.Module, args: tuple, kwargs: dict) -> None:
        module_grid[module] = args[1] if len(args) > 1 else kwargs.get("grid")

    # Leaves (Linear, LayerNorm, GELU, the patch embedding) and the mixers; containers only repeat their outputs.
    counted = [m for m in model.modules() if not any(m.children()) or isinstance(m, MIXER_TYPES)]
    handles = [m.register_forward_hook(hook) for m in counted]
    handles += [m.register_forward_pre_hook(grid_hook, with_kwargs=True) for m in model.modules()
                if isinstance(m, _AttentionBase)]
    try:
        model(images)
    finally:
        for handle in handles:
            handle.remove()
    return [{"tensor": name, "entries": entries[name], "subnormal": subnormal[name],
             "share": subnormal[name] / entries[name]} for name in sorted(entries)]


def census_markdown(rows: list[dict]) -> str:
    """Census rows as a markdown table; a "model" key, when the rows have one, becomes the first column."""
    columns = {"model": "model"} if rows and "model" in rows[0] else {}
    columns |= {"tensor": "tensor", "entries": lambda r: f"{r['entries']:,}",
                "subnormal": lambda r: f"{r['subnormal']:,}", "share": lambda r: f"{r['share']:.1e}"}
    return markdown_table(rows, columns, align="l" * (len(columns) - 3) + "rrr")
