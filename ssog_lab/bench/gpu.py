"""The GPU check: the Triton SSoG kernels on a CUDA GPU, checked, timed kernel by kernel beside the roofline, against
SDPA flash, and ViT-Tiny end to end (`scripts/gpu_check.sh` runs `run_gpu_check` under a time limit).

Sections (run in the order: 2 at 1024², 1, 3, 2 at 224²), each row written (CSV and markdown appended) as soon
as it is measured, each case guarded so that a failure is a row with an `error` and the run goes on:

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

Notebook 08 times the operator on its own grids with `gpu_timings` (Triton against the torch reference, forward and
forward + backward) and reads them as `speed_ratio`.

Inputs are `ops.random_atoms`'s parameters beside standard-normal values. Every function here but
`prediction_rows`, `prediction_markdown`, `operator_cases` and `speed_ratio` needs a CUDA GPU and triton.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import math
import platform
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

from .. import ops
from ..ops import roofline as rf
from ..ops.reference import ssog_reference
from .report import RowWriter, markdown_table
from .timing import cuda_time_ms

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
# The files of one run (deleted at its start, so that the folder holds this run's results only).
FILES = ("checks.csv", "operator.csv", "model.csv", "report.md", "compile.md")

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

Inputs = list[Tensor]  # [v (B, heads, N, d), mu, sigma (…, M, 2), amp (…, M)]: the arguments of ops.ssog


def operator_cases() -> list[dict]:
    """Every operator case of sections 1 and 2 (the compile-count test enumerates these): dicts of section
    ("check" or "time"), batch, heads, d, grid (H, W) in tokens, steered, dtype (a key of DTYPES)."""
    return [dict(section=section, batch=batch, heads=heads, d=d, grid=grid, steered=steered, dtype=dtype_name)
            for section, shapes in (("check", CHECK_SHAPES), ("time", TIMING_SHAPES))
            for batch, grid in shapes for heads, d in HEAD_CONFIGS
            for steered in (False, True) for dtype_name in DTYPES]


def case_label(case: dict) -> dict:
    """The LABEL columns of an operator case's row."""
    return {"B": case["batch"], "grid": f"{case['grid'][0]}x{case['grid'][1]}", "heads": case["heads"],
            "d": case["d"], "kind": "steered" if case["steered"] else "fixed", "dtype": case["dtype"]}


def make_inputs(case: dict, seed: int = 0, device: str | None = None) -> Inputs:
    """(v, mu, sigma, amp) of a case on `device` (None: DEVICE): v ~ N(0, 1) in the case's dtype, token-major as a
    mixer passes it ((B, N, heads, d) seen as (B, heads, N, d): not contiguous); parameters float32 from
    `ops.random_atoms`."""
    device = DEVICE if device is None else device
    gen = torch.Generator(device="cpu").manual_seed(seed)
    batch, heads, d, (height, width) = case["batch"], case["heads"], case["d"], case["grid"]
    v = torch.randn(batch, height * width, heads, d, generator=gen).transpose(1, 2)  # (B, heads, N, d)
    params = ops.random_atoms(heads, ATOMS, case["grid"], batch=batch, steered=case["steered"], generator=gen,
                              device=device)
    return [v.to(device, DTYPES[case["dtype"]]), *params]


def _forward_backward(fn: Callable[..., Tensor], inputs: Inputs, dy: Tensor) -> tuple[Tensor, list[Tensor]]:
    """fn's output and the gradients of ⟨fn(inputs), dy⟩ for each input."""
    leaves = [t.detach().requires_grad_() for t in inputs]
    y = fn(*leaves)
    y.backward(dy.to(y.dtype))
    return y.detach(), [t.grad for t in leaves]


def check_case(case: dict) -> dict:
    """Section 1's columns of one case: relative errors of the output and the four gradients (strings, "1.23e-05"),
    the worst of them, and ok (worst within TOLERANCE; a NaN fails)."""
    grid = case["grid"]
    inputs = make_inputs(case)
    dy = torch.randn(inputs[0].shape, device=DEVICE)
    y, grads = _forward_backward(lambda *t: ops.ssog(*t, grid, backend="triton"), inputs, dy)
    y_ref, grads_ref = _forward_backward(lambda *t: ssog_reference(*t, grid, dense=False),
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


def _ms(fn: Callable[[], object]) -> float:
    """Median milliseconds of fn on the GPU: at least 10 calls and 0.1 s (short kernels get many calls)."""
    return cuda_time_ms(fn, min_repeats=10, min_seconds=0.1)


def kernel_times(inputs: Inputs, dy: Tensor, grid: tuple[int, int]) -> dict[str, float]:
    """Milliseconds of each of the four kernels alone (fwd_col_ms, fwd_row_ms, bwd_row_ms, bwd_col_ms), launched
    on the tensors the operator passes them: v (B, heads, N, d) and dy alike, Z (B, heads, H, W, M, d)."""
    from ..ops import triton_host as th
    from ..ops import triton_kernel as tk

    v, mu, sigma, amp = inputs
    batch, heads, _, d = v.shape
    row_stage, col_stage = tk.Stage(0, grid), tk.Stage(1, grid)
    p_col, p_row = col_stage.params(mu, sigma, None), row_stage.params(mu, sigma, amp)
    v6, dy6 = th.values_6d(v, grid), th.values_6d(dy, grid)  # (B, heads, H, W, 1, d)
    z = v.new_empty(batch, heads, *grid, mu.shape[-2], d)
    y = v.new_empty(batch, heads, *grid, 1, d)
    # One forward first: the backward kernels read the normalizers it returns.
    norm_col = tk.stage_forward(col_stage, v6, z, p_col, heads)  # (B, heads, H, W, M)
    norm_row = tk.stage_forward(row_stage, z, y, p_row, heads)
    dz, dv6 = torch.empty_like(z), torch.empty_like(y)
    return dict(fwd_col_ms=_ms(lambda: tk.stage_forward(col_stage, v6, z, p_col, heads)),
                fwd_row_ms=_ms(lambda: tk.stage_forward(row_stage, z, y, p_row, heads)),
                bwd_row_ms=_ms(lambda: tk.stage_backward(row_stage, dy6, z, dz, norm_row, p_row, heads)),
                bwd_col_ms=_ms(lambda: tk.stage_backward(col_stage, dz, v6, dv6, norm_col, p_col, heads)))


def predictions(case: dict) -> dict:
    """The roofline's milliseconds for a case (`ssog_lab.ops.roofline`, H200 ceilings): each kernel alone
    (pred_fwd_col_ms, …), the forward and backward passes with the bound that sets each, and flash's predicted
    forward and forward+backward on the same (B, heads, N, d)."""
    batch, heads, grid, d = case["batch"], case["heads"], case["grid"], case["d"]
    n = grid[0] * grid[1]
    size = DTYPES[case["dtype"]].itemsize
    predict = lambda **kw: rf.roofline(batch, heads, grid, d, ATOMS, steered=case["steered"], dtype_bytes=size, **kw)
    fwd, bwd = predict(), predict(backward=True)
    row = dict(pred_fwd_ms=1e3 * fwd.time_s, pred_fwd_bound=fwd.bound, pred_bwd_ms=1e3 * bwd.time_s,
               pred_bwd_bound=bwd.bound, flash_pred_fwd_ms=1e3 * rf.flash_estimate(batch, heads, n, d),
               flash_pred_fwdbwd_ms=1e3 * (rf.flash_estimate(batch, heads, n, d)
                                           + rf.flash_estimate(batch, heads, n, d, backward=True)))
    for name, stage in (("col", 1), ("row", 2)):  # stage 1 = column mixing, stage 2 = row mixing
        row[f"pred_fwd_{name}_ms"] = 1e3 * predict(stage=stage).time_s
        row[f"pred_bwd_{name}_ms"] = 1e3 * predict(stage=stage, backward=True).time_s
    return row


def _fwd_and_fwdbwd(fn: Callable[..., Tensor], args: Inputs, dy: Tensor) -> tuple[float, float]:
    """Milliseconds of fn(*args) without autograd, and of fn(*args).backward(dy) with every arg a leaf."""
    leaves = [t.detach().requires_grad_() for t in args]
    with torch.no_grad():
        fwd = _ms(lambda: fn(*leaves))

    def step() -> None:
        for t in leaves:
            t.grad = None
        fn(*leaves).backward(dy)

    return fwd, _ms(step)


def time_case(case: dict, row: dict) -> None:
    """Fills row with section 2's columns of one case as they are measured (a later failure keeps the earlier
    ones): the kernels alone, the predictions, the Triton operator, the torch reference, SDPA."""
    grid, dtype = case["grid"], DTYPES[case["dtype"]]
    inputs = make_inputs(case)
    dy = torch.randn(inputs[0].shape, device=DEVICE, dtype=dtype)
    row.update(kernel_times(inputs, dy, grid))
    row.update(predictions(case))
    row["fwd_vs_pred"] = (row["fwd_col_ms"] + row["fwd_row_ms"]) / row["pred_fwd_ms"]
    row["bwd_vs_pred"] = (row["bwd_row_ms"] + row["bwd_col_ms"]) / row["pred_bwd_ms"]
    row["triton_fwd_ms"], row["triton_fwdbwd_ms"] = _fwd_and_fwdbwd(  # without the value checks' device sync,
        lambda *t: ops.ssog(*t, grid, backend="triton", check_values=False), inputs, dy)  # as a layer calls it
    row["torch_fwd_ms"], row["torch_fwdbwd_ms"] = _fwd_and_fwdbwd(
        lambda v, *p: ssog_reference(v, *(t.to(dtype) for t in p), grid), inputs, dy)
    # Flash takes no float32: float32 gets the memory-efficient kernel.
    row["sdpa"] = "flash" if dtype == torch.bfloat16 else "efficient"
    backend = SDPBackend.FLASH_ATTENTION if dtype == torch.bfloat16 else SDPBackend.EFFICIENT_ATTENTION
    qkv = [torch.randn(inputs[0].shape, device=DEVICE, dtype=dtype) for _ in range(3)]  # (B, heads, N, d)
    with sdpa_kernel(backend):
        row["sdpa_fwd_ms"], row["sdpa_fwdbwd_ms"] = _fwd_and_fwdbwd(F.scaled_dot_product_attention, qkv, dy)


def model_case(mixer: str, resolution: int, batch: int, row: dict) -> None:
    """Fills row with ViT-Tiny's (1000 classes) milliseconds under bf16 autocast at resolution² pixels: an
    inference forward and a training step (forward, cross-entropy, backward, AdamW), its images/s, peak GiB."""
    from ..models import build_model

    model = build_model("tiny", mixer=mixer, num_classes=1000).to(DEVICE)
    images = torch.randn(batch, 3, resolution, resolution, device=DEVICE)
    labels = torch.randint(0, 1000, (batch,), device=DEVICE)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def infer() -> None:
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            model(images)

    def train_step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    row["mixer_heads"] = model.config.mixer_heads
    row["infer_ms"] = cuda_time_ms(infer, min_repeats=5, min_seconds=0.2)
    row["train_step_ms"] = cuda_time_ms(train_step, min_repeats=5, min_seconds=0.2)
    row["images_per_s_train"] = 1e3 * batch / row["train_step_ms"]
    row["peak_mem_gb"] = torch.cuda.max_memory_allocated() / 2**30


def run_guarded(fn: Callable[[dict], None], label: dict) -> dict:
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
        def hook(**kw) -> bool:
            counter[getattr(kw.get("fn"), "name", "?")] += 1
            return False  # do not replace the compiled kernel

        runtime.jit_post_compile_hook = hook
    return counter


def compile_report(compiles: collections.Counter) -> str:
    """compile.md: the number of compilations against COMPILE_BOUND, and each compiled variant's warps,
    registers per thread and spilled bytes."""
    import triton

    from ..ops import triton_host as th
    from ..ops import triton_kernel as tk

    total = sum(compiles.values())
    try:  # Triton's internal caches differ between versions: this table is a bonus, never a failure
        rows = [r for kernel in (tk.forward_kernel, tk.backward_kernel) for r in th.compiled_variants(kernel)]
        table = markdown_table(rows, {"kernel": "kernel", "warps": "warps", "registers": "registers",
                                      "spills": "spills"})
    except Exception as exc:  # noqa: BLE001
        table = f"(not available in triton {triton.__version__}: {type(exc).__name__})"
    return f"# Triton compilations in this run: {total} (bound {COMPILE_BOUND}; {dict(compiles)})\n\n{table}\n"


def _report_header() -> str:
    """The top of report.md: command, date, machine, versions and how to read the tables."""
    import triton

    now = datetime.datetime.now(datetime.timezone.utc)
    return ("# SSoG on GPU: Triton kernels, SDPA flash, ViT-Tiny\n\n"
            f"- Command: `bash scripts/gpu_check.sh`; {now:%Y-%m-%d %H:%M} UTC\n"
            f"- Machine: {torch.cuda.get_device_name()}; torch {torch.__version__} (CUDA {torch.version.cuda}), "
            f"triton {triton.__version__}, Python {platform.python_version()}\n"
            f"- M = {ATOMS} atoms; times are medians of CUDA-event timings (ms); `pred_*` is the roofline "
            "prediction of `ssog_lab.ops.roofline` (H200 ceilings), `*_vs_pred` measured kernel time over it.")


class CheckRun:
    """One GPU-check run: its writer, its time budget (seconds from `start`) and whether every check passed."""

    def __init__(self, out: Path, budget_s: float):
        self.start, self.budget_s, self.all_ok = time.perf_counter(), budget_s, True
        self.writer = RowWriter(out, COLUMNS)
        self.cases = operator_cases()

    def out_of_time(self) -> bool:
        """True once more than budget_s seconds have passed since the run started: no new case starts."""
        return time.perf_counter() - self.start > self.budget_s

    def operator_section(self, section: str, grids: Sequence[tuple[int, int]]) -> None:
        """Sections 1 ("check") or 2 ("time") on the given grids, one row per case, until the budget is spent."""
        for case in [c for c in self.cases if c["section"] == section and c["grid"] in grids]:
            if self.out_of_time():
                return
            if section == "check":
                row = run_guarded(lambda r, c=case: r.update(check_case(c)), case_label(case))
                self.all_ok &= row.get("ok") is True
            else:
                row = run_guarded(lambda r, c=case: time_case(c, r), case_label(case))
            self.writer.row("checks" if section == "check" else "operator", row)
            print(section, row, flush=True)

    def model_section(self) -> None:
        """Section 3: every mixer at every resolution, until the budget is spent."""
        for resolution, batch in MODEL_RUNS:
            for mixer in MODEL_MIXERS:
                if self.out_of_time():
                    return
                torch.cuda.reset_peak_memory_stats()
                row = run_guarded(lambda r, m=mixer, res=resolution, b=batch: model_case(m, res, b, r),
                                  {"model": "vit-tiny", "mixer": mixer, "resolution": resolution, "B": batch,
                                   "amp": "bf16"})
                self.writer.row("model", row)
                print("model", row, flush=True)


def run_gpu_check(out: str | Path, budget_s: float = 270.0) -> int:
    """Every section into `out` (this run's FILES replaced), starting no new case after budget_s seconds.
    Returns the exit code: 0, or 1 when a correctness check failed. Needs CUDA (the caller checks first)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        (out / name).unlink(missing_ok=True)  # this run's files only
    compiles = _compile_counter()
    run = CheckRun(out, budget_s)
    run.writer.note(_report_header())
    # Autotuning picks each kernel's BLOCK_I at its first call per (line length, d, atoms, stage): the 1024²
    # timings (B=64) go first so that the long lines are tuned at their real size, the 224² ones after the
    # checks, which tune the short lines at the same B=8.
    run.operator_section("time", [g for _, g in TIMING_SHAPES if g[0] > 32])
    run.operator_section("check", [g for _, g in CHECK_SHAPES])
    run.model_section()
    run.operator_section("time", [g for _, g in TIMING_SHAPES if g[0] <= 32])
    if run.out_of_time():
        run.writer.note(f"\n(out of the {budget_s:.0f} s budget: the cases not listed were skipped)")
    (out / "compile.md").write_text(compile_report(compiles))
    total, wall = sum(compiles.values()), time.perf_counter() - run.start
    run.writer.note(f"\nCompilations: {total} (bound {COMPILE_BOUND}); wall {wall:.0f} s.")
    print(f"done in {wall:.0f} s, {total} compilations; correctness {'ok' if run.all_ok else 'FAILED'}; "
          f"results in {out}")
    return 0 if run.all_ok else 1


def gpu_timings(sides: tuple[int, ...] = (16, 32, 64), batch: int = 8, heads: int = 6, d: int = 64, atoms: int = 4,
                dtype: torch.dtype = torch.float32, repeats: int = 20) -> list[dict]:
    """Milliseconds per call on the GPU (CUDA events, median of `repeats` after warm-up) of SSoG's Triton kernel
    and the torch reference on side×side token grids, forward and forward + backward, fixed parameters: one row
    per side and backend, with the shapes and the GPU's name (`device`). Needs CUDA (ValueError without)."""
    if not torch.cuda.is_available():
        raise ValueError("gpu_timings needs a CUDA GPU; this machine has none")
    rows = []
    for side in sides:
        grid, n = (side, side), side * side
        v = torch.randn(batch, heads, n, d, device="cuda", dtype=dtype, requires_grad=True)  # (B, heads, N, d)
        mu, sigma, amp = (t.cuda().requires_grad_() for t in ops.random_atoms(
            heads, atoms, grid, generator=torch.Generator().manual_seed(0)))
        for backend in ("triton", "torch"):
            run = lambda b=backend: ops.ssog(v, mu, sigma, amp, grid, backend=b)
            step = lambda r=run: r().float().square().mean().backward()
            rows.append({"side": side, "tokens": n, "backend": backend, "forward_ms": _forward_ms(run, repeats),
                         "forward_backward_ms": cuda_time_ms(step, min_repeats=repeats, min_seconds=0),
                         "batch": batch, "heads": heads, "d": d, "atoms": atoms, "dtype": str(dtype),
                         "device": torch.cuda.get_device_name()})
    return rows


def _forward_ms(run: Callable[[], Tensor], repeats: int) -> float:
    """Milliseconds of run() without autograd (`cuda_time_ms`, at least `repeats` calls)."""
    with torch.no_grad():
        return cuda_time_ms(run, min_repeats=repeats, min_seconds=0)


def speed_ratio(rows: list[dict], key: str = "forward_ms") -> dict[int, float]:
    """torch ms / Triton ms per grid side from `gpu_timings` rows (> 1: the kernel is faster); sides where the
    Triton time is not finite are left out."""
    by = {(r["side"], r["backend"]): r[key] for r in rows}
    return {side: by[side, "torch"] / by[side, "triton"] for side in dict.fromkeys(r["side"] for r in rows)
            if math.isfinite(by[side, "triton"])}


def prediction_rows(batch: int = 64, grid: tuple[int, int] = (64, 64),
                    head_configs: Sequence[tuple[int, int]] = HEAD_CONFIGS, steered: bool = True) -> list[dict]:
    """The roofline's prediction of one SSoG layer (M = ATOMS; grid (H, W) in tokens; head_configs (heads, d)
    pairs) per head configuration and dtype, beside flash's (FA2 rates) on the same (B, heads, N, d): the columns
    of `predictions` (milliseconds, and the bound that sets each pass) after the LABEL ones. No GPU needed."""
    rows = []
    for heads, d in head_configs:
        for dtype_name in ("bfloat16", "float32"):
            case = dict(batch=batch, heads=heads, d=d, grid=grid, steered=steered, dtype=dtype_name)
            rows.append(dict(case_label(case), **predictions(case)))
    return rows


def prediction_markdown(rows: list[dict]) -> str:
    """The prediction table of docs/results/gpu/README.md from `prediction_rows`: milliseconds per pass."""
    dtype = {"bfloat16": "bf16", "float32": "fp32"}
    return markdown_table(rows, {
        "shape": lambda r: f"{r['heads']} heads × d {r['d']}", "dtype": lambda r: dtype[r["dtype"]],
        "fwd ms (bound)": lambda r: f"{r['pred_fwd_ms']:.3f} ({r['pred_fwd_bound']})",
        "bwd ms (bound)": lambda r: f"{r['pred_bwd_ms']:.3f} ({r['pred_bwd_bound']})",
        "fwd+bwd ms": lambda r: f"{r['pred_fwd_ms'] + r['pred_bwd_ms']:.3f}",
        "flash (bf16 rates) fwd / fwd+bwd ms":
            lambda r: f"{r['flash_pred_fwd_ms']:.3f} / {r['flash_pred_fwdbwd_ms']:.3f}",
    }, align="llrrrr")


def main(argv: list[str] | None = None) -> int:
    """`scripts/gpu_check.py`: parse the flags, refuse without CUDA (exit 3, nothing written), run every section
    into --out (exit 1 when a correctness check failed, else 0)."""
    parser = argparse.ArgumentParser(prog="python scripts/gpu_check.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="docs/results/gpu")
    parser.add_argument("--budget-s", type=float, default=270.0,
                        help="start no new case after this many seconds (the shell script's timeout is above it)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print(f"gpu_check: torch {torch.__version__} sees no CUDA GPU; nothing measured, nothing written",
              file=sys.stderr)
        return 3
    return run_gpu_check(Path(args.out), args.budget_s)

