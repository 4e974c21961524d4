"""Host side of the Triton SSoG kernels (`ssog_lab.ops.triton_kernel`): tile sizes, autotuning, launching.

Block sizes: BLOCK_L and BLOCK_D follow the shapes (`line_blocks`: the whole line and all d channels in one tile);
BLOCK_I and num_warps are autotuned on a GPU among the configs that fit the line (`gpu_configs`), fixed in the
interpreter (it runs every program in Python). The launchers in `triton_kernel` (`stage_forward`, `stage_backward`,
read in notebook 08 beside the kernels) launch through `_launch` the kernels wrapped by `_tuned`, with the
parameters as `StageParams` views and the values as `values_6d` views. `compiled_variants` lists what a
kernel compiled (registers, spills), for the GPU check.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import torch
import triton
from torch import Tensor

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"

# (BLOCK_I, num_warps) candidates, num_stages=1 (the kernels have no long loop for a pipeline to overlap, and
# deeper stages cost registers). `gpu_configs` keeps at most 3 per shape, all compiling without register spills
# for sm_90 (tests/test_triton.py compiles every one).
_TILE_CONFIGS = ((16, 4), (16, 8), (32, 8), (64, 8))


def line_blocks(length: int, d: int, itemsize: int) -> tuple[int, int]:
    """(BLOCK_L, BLOCK_D): the powers of two ≥ the line length and ≥ d, at least 16 (tl.dot's smallest tile);
    BLOCK_L at least 32 for float32 with d > 32, where 16-long lines make the backward kernel spill registers."""
    block_d = max(16, triton.next_power_of_2(d))
    shortest = 32 if itemsize == 4 and block_d >= 64 else 16
    return max(shortest, triton.next_power_of_2(length)), block_d


def gpu_configs(length: int, d: int, itemsize: int) -> list[tuple[int, int]]:
    """The (BLOCK_I, num_warps) configs the GPU autotuner tries for a line of `length`, head dim d and values of
    `itemsize` bytes: no tile taller than the line (padding rows only waste work); float32 with d > 32 or lines
    of 64×32 (line × channel) elements or more only (16, 8), which holds the 3×TF32 dot operands without
    spilling. Each config is one compilation per kernel variant."""
    block_l, block_d = line_blocks(length, d, itemsize)
    if itemsize == 4 and (block_d >= 64 or block_l * block_d >= 64 * 32):
        return [(16, 8)]
    return [(bi, w) for bi, w in _TILE_CONFIGS if bi <= block_l and (bi, w) != (16, 8)]


def _prune(configs, named_args, **kwargs):
    keep = gpu_configs(named_args["L"], named_args["D"], named_args["x_ptr"].element_size())
    return [c for c in configs if (c.kwargs["BLOCK_I"], c.num_warps) in keep]


def _tuned(kernel, stage_flags: list[str]):
    """The kernel with BLOCK_I autotuned on GPU (pruned by `gpu_configs`) per line length, d, atoms and stage
    (the stage flags are constexprs: the two stages are different programs), as is in the interpreter."""
    if INTERPRET:
        return kernel
    configs = [triton.Config({"BLOCK_I": bi}, num_warps=w, num_stages=1) for bi, w in _TILE_CONFIGS]
    return triton.autotune(configs, key=["L", "D", "M", *stage_flags], prune_configs_by={"early_config_prune": _prune},
                           cache_results=True)(kernel)


_INTERP_BLOCK_I = 16


@dataclass(frozen=True)
class StageParams:
    """One stage's parameters as (B|1, heads, H|1, W|1, M) float32 views: fixed ones broadcast with stride 0
    (made by `triton_kernel.Stage.params`)."""

    mu: Tensor
    sigma: Tensor
    amp: Tensor | None  # None: α = 1 (stage 1)


def _dot_precision(x: Tensor) -> str:
    """tl.dot input precision: float32 as 3×TF32 on the tensor cores (error ~1e-6, where one TF32 pass gives
    ~1e-3 and the exact "ieee" path runs on the FP32 cores and spills registers); half types ignore it."""
    return "tf32x3" if x.dtype == torch.float32 else "tf32"


def _launch(kernel, grid, args: tuple, consts: dict) -> None:
    """Launch on the tensors' device (Triton uses the *current* one); the interpreter gets a fixed BLOCK_I, the
    GPU autotunes it."""
    if INTERPRET:
        consts = {**consts, "BLOCK_I": _INTERP_BLOCK_I}
    with torch.cuda.device(args[0].device) if args[0].is_cuda else contextlib.nullcontext():
        kernel[grid](*args, **consts)


def values_6d(t: Tensor, grid: tuple[int, int]) -> Tensor:
    """(B, heads, N, d) → the (B, heads, H, W, 1, d) view, channel stride 1 (copied only if it is not)."""
    if t.stride(-1) != 1:
        t = t.contiguous()
    return t.unflatten(2, grid).unsqueeze(4)



def compiled_variants(kernel) -> list[dict]:
    """One dict per variant of `kernel` (a launched kernel of `triton_kernel`: autotuned or plain) compiled in this
    process: name, num_warps, registers per thread and spilled bytes as the driver reports them once a variant is
    loaded ("?" where this Triton does not say). Reads Triton's JIT caches, whose layout differs between versions:
    callers treat an exception as "not available"."""
    fn = getattr(kernel, "fn", kernel)  # the autotuner wraps the JIT function
    rows = []
    for device_cache in getattr(fn, "device_caches", {}).values():
        for compiled in device_cache[0].values():  # (kernel cache, …) per device: {specialization key: kernel}
            rows.append(dict(kernel=fn.__name__, warps=getattr(getattr(compiled, "metadata", None), "num_warps", "?"),
                             registers=getattr(compiled, "n_regs", "?"), spills=getattr(compiled, "n_spills", "?")))
    return rows
