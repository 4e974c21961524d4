"""GPU check of the Triton SSoG kernels: correctness against the torch reference, operator timings, roofline.

    python scripts/gpu_check.py --out docs/results/gpu        (scripts/gpu_check.sh runs this, then the model bench)

1. Correctness: forward and the four gradients (v, μ, σ, α) of `ops.ssog(..., backend="triton")` against the
   float64 torch reference on realistic shapes, fixed and steered, float32 (to 1e-4) and bfloat16 (to 2e-2),
   each error scaled by the largest reference value of its tensor.
2. Timing: forward and forward+backward of the operator — Triton, torch reference, and SDPA on the same
   (B, heads, N, d) (flash for bfloat16; memory-efficient for float32, which flash does not take) — with the
   roofline estimate of `ssog_lab.ops.triton_kernel.roofline` and the ratio measured / estimate.
Writes OUT/operator.md and OUT/operator.csv; exits 1 if a correctness check fails (after writing).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import platform
import shlex
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from ssog_lab import ops
from ssog_lab.bench import cuda_time_ms
from ssog_lab.ops import triton_kernel as tk
from ssog_lab.ops.reference import ssog_reference

DEVICE = "cuda"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
TOLERANCE = {"float32": 1e-4, "bfloat16": 2e-2}


def make_inputs(batch: int, heads: int, grid: tuple[int, int], d: int, atoms: int, steered: bool,
                dtype: torch.dtype, seed: int = 0) -> list[torch.Tensor]:
    """(v, mu, sigma, amp) on DEVICE: offsets spread over ±3 tokens, widths 0.4…3 tokens, amplitudes ~N(0, 1)."""
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    n = grid[0] * grid[1]
    shape = (batch, heads, n, atoms) if steered else (heads, atoms)
    v = torch.randn(batch, heads, n, d, device=DEVICE, generator=gen)
    mu = torch.randn(*shape, 2, device=DEVICE, generator=gen) * 3
    sigma = torch.rand(*shape, 2, device=DEVICE, generator=gen) * 2.6 + 0.4
    amp = torch.randn(*shape, device=DEVICE, generator=gen)
    return [t.to(dtype) for t in (v, mu, sigma, amp)]


def forward_backward(fn, inputs: list[torch.Tensor], dy: torch.Tensor):
    leaves = [t.detach().requires_grad_() for t in inputs]
    y = fn(*leaves)
    y.backward(dy.to(y.dtype))
    return y.detach(), [t.grad for t in leaves]


def scaled_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """max |a − e| / max |e| (0 when both vanish)."""
    scale = expected.abs().max().item()
    err = (actual.double() - expected).abs().max().item()
    return err / scale if scale > 0 else err


def check_case(batch, heads, grid, d, atoms, steered, dtype_name) -> dict:
    dtype = DTYPES[dtype_name]
    inputs = make_inputs(batch, heads, grid, d, atoms, steered, dtype)
    dy = torch.randn(batch, heads, grid[0] * grid[1], d, device=DEVICE)
    y, grads = forward_backward(lambda *t: ops.ssog(*t, grid, backend="triton"), inputs, dy)
    y_ref, grads_ref = forward_backward(lambda *t: ssog_reference(*t, grid, dense=False),
                                        [t.double() for t in inputs], dy.double())
    errors = {"y": scaled_error(y, y_ref)}
    errors.update({f"d{name}": scaled_error(g, g_ref)
                   for name, g, g_ref in zip(("v", "mu", "sigma", "amp"), grads, grads_ref, strict=True)})
    worst = max(errors.values())
    return {"grid": f"{grid[0]}x{grid[1]}", "heads": heads, "kind": "steered" if steered else "fixed",
            "dtype": dtype_name, **{k: f"{e:.2e}" for k, e in errors.items()}, "worst": worst,
            "ok": worst <= TOLERANCE[dtype_name]}


def timed_pair(fn, inputs: list[torch.Tensor], dy: torch.Tensor) -> tuple[float, float]:
    """(forward ms, forward+backward ms) of fn on leaves that require grad."""
    leaves = [t.detach().requires_grad_() for t in inputs]
    with torch.no_grad():
        fwd = cuda_time_ms(lambda: fn(*leaves))

    def step():
        for t in leaves:
            t.grad = None
        fn(*leaves).backward(dy)

    return fwd, cuda_time_ms(step)


def time_case(batch, heads, grid, d, atoms, steered, dtype_name) -> dict:
    dtype = DTYPES[dtype_name]
    n = grid[0] * grid[1]
    inputs = make_inputs(batch, heads, grid, d, atoms, steered, dtype)
    dy = torch.randn(batch, heads, n, d, device=DEVICE, dtype=dtype)
    tri = timed_pair(lambda *t: ops.ssog(*t, grid, backend="triton"), inputs, dy)
    ref = timed_pair(lambda *t: ssog_reference(*t, grid), inputs, dy)
    backend = SDPBackend.FLASH_ATTENTION if dtype == torch.bfloat16 else SDPBackend.EFFICIENT_ATTENTION
    qkv = [torch.randn(batch, heads, n, d, device=DEVICE, dtype=dtype) for _ in range(3)]
    with sdpa_kernel(backend):
        sdpa = timed_pair(F.scaled_dot_product_attention, qkv, dy)
    size = torch.finfo(dtype).bits // 8
    est_f = tk.roofline(batch, heads, grid, d, atoms, steered=steered, dtype_bytes=size)
    est_b = tk.roofline(batch, heads, grid, d, atoms, steered=steered, dtype_bytes=size, backward=True)
    est_fb = est_f.time_s + est_b.time_s
    return {"grid": f"{grid[0]}x{grid[1]}", "tokens": n, "heads": heads, "kind": "steered" if steered else "fixed",
            "dtype": dtype_name, "triton_fwd_ms": tri[0], "triton_fwdbwd_ms": tri[1],
            "torch_fwd_ms": ref[0], "torch_fwdbwd_ms": ref[1],
            "sdpa": "flash" if backend == SDPBackend.FLASH_ATTENTION else "efficient",
            "sdpa_fwd_ms": sdpa[0], "sdpa_fwdbwd_ms": sdpa[1],
            "roofline_fwd_ms": est_f.time_s * 1e3, "roofline_fwdbwd_ms": est_fb * 1e3,
            "roofline_bound": est_f.bound, "fwd_vs_roofline": tri[0] / (est_f.time_s * 1e3),
            "fwdbwd_vs_roofline": tri[1] / (est_fb * 1e3)}


def versions() -> str:
    import triton

    return (f"torch {torch.__version__}, triton {triton.__version__}, CUDA {torch.version.cuda}, "
            f"Python {platform.python_version()}")


def markdown_table(rows: list[dict], columns: list[str]) -> list[str]:
    fmt = lambda x: f"{x:.4g}" if isinstance(x, float) else str(x)
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns),
            *("| " + " | ".join(fmt(r[c]) for c in columns) + " |" for r in rows)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="docs/results/gpu", help="directory for operator.md and operator.csv")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--heads", type=int, nargs="+", default=[3, 6, 12])
    parser.add_argument("--grids", type=int, nargs="+", default=[14, 24, 32, 48, 64], help="square grid sides")
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--atoms", type=int, default=4)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("gpu_check: needs a CUDA GPU (none here); nothing measured", file=sys.stderr)
        return 2
    command = "python scripts/gpu_check.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    b, d, m = args.batch, args.head_dim, args.atoms

    checks = []  # the smallest and largest grids, a non-square one, few and many heads
    for grid in ((14, 14), (24, 40), (64, 64)):
        for heads in (min(args.heads), max(args.heads)):
            for steered in (False, True):
                for dtype_name in DTYPES:
                    checks.append(check_case(b, heads, grid, d, m, steered, dtype_name))
                    print("check", {k: v for k, v in checks[-1].items() if k != "worst"}, flush=True)
                    torch.cuda.empty_cache()

    timings = []
    for side in args.grids:
        for heads in args.heads:
            for steered in (False, True):
                for dtype_name in DTYPES:
                    timings.append(time_case(b, heads, (side, side), d, m, steered, dtype_name))
                    print("time", timings[-1], flush=True)
                    torch.cuda.empty_cache()

    with open(out / "operator.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(timings[0]))
        writer.writeheader()
        writer.writerows(timings)
    gpu = torch.cuda.get_device_name()
    ok = all(c["ok"] for c in checks)
    ratios = sorted(r["fwd_vs_roofline"] for r in timings)
    lines = [
        "# SSoG operator on GPU: Triton kernels against the torch reference and SDPA",
        "",
        f"- Command: `{command}` (from `scripts/gpu_check.sh`)",
        f"- Machine: {gpu}; {versions()}",
        f"- Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- Shapes: B={b}, d={d}, M={m} atoms; times are medians of CUDA-event timings in milliseconds.",
        f"- Roofline: `ssog_lab.ops.triton_kernel.roofline` with the {tk.H200.name} peaks "
        "(compulsory DRAM bytes, dot FLOPs, FP32 weight construction, exponentials; the largest of the four times).",
        "",
        f"## Correctness (forward and gradients vs the float64 reference): {'all pass' if ok else 'FAILURES'}",
        "",
        "Error = max |triton − reference| / max |reference| per tensor; tolerance 1e-4 (float32), 2e-2 (bfloat16).",
        "",
        *markdown_table(checks, ["grid", "heads", "kind", "dtype", "y", "dv", "dmu", "dsigma", "damp", "ok"]),
        "",
        "## Operator timings (ms)",
        "",
        f"Measured forward / roofline estimate: median {statistics.median(ratios):.2f}, range {ratios[0]:.2f} "
        f"… {ratios[-1]:.2f}.",
        "",
        *markdown_table(timings, ["grid", "heads", "kind", "dtype", "triton_fwd_ms", "triton_fwdbwd_ms",
                                  "torch_fwd_ms", "torch_fwdbwd_ms", "sdpa", "sdpa_fwd_ms", "sdpa_fwdbwd_ms",
                                  "roofline_fwd_ms", "roofline_bound", "fwd_vs_roofline", "fwdbwd_vs_roofline"]),
        "",
    ]
    (out / "operator.md").write_text("\n".join(lines))
    print(f"wrote {out / 'operator.md'} and {out / 'operator.csv'}; correctness {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
