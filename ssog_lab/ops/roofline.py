"""Roofline model of the Triton SSoG kernels (`ssog_lab.ops.triton_kernel`), with an instruction-issue term.

    roofline(batch, heads, grid, head_dim, atoms, steered=True, dtype_bytes=2) -> Roofline (seconds per resource)
    roofline_rows(sides, batch, heads, head_dim, atoms) -> the fixed forward per grid and dtype (notebook 08)

Five ceilings, each the time one resource alone would need for one call: DRAM bytes, tensor-core FLOPs
(float32 dots as three TF32 products), FP32 vector FLOPs, exponentials on the special-function units, and
*issued instructions*. The last is the one that binds these kernels: every Gaussian weight costs a handful of
instructions (its exponent, the tail select, exp2, the bf16 pack, the row sum; the backward pass adds the five
Jacobian products and sums), each issued once per lane, and an SM issues 4 warp-instructions per clock. The
per-weight counts below are estimates of the kernels' inner loops; the GPU check prints measured time beside
this prediction so that they can be confirmed or refuted.

Stage glossary: stage 1 = column mixing (G_col along each row, parameters [..., 1]); stage 2 = row mixing (G_row
and α along each column, parameters [..., 0]). Weights are built for whole padded tiles: BLOCK_L (the power of
two ≥ the line length, at least 16; 32 for float32 with d > 32) sources for each query, BLOCK_D ≥ d channels in
the dots.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Peaks:
    """Peak rates of a GPU: DRAM bytes/s, dot FLOP/s per input dtype, FP32 FLOP/s, exp/s, lane-instructions/s."""

    name: str
    bandwidth: float  # DRAM bytes per second
    dot_flops: dict  # {"float32": FLOP/s of tl.dot as 3×TF32, "bfloat16": tensor-core FLOP/s}
    fp32_flops: float  # CUDA-core FP32 FLOP/s (an FFMA is 2 FLOPs)
    exps: float  # exponentials per second (special-function units)
    issue: float = 0.0  # lane-instructions per second: warp-instructions/clock/SM × 32 × SMs × clock


# NVIDIA H200 SXM, achievable rates assumed below the data sheet's (not measured by this project; a GPU run
# compares them with its own timings): 4.3 TB/s device-to-device copy (4.8 on the data sheet), 790 TFLOP/s bf16
# (989 data sheet), TF32 half of that and a float32 dot three TF32 products (3×TF32), 67 TFLOP/s FP32; exp: 16
# MUFU ops per clock per SM; issue: 4 warp-instructions per clock per SM; 132 SMs at 1.98 GHz.
_SM_CLOCKS = 132 * 1.98e9
H200 = Peaks("NVIDIA H200 SXM", 4.3e12, {"float32": 790e12 / 2 / 3, "bfloat16": 790e12}, 67e12, 16 * _SM_CLOCKS,
             4 * 32 * _SM_CLOCKS)

# Lane-instructions per Gaussian weight (estimates of the inner loops, to be checked against measurements):
# forward: u, exponent (FMUL, FFMA, FMUL: the reference's (u·s)·(t* + u/2), exact near a tie), tail select
# (FSETP, FSEL), exp2 (MUFU.EX2 plus a 3-instruction subnormal fix-up), bf16 pack, row sum, layout and address
# overhead ≈ 13; backward: the weight again (≈ 10), normalize and α (2), two casts, the Jacobian terms w·g,
# r = w·g − S·w, the padding clamp of u, h = t* + u/2, r·u, r·u·h and three row sums (9) ≈ 30. Float32 adds the
# 3×TF32 operand splits (≈ 4).
# FP32 vector FLOPs per weight (outside the dots): the exponent and the sum; the backward's Jacobian sums.
INSTR_PER_WEIGHT_FWD, INSTR_PER_WEIGHT_BWD, INSTR_PER_WEIGHT_FP32 = 13, 30, 4
_WEIGHT_FLOPS, _GRAD_SUM_FLOPS = 6, 12


@dataclass(frozen=True)
class Roofline:
    """Estimated work of one SSoG call and the time each resource alone would need (seconds)."""

    bytes: float  # compulsory DRAM traffic: every kernel reads its inputs and writes its outputs once
    flops: float  # FLOPs inside tl.dot (2 per multiply-add, padded tiles)
    vector_flops: float  # FP32 FLOPs outside tl.dot
    exps: float  # exponentials (one per weight built)
    instructions: float  # issued lane-instructions (weights × per-weight count)
    t_memory: float  # bytes / bandwidth
    t_dot: float  # dot FLOPs / dot peak of the dtype
    t_fp32: float  # CUDA-core time of the vector FLOPs
    t_exp: float  # exps / exp rate
    t_issue: float = 0.0  # instructions / issue rate

    @property
    def time_s(self) -> float:
        """Lower bound: the busiest resource."""
        return max(self.t_memory, self.t_dot, self.t_fp32, self.t_exp, self.t_issue)

    @property
    def bound(self) -> str:
        """Which resource sets time_s: "memory", "dot", "fp32", "exp" or "issue"."""
        times = {"memory": self.t_memory, "dot": self.t_dot, "fp32": self.t_fp32, "exp": self.t_exp,
                 "issue": self.t_issue}
        return max(times, key=times.get)

    @property
    def intensity(self) -> float:
        """Dot FLOPs per byte of DRAM traffic."""
        return self.flops / self.bytes


def _block(n: int, shortest: int = 16) -> int:
    """The kernels' tile extent for n: the next power of two, at least `shortest`."""
    return max(shortest, 1 << max(0, n - 1).bit_length())


def roofline(batch: int, heads: int, grid: tuple[int, int], head_dim: int, atoms: int, *, steered: bool,
             dtype_bytes: int = 4, backward: bool = False, d_blocks: int = 1, peaks: Peaks = H200,
             stage: int | None = None) -> Roofline:
    """Roofline estimate of the Triton SSoG forward (or backward) pass for the given shapes.

    dtype_bytes: bytes per element of V, Z, Y (4 float32, 2 bfloat16); parameters, normalizers and parameter
    gradients are float32. stage: 1 (column mixing) or 2 (row mixing) for that stage's kernel alone, None for
    both. d_blocks is accepted for compatibility and ignored: the kernels take all of d in one tile, so each
    weight is built once per pass.
    """
    del d_blocks
    if stage not in (None, 1, 2):
        raise ValueError(f"stage must be 1, 2 or None, got {stage!r}")
    height, width = grid
    n, bh, d, m = height * width, batch * heads, head_dim, atoms
    shortest = 32 if dtype_bytes == 4 and _block(d) >= 64 else 16  # as `triton_host.line_blocks`
    params = 4 * (bh * n * m if steered else heads * m)  # one float32 parameter field of one stage
    stats = 4 * bh * n * m  # one float32 per (token, atom): a normalizer or one gradient field
    data = bh * n * d * dtype_bytes  # one (B, heads, N, d) tensor
    # Per stage: the line length (stage 1 = column mixing runs along rows: W; stage 2 along columns: H) and the
    # compulsory bytes. Forward: stage 1 reads V, (μ, σ), writes Z, 1/Σe; stage 2 reads Z, (μ, σ, α), writes Y,
    # 1/Σe. Backward: stage 2 reads dY, Z, 1/Σe, (μ, σ, α), writes dZ and 3 gradient fields; stage 1 reads dZ, V,
    # 1/Σe, (μ, σ), writes dV and 2 fields.
    per_stage = {1: (width, data * (1 + m) + stats + 2 * params, data * (2 + m) + 3 * stats + 2 * params),
                 2: (height, data * (1 + m) + stats + 3 * params, data * (1 + 2 * m) + 4 * stats + 3 * params)}
    stages = (1, 2) if stage is None else (stage,)
    weights = sum(bh * m * n * _block(per_stage[k][0], shortest) for k in stages)  # queries × padded sources
    bytes_ = sum(per_stage[k][2 if backward else 1] for k in stages)
    flops = 2 * weights * _block(d) * (2 if backward else 1)  # e @ x; backward: the adjoint and ⟨dOut, x⟩
    vector = (_WEIGHT_FLOPS + (_GRAD_SUM_FLOPS if backward else 0)) * weights
    per_weight = INSTR_PER_WEIGHT_BWD if backward else INSTR_PER_WEIGHT_FWD
    dtype = "bfloat16" if dtype_bytes == 2 else "float32"
    t_dot = flops / peaks.dot_flops[dtype]
    t_fp32 = vector / peaks.fp32_flops
    instructions = (per_weight + (INSTR_PER_WEIGHT_FP32 if dtype == "float32" else 0)) * weights
    t_issue = instructions / peaks.issue if peaks.issue else 0.0
    return Roofline(bytes_, flops, vector, weights, instructions, bytes_ / peaks.bandwidth, t_dot, t_fp32,
                    weights / peaks.exps, t_issue)


# FlashAttention-2 rates on Hopper, head dim 64, sequence 4k, non-causal (the FA3 paper's H100 SXM5 figures; an
# H200 has the same SMs and clocks): forward and backward FLOP/s.
FLASH_FWD_FLOPS, FLASH_BWD_FLOPS = 321e12, 279e12


def flash_estimate(batch: int, heads: int, tokens: int, head_dim: int, *, backward: bool = False) -> float:
    """Predicted seconds of SDPA flash attention: 4·B·heads·N²·d FLOPs forward, 2.5× that backward."""
    flops = 4 * batch * heads * tokens**2 * head_dim
    return flops * 2.5 / FLASH_BWD_FLOPS if backward else flops / FLASH_FWD_FLOPS


def roofline_rows(sides: tuple[int, ...] = (16, 32, 64), batch: int = 8, heads: int = 6, head_dim: int = 64,
                  atoms: int = 4, peaks: Peaks = H200) -> list[dict]:
    """The fixed forward's estimate (`roofline`, not a measurement) on side×side token grids, float32 and bfloat16:
    one row per side and dtype with side, dtype, bytes (DRAM), flops (dots), intensity (FLOP/byte), bound,
    time_s, and the shapes and the ceilings' name (`peaks`)."""
    rows = []
    for side in sides:
        for dtype_bytes, dtype in ((4, "float32"), (2, "bfloat16")):
            r = roofline(batch, heads, (side, side), head_dim, atoms, steered=False, dtype_bytes=dtype_bytes,
                         peaks=peaks)
            rows.append(dict(side=side, dtype=dtype, bytes=r.bytes, flops=r.flops, intensity=r.intensity,
                             bound=r.bound, time_s=r.time_s, batch=batch, heads=heads, head_dim=head_dim,
                             atoms=atoms, peaks=peaks.name))
    return rows
