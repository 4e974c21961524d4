"""GPU check of the Triton SSoG kernels: correctness, per-kernel timings beside the roofline, SDPA flash, ViT-Tiny.

    python3 scripts/gpu_check.py --out docs/results/gpu       (scripts/gpu_check.sh runs this under `timeout`)

Sections (run in the order: 2 at 1024², 1, 3, 2 at 224²), each row written (CSV and markdown appended) as soon
as it is measured, each case in its own try/except so that a failure is a row and the run goes on:

1. checks.csv — forward and the four gradients (v, μ, σ, α) of `ops.ssog(backend="triton")` against the float64
   torch reference, fixed and steered, float32 (tolerance 1e-4) and bfloat16 (2e-2), for every shipped head/width
   configuration (HEAD_CONFIGS); error = max |triton − reference| / max |reference| per tensor, plus the
   Frobenius-relative error of the worst tensor.
2. operator.csv — milliseconds (median of CUDA-event timings) of each kernel on its own (stage 1 = column
   mixing, `col`: G_col along each row, parameters [..., 1]; stage 2 = row mixing, `row`: G_row and α along each
   column, parameters [..., 0]; forward and backward), of the whole Triton operator forward and
   forward+backward, of the torch reference and of SDPA (flash for bfloat16, memory-efficient for float32) on
   the same (B, heads, N, d), with the roofline prediction (`ssog_lab.ops.roofline`) and flash's predicted time
   beside them.
3. model.csv — ViT-Tiny (sdpa, ssog, ssog-steered; the shipped SSoG heads) at 224² and 1024², bf16 autocast:
   an inference forward and a training step (forward, backward, AdamW step).
4. compile.md — how many Triton compilations the run made (bound: COMPILE_BOUND) and the registers and spills
   of every compiled kernel.

Exits 3 without writing anything when torch has no CUDA; 1 when a correctness check failed; 0 otherwise.
"""

from __future__ import annotations

import argparse
import collections
import csv
import datetime
import platform
import sys
import time
import traceback
from pathlib import Path

import torch

DEVICE = "cuda"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
TOLERANCE = {"float32": 1e-4, "bfloat16": 2e-2}
ATOMS = 4
# (heads, d) of ViT-Tiny's SSoG at C = 192: fixed SSoG's dim // 8 = 24 heads × 8, steered SSoG's max(2, dim // 48)
# = 4 heads × 48 (the defaults of models.ViTConfig), and attention's 3 heads × 64.
HEAD_CONFIGS = ((24, 8), (4, 48), (3, 64))
# (batch, grid): correctness on a square and a non-square grid; timings at 224² (14×14 tokens, B=8) and at 1024²
# (64×64 tokens, B=64).
CHECK_SHAPES = ((8, (14, 14)), (2, (14, 64)))
TIMING_SHAPES = ((8, (14, 14)), (64, (64, 64)))
MODEL_RUNS = ((224, 64), (1024, 8))  # (resolution, batch)
MODEL_MIXERS = ("sdpa", "ssog", "ssog-steered")
# Upper bound on the Triton compilations of one run (tests/test_triton.py derives the count from the kernels'
# specializations and pruned autotune configs and asserts it stays below this).
COMPILE_BOUND = 120


def operator_cases() -> list[dict]:
    """Every operator case of sections 1 and 2 (the compile-count test enumerates these)."""
    cases = []
    for section, shapes in (("check", CHECK_SHAPES), ("time", TIMING_SHAPES)):
        for batch, grid in shapes:
            for heads, d in HEAD_CONFIGS:
                for steered in (False, True):
                    for dtype_name in DTYPES:
                        cases.append(dict(section=section, batch=batch, heads=heads, d=d, grid=grid,
                                          steered=steered, dtype=dtype_name))
    return cases


def make_inputs(case: dict, seed: int = 0) -> list[torch.Tensor]:
    """(v, mu, sigma, amp): v token-major as a mixer makes it ((B, N, heads, d) seen as (B, heads, N, d)),
    offsets over ±3 tokens, widths 0.4…3 tokens, amplitudes ~N(0, 1); parameters float32."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    batch, heads, d, (height, width) = case["batch"], case["heads"], case["d"], case["grid"]
    n = height * width
    shape = (batch, heads, n, ATOMS) if case["steered"] else (heads, ATOMS)
    v = torch.randn(batch, n, heads, d, generator=gen).transpose(1, 2)  # (B, heads, N, d), token-major
    mu = torch.randn(*shape, 2, generator=gen) * 3
    sigma = torch.rand(*shape, 2, generator=gen) * 2.6 + 0.4
    amp = torch.randn(*shape, generator=gen)
    dtype = DTYPES[case["dtype"]]
    return [v.to(DEVICE, dtype)] + [t.to(DEVICE) for t in (mu, sigma, amp)]


# The columns of each section's CSV and table (a failed case fills the label and `error`).
LABEL = ["B", "grid", "heads", "d", "kind", "dtype"]
COLUMNS = {
    "checks": LABEL + ["y", "dv", "dmu", "dsigma", "damp", "worst", "worst_frobenius", "ok", "error"],
    "operator": LABEL + ["fwd_col_ms", "pred_fwd_col_ms", "fwd_row_ms", "pred_fwd_row_ms", "bwd_row_ms",
                         "pred_bwd_row_ms", "bwd_col_ms", "pred_bwd_col_ms", "triton_fwd_ms", "triton_fwdbwd_ms",
                         "pred_fwd_ms", "pred_fwd_bound", "fwd_vs_pred", "pred_bwd_ms", "pred_bwd_bound", "bwd_vs_pred",
                         "torch_fwd_ms", "torch_fwdbwd_ms", "sdpa", "sdpa_fwd_ms", "sdpa_fwdbwd_ms",
                         "flash_pred_fwd_ms", "flash_pred_fwdbwd_ms", "error"],
    "model": ["model", "mixer", "mixer_heads", "resolution", "B", "amp", "infer_ms", "train_step_ms",
              "images_per_s_train", "peak_mem_gb", "error"],
}


def _label(case: dict) -> dict:
    return {"B": case["batch"], "grid": f"{case['grid'][0]}x{case['grid'][1]}", "heads": case["heads"],
            "d": case["d"], "kind": "steered" if case["steered"] else "fixed", "dtype": case["dtype"]}


def forward_backward(fn, inputs, dy):
    leaves = [t.detach().requires_grad_() for t in inputs]
    y = fn(*leaves)
    y.backward(dy.to(y.dtype))
    return y.detach(), [t.grad for t in leaves]


def check_case(case: dict) -> dict:
    from ssog_lab import ops
    from ssog_lab.ops.reference import ssog_reference

    grid = case["grid"]
    inputs = make_inputs(case)
    dy = torch.randn(inputs[0].shape, device=DEVICE)
    y, grads = forward_backward(lambda *t: ops.ssog(*t, grid, backend="triton"), inputs, dy)
    y_ref, grads_ref = forward_backward(lambda *t: ssog_reference(*t, grid, dense=False),
                                        [t.double() for t in inputs], dy.double())
    row, worst, worst_fro = {}, 0.0, 0.0
    for name, a, e in zip(("y", "dv", "dmu", "dsigma", "damp"), [y, *grads], [y_ref, *grads_ref], strict=True):
        diff = a.double() - e
        err = diff.abs().max().item() / max(e.abs().max().item(), 1e-300)
        fro = diff.norm().item() / max(e.norm().item(), 1e-300)
        row[name] = f"{err:.2e}"
        worst, worst_fro = max(worst, err), max(worst_fro, fro)
    ok = worst <= TOLERANCE[case["dtype"]]  # NaN compares False: a NaN fails
    return {**row, "worst": f"{worst:.2e}", "worst_frobenius": f"{worst_fro:.2e}", "ok": ok}  # strings: kept as is


def time_case(case: dict, row: dict) -> None:
    """Fills row with the timings of one case as they are measured (a later failure keeps the earlier ones)."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from ssog_lab import ops
    from ssog_lab.bench import cuda_time_ms
    from ssog_lab.ops import roofline as rf
    from ssog_lab.ops import triton_kernel as tk
    from ssog_lab.ops.reference import ssog_reference

    grid, dtype = case["grid"], DTYPES[case["dtype"]]
    batch, heads, d = case["batch"], case["heads"], case["d"]
    n = grid[0] * grid[1]
    inputs = make_inputs(case)
    dy = torch.randn(inputs[0].shape, device=DEVICE, dtype=dtype)
    ms = lambda fn: cuda_time_ms(fn, min_repeats=10, min_seconds=0.1)

    # Each kernel on its own, on the tensors the operator would pass it.
    v, mu, sigma, amp = inputs
    row_stage, col_stage = tk.Stage(0, grid), tk.Stage(1, grid)
    p_col, p_row = tk.StageParams.of(col_stage, mu, sigma, None), tk.StageParams.of(row_stage, mu, sigma, amp)
    v6 = tk._values_6d(v, grid)  # (B, heads, H, W, 1, d)
    z = v.new_empty(batch, heads, *grid, ATOMS, d)
    y = v.new_empty(batch, heads, *grid, 1, d)
    norm_col = tk.stage_forward(col_stage, v6, z, p_col, heads)
    norm_row = tk.stage_forward(row_stage, z, y, p_row, heads)
    dy6 = tk._values_6d(dy, grid)
    dz, dv6 = torch.empty_like(z), torch.empty_like(y)
    row["fwd_col_ms"] = ms(lambda: tk.stage_forward(col_stage, v6, z, p_col, heads))
    row["fwd_row_ms"] = ms(lambda: tk.stage_forward(row_stage, z, y, p_row, heads))
    row["bwd_row_ms"] = ms(lambda: tk.stage_backward(row_stage, dy6, z, dz, norm_row, p_row, heads))
    row["bwd_col_ms"] = ms(lambda: tk.stage_backward(col_stage, dz, v6, dv6, norm_col, p_col, heads))

    def pair(fn, args):
        leaves = [t.detach().requires_grad_() for t in args]
        with torch.no_grad():
            fwd = ms(lambda: fn(*leaves))

        def step():
            for t in leaves:
                t.grad = None
            fn(*leaves).backward(dy)

        return fwd, ms(step)

    row["sdpa"] = "flash" if dtype == torch.bfloat16 else "efficient"
    size = 2 if dtype == torch.bfloat16 else 4
    predict = lambda **kw: rf.roofline(batch, heads, grid, d, ATOMS, steered=case["steered"], dtype_bytes=size, **kw)
    fwd, bwd = predict(), predict(backward=True)
    for name, stage in (("col", 1), ("row", 2)):  # stage 1 = column mixing, stage 2 = row mixing
        row[f"pred_fwd_{name}_ms"] = 1e3 * predict(stage=stage).time_s
        row[f"pred_bwd_{name}_ms"] = 1e3 * predict(stage=stage, backward=True).time_s
    row.update(pred_fwd_ms=1e3 * fwd.time_s, pred_fwd_bound=fwd.bound, pred_bwd_ms=1e3 * bwd.time_s,
               pred_bwd_bound=bwd.bound,
               fwd_vs_pred=(row["fwd_col_ms"] + row["fwd_row_ms"]) / (1e3 * fwd.time_s),
               bwd_vs_pred=(row["bwd_row_ms"] + row["bwd_col_ms"]) / (1e3 * bwd.time_s),
               flash_pred_fwd_ms=1e3 * rf.flash_estimate(batch, heads, n, d),
               flash_pred_fwdbwd_ms=1e3 * (rf.flash_estimate(batch, heads, n, d)
                                           + rf.flash_estimate(batch, heads, n, d, backward=True)))
    row["triton_fwd_ms"], row["triton_fwdbwd_ms"] = pair(  # without the value checks' device sync, as a layer calls it
        lambda *t: ops.ssog(*t, grid, backend="triton", check_values=False), inputs)
    row["torch_fwd_ms"], row["torch_fwdbwd_ms"] = pair(
        lambda v_, *p: ssog_reference(v_, *(t.to(dtype) for t in p), grid), inputs)
    backend = SDPBackend.FLASH_ATTENTION if dtype == torch.bfloat16 else SDPBackend.EFFICIENT_ATTENTION
    qkv = [torch.randn(batch, heads, n, d, device=DEVICE, dtype=dtype) for _ in range(3)]
    with sdpa_kernel(backend):
        row["sdpa_fwd_ms"], row["sdpa_fwdbwd_ms"] = pair(F.scaled_dot_product_attention, qkv)


def model_case(mixer: str, resolution: int, batch: int, row: dict) -> None:
    from ssog_lab.bench import cuda_time_ms
    from ssog_lab.models import build_model

    model = build_model("tiny", mixer=mixer, num_classes=1000).to(DEVICE)
    images = torch.randn(batch, 3, resolution, resolution, device=DEVICE)
    labels = torch.randint(0, 1000, (batch,), device=DEVICE)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def infer():
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            model(images)

    def train_step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    row["mixer_heads"] = model.config.mixer_heads
    row["infer_ms"] = cuda_time_ms(infer, min_repeats=5, min_seconds=0.2)
    row["train_step_ms"] = cuda_time_ms(train_step, min_repeats=5, min_seconds=0.2)
    row["images_per_s_train"] = 1e3 * batch / row["train_step_ms"]
    row["peak_mem_gb"] = torch.cuda.max_memory_allocated() / 2**30


class Writer:
    """Appends each row to OUT/name.csv and to OUT/report.md the moment it exists."""

    def __init__(self, out: Path):
        self.out, self.started = out, set()
        self.report = out / "report.md"

    def note(self, text: str) -> None:
        with open(self.report, "a") as f:
            f.write(text + "\n")

    def row(self, name: str, row: dict) -> None:
        path, columns = self.out / f"{name}.csv", COLUMNS[name]
        if name not in self.started:
            self.started.add(name)
            with open(path, "w", newline="") as f:
                csv.DictWriter(f, fieldnames=columns).writeheader()
            self.note(f"\n## {name}\n\n| {' | '.join(columns)} |\n|{'---|' * len(columns)}")
        with open(path, "a", newline="") as f:
            csv.DictWriter(f, fieldnames=columns, extrasaction="ignore", restval="").writerow(row)
        self.note("| " + " | ".join(str(row.get(k, "")) for k in columns) + " |")


def run_guarded(fn, label: dict) -> dict:
    """The row fn(row) fills in, starting from label; an exception becomes its error column, keeping what was
    measured before it (the run goes on). Floats are written with 4 significant digits."""
    row = dict(label, error="")
    try:
        fn(row)
    except Exception as exc:  # noqa: BLE001  (any failure of one case is recorded, not fatal)
        traceback.print_exc()
        row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    finally:
        torch.cuda.empty_cache()
    return {k: f"{v:.4g}" if isinstance(v, float) else v for k, v in row.items()}


def _compile_counter() -> collections.Counter:
    """Counts Triton compilations by kernel name through the post-compile hook (when this Triton has it)."""
    import triton

    counter = collections.Counter()
    runtime = getattr(getattr(triton, "knobs", None), "runtime", None)
    if runtime is not None and hasattr(runtime, "jit_post_compile_hook"):
        def hook(**kw):
            counter[getattr(kw.get("fn"), "name", "?")] += 1
            return False

        runtime.jit_post_compile_hook = hook
    return counter


def compiled_resources() -> list[str]:
    """One line per compiled kernel variant: registers and spills (the driver reports them once loaded)."""
    from ssog_lab.ops import triton_kernel as tk

    lines = []
    for fn in (tk._stage_forward_kernel, tk._stage_backward_kernel):
        for device_cache in getattr(fn, "device_caches", {}).values():
            for kernel in device_cache[0].values():
                meta = getattr(kernel, "metadata", None)
                lines.append(f"| {fn.__name__} | {getattr(meta, 'num_warps', '?')} | "
                             f"{getattr(kernel, 'n_regs', '?')} | {getattr(kernel, 'n_spills', '?')} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="docs/results/gpu")
    parser.add_argument("--budget-s", type=float, default=270.0,
                        help="start no new case after this many seconds (the shell script's timeout is above it)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print(f"gpu_check: torch {torch.__version__} sees no CUDA GPU; nothing measured, nothing written",
              file=sys.stderr)
        return 3
    import triton

    start = time.perf_counter()
    compiles = _compile_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in ("checks.csv", "operator.csv", "model.csv", "report.md", "compile.md"):
        (out / name).unlink(missing_ok=True)  # this run's files only
    writer = Writer(out)
    writer.note("# SSoG on GPU: Triton kernels, SDPA flash, ViT-Tiny\n\n"
                f"- Command: `bash scripts/gpu_check.sh`; {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M}"
                f" UTC\n- Machine: {torch.cuda.get_device_name()}; torch {torch.__version__} (CUDA "
                f"{torch.version.cuda}), triton {triton.__version__}, Python {platform.python_version()}\n"
                f"- M = {ATOMS} atoms; times are medians of CUDA-event timings (ms); `pred_*` is the roofline "
                "prediction of `ssog_lab.ops.roofline` (H200 ceilings), `*_vs_pred` measured kernel time over it.")
    out_of_time = lambda: time.perf_counter() - start > args.budget_s
    all_ok = True
    cases = operator_cases()

    def run_cases(section: str, grids) -> None:
        nonlocal all_ok
        for case in [c for c in cases if c["section"] == section and c["grid"] in grids]:
            if out_of_time():
                return
            if section == "check":
                row = run_guarded(lambda r, c=case: r.update(check_case(c)), _label(case))
                all_ok &= row.get("ok") is True
            else:
                row = run_guarded(lambda r, c=case: time_case(c, r), _label(case))
            writer.row("checks" if section == "check" else "operator", row)
            print(section, row, flush=True)

    # Autotuning picks each kernel's BLOCK_I at its first call per (line length, d, atoms, stage): the 1024²
    # timings (B=64) go first so that the long lines are tuned at their real size, the 224² ones after the
    # checks, which tune the short lines at the same B=8.
    run_cases("time", [g for _, g in TIMING_SHAPES if g[0] > 32])
    run_cases("check", [g for _, g in CHECK_SHAPES])
    for resolution, batch in MODEL_RUNS:
        for mixer in MODEL_MIXERS:
            if out_of_time():
                break
            torch.cuda.reset_peak_memory_stats()
            row = run_guarded(lambda r, m=mixer, res=resolution, b=batch: model_case(m, res, b, r),
                              {"model": "vit-tiny", "mixer": mixer, "resolution": resolution, "B": batch,
                               "amp": "bf16"})
            writer.row("model", row)
            print("model", row, flush=True)
    run_cases("time", [g for _, g in TIMING_SHAPES if g[0] <= 32])
    if out_of_time():
        writer.note(f"\n(out of the {args.budget_s:.0f} s budget: the cases not listed were skipped)")
    total = sum(compiles.values())
    try:  # Triton's internal caches differ between versions: this table is a bonus, never a failure
        resources = compiled_resources()
    except Exception as exc:  # noqa: BLE001
        resources = [f"(not available in triton {triton.__version__}: {type(exc).__name__})"]
    (out / "compile.md").write_text(
        f"# Triton compilations in this run: {total} (bound {COMPILE_BOUND}; {dict(compiles)})\n\n"
        "| kernel | warps | registers | spills |\n|---|---|---|---|\n" + "\n".join(resources) + "\n")
    writer.note(f"\nCompilations: {total} (bound {COMPILE_BOUND}); wall {time.perf_counter() - start:.0f} s.")
    print(f"done in {time.perf_counter() - start:.0f} s, {total} compilations; correctness "
          f"{'ok' if all_ok else 'FAILED'}; results in {out}")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
