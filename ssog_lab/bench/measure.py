"""Scaling benchmark: throughput and peak memory against resolution, mixers side by side.

    python -m ssog_lab bench --preset tiny --depth discrete looped ode --resolution 224 512 1024 --out DIR

Every configuration (depth form × mixer × resolution × mode) runs in its own fresh process
(`python -m ssog_lab.bench --one <json>`), so its peak memory is its own:

* CUDA: `torch.cuda.max_memory_allocated()` (parameters, inputs and activations);
* CPU:  the process's peak resident set size (/proc/self/status VmHWM, reset through
  /proc/self/clear_refs once torch is imported) minus its resident size before the model was built.

Throughput is images/s of the median of `repeats` timed batches after `warmup` untimed ones: inference
under `torch.inference_mode()`, or with --train a training step (forward, cross-entropy, backward; no
optimizer step). A configuration that fails, runs out of memory or exceeds its timeout is a row with that
status, and the run goes on.

Python API (the scaling notebook uses it):

    rows = run(grid(preset="nano", resolutions=(32, 64)), out_dir="results")   # list of dicts, CSV written
    rows = load_csv("results/bench.csv")
    figure(rows)                          # plotly: throughput and memory against resolution, log-log
    ratio_table(rows), ratio_markdown(rows)   # each mixer against the fastest SDPA / against sdpa-math

The operator itself (no model around it) is timed by `operator_rows` (`--operator` on the command line).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

DEPTHS = ("discrete", "looped", "ode")
MIXERS = ("sdpa", "sdpa-math", "axial", "ssog", "ssog-steered")
RESOLUTIONS = (224, 384, 512, 768, 1024)
SDPA_MIXERS = ("sdpa", "sdpa-math")
COLUMNS = ("setting", "mixer", "backend", "mode", "resolution", "tokens", "batch", "params", "images_per_s",
           "seconds_per_batch", "best_images_per_s", "peak_mb", "memory_method", "nfe", "repeats", "device",
           "threads", "torch", "ssog_lab", "python", "status", "error")
_RESULT_TAG = "SSOG_LAB_BENCH_RESULT "


@dataclass
class BenchConfig:
    """One measured configuration. `setting` is the depth form; `ode_steps` fixes the ODE's grid
    (step size T/ode_steps, method `ode_method`), the same for every mixer. Timing repeats a batch at least
    `repeats` times and until `min_seconds` have been timed (fast configurations get more samples).
    `threads`: torch's intra-op threads (None: torch's default)."""

    preset: str = "tiny"
    setting: str = "discrete"
    mixer: str = "sdpa"
    resolution: int = 224
    batch: int = 1
    mode: str = "infer"
    repeats: int = 3
    warmup: int = 1
    min_seconds: float = 1.0
    ode_steps: int = 3
    ode_method: str = "rk4"
    device: str = "cpu"
    num_classes: int = 100
    threads: int | None = None


def grid(preset: str = "tiny", depths=DEPTHS, mixers=MIXERS, resolutions=RESOLUTIONS, batch: int = 1,
         train: bool = False, **fields) -> list[BenchConfig]:
    """All configurations, ordered depth → resolution → mixer (mixers of one resolution run back to back,
    so they share the machine's conditions); with train=True each is measured in both modes."""
    modes = ("infer", "train") if train else ("infer",)
    return [BenchConfig(preset=preset, setting=d, mixer=m, resolution=r, batch=batch, mode=mode, **fields)
            for d in depths for mode in modes for r in resolutions for m in mixers]


# ----------------------------------------------------------------------------- one configuration

def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"{field} not in /proc/self/status")


def _reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux ≥ 4.0); False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _backend_name(config: BenchConfig, model, images) -> str:
    """The kernel behind the mixer: SDPA's chosen backend for this shape, or the SSoG backend."""
    import torch

    if config.mixer.startswith("ssog"):
        from ..ops import triton_available

        return "triton" if images.is_cuda and triton_available(images.device) else "torch"
    if config.mixer == "sdpa-math":
        return "math"
    c = model.config
    tokens = (config.resolution // c.patch_size) ** 2
    length = int(math.isqrt(tokens)) if config.mixer == "axial" else tokens
    q = torch.zeros(config.batch, c.heads, length, c.dim // c.heads, device=images.device)
    try:
        from torch.nn.attention import SDPBackend

        return SDPBackend(int(torch._fused_sdp_choice(q, q, q))).name.lower()
    except (AttributeError, RuntimeError, TypeError, ValueError):
        return "auto"


def run_one(config: BenchConfig, fail: bool = False) -> dict:
    """Measure one configuration in this process; returns a row (see COLUMNS). Meant for a fresh process:
    the memory figure is only this configuration's when nothing else ran before it. `fail` raises a
    RuntimeError after the model is built (to test how failures are reported)."""
    import torch
    import torch.nn.functional as F

    from .. import __version__
    from ..models import PRESETS, build_model, count_parameters

    if config.threads:
        torch.set_num_threads(config.threads)
    device = torch.device(config.device)
    cuda = device.type == "cuda"
    row = dict(setting=config.setting, mixer=config.mixer, mode=config.mode, resolution=config.resolution,
               batch=config.batch, repeats=config.repeats, device=_device_name(device),
               threads=torch.get_num_threads(), torch=torch.__version__, ssog_lab=__version__,
               python=platform.python_version(),
               memory_method="cuda.max_memory_allocated" if cuda else "VmHWM-baseline")
    base_rss = _rss_kib("VmRSS")
    hwm_reset = cuda or _reset_peak_rss()
    if not hwm_reset:
        row["memory_method"] = "ru_maxrss-baseline (includes imports)"
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    overrides = {}
    if config.setting == "ode":  # T = layers: exactly ode_steps fixed-grid steps for any preset
        step = PRESETS[config.preset]["layers"] / config.ode_steps
        overrides = dict(ode_method=config.ode_method, ode_step_size=step)
    model = build_model(config.preset, depth=config.setting, mixer=config.mixer, num_classes=config.num_classes,
                        **overrides).to(device)
    c = model.config
    row["params"] = count_parameters(model)
    row["tokens"] = (config.resolution // c.patch_size) ** 2
    images = torch.randn(config.batch, c.in_chans, config.resolution, config.resolution, device=device)
    labels = torch.randint(0, c.num_classes, (config.batch,), device=device)
    row["backend"] = _backend_name(config, model, images)
    if fail:
        raise RuntimeError("forced failure (fail hook)")

    def step():
        if config.mode == "train":
            model.zero_grad(set_to_none=True)
            F.cross_entropy(model(images), labels).backward()
        else:
            with torch.inference_mode():
                model(images)
        if cuda:
            torch.cuda.synchronize(device)

    model.train(config.mode == "train")
    for _ in range(config.warmup):
        step()
    times = []
    while len(times) < config.repeats or sum(times) < config.min_seconds:
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    if cuda:
        peak = torch.cuda.max_memory_allocated(device) / 2**20
    elif hwm_reset:
        peak = (_rss_kib("VmHWM") - base_rss) / 1024
    else:
        import resource

        peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base_rss) / 1024
    row.update(images_per_s=config.batch / seconds, seconds_per_batch=seconds, peak_mb=peak, repeats=len(times),
               best_images_per_s=config.batch / min(times),
               nfe=getattr(model, "nfe", 0) if config.setting == "ode" else c.layers, status="ok", error="")
    return row


def _device_name(device) -> str:
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"


def _classify(error: str) -> str:
    text = error.lower()
    return "oom" if ("out of memory" in text or "can't allocate memory" in text
                     or "memoryerror" in text) else "failed"


def _failed_row(config: BenchConfig, status: str, error: str) -> dict:
    row = dict.fromkeys(COLUMNS, "")
    row.update(setting=config.setting, mixer=config.mixer, mode=config.mode, resolution=config.resolution,
               batch=config.batch, repeats=config.repeats, status=status, error=error.strip()[-300:])
    return row


def run_in_subprocess(config: BenchConfig, timeout: float | None = None, fail: bool = False) -> dict:
    """Run one configuration in a fresh `python -m ssog_lab.bench --one` process; a row with status
    "ok", "failed", "oom" or "timeout"."""
    payload = json.dumps(dict(dataclasses.asdict(config), fail=fail))
    command = [sys.executable, "-m", "ssog_lab.bench", "--one", payload]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return _failed_row(config, "timeout", f"exceeded {timeout} s")
    for line in done.stdout.splitlines():
        if line.startswith(_RESULT_TAG):
            return json.loads(line[len(_RESULT_TAG):])
    error = done.stderr or done.stdout or f"exit status {done.returncode}"
    return _failed_row(config, "oom" if done.returncode == -9 else _classify(error), error)


def _one_main(payload: str) -> int:
    fields = json.loads(payload)
    fail = bool(fields.pop("fail", False))
    config = BenchConfig(**fields)
    try:
        row = run_one(config, fail=fail)
    except Exception as error:  # reported as a row: the caller's run goes on
        row = _failed_row(config, _classify(f"{type(error).__name__}: {error}"), f"{type(error).__name__}: {error}")
    print(_RESULT_TAG + json.dumps(row), flush=True)
    return 0


# ----------------------------------------------------------------------------- many configurations

def run(configs: list[BenchConfig], out_dir: str | Path | None = None, timeout: float | None = 600.0,
        progress: bool = True, fail: tuple[int, ...] = ()) -> list[dict]:
    """Run every configuration in its own process (tqdm progress); rows in the order of `configs`.

    out_dir: when given, DIR/bench.csv is rewritten after each configuration (a partial run keeps its rows).
    timeout: seconds per configuration (None: no limit). fail: indices of configurations forced to fail.
    """
    from tqdm.auto import tqdm

    rows = []
    bar = tqdm(configs, desc="bench", unit="config", disable=not progress)
    for index, config in enumerate(bar):
        bar.set_postfix_str(f"{config.setting} {config.mixer} {config.resolution}² {config.mode}")
        rows.append(run_in_subprocess(config, timeout=timeout, fail=index in fail))
        if out_dir is not None:
            write_csv(rows, Path(out_dir) / "bench.csv")
    return rows


def write_csv(rows: list[dict], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


_NUMERIC = {"resolution": int, "tokens": int, "batch": int, "params": int, "nfe": int, "repeats": int,
            "threads": int, "images_per_s": float, "seconds_per_batch": float, "best_images_per_s": float,
            "peak_mb": float}


def load_csv(path: str | Path) -> list[dict]:
    """Rows of a bench.csv with numbers parsed (empty cells of failed rows become None)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        for key, kind in _NUMERIC.items():
            if key in row:
                row[key] = kind(row[key]) if row[key] not in ("", None) else None
    return rows


def _ok(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r.get("status") == "ok"]


def figure(rows: list[dict]):
    """Plotly figure: throughput (top) and peak memory (bottom) against resolution, log-log, one column per
    depth form, one line per mixer (inference rows; training rows dashed). Failed configurations are gaps."""
    from plotly.subplots import make_subplots

    settings = [s for s in DEPTHS if any(r["setting"] == s for r in rows)]
    fig = make_subplots(rows=2, cols=max(1, len(settings)), shared_xaxes=True, column_titles=settings,
                        vertical_spacing=0.08, horizontal_spacing=0.05)
    colors = dict(zip(MIXERS, ("#1f77b4", "#aec7e8", "#ff7f0e", "#2ca02c", "#d62728"), strict=True))
    ok = _ok(rows)
    for col, setting in enumerate(settings, start=1):
        for mode in ("infer", "train"):
            for mixer in MIXERS:
                points = sorted((r["resolution"], r) for r in ok
                                if r["setting"] == setting and r["mixer"] == mixer and r["mode"] == mode)
                if not points:
                    continue
                x = [p[0] for p in points]
                for plot_row, key in ((1, "images_per_s"), (2, "peak_mb")):
                    fig.add_scatter(x=x, y=[float(p[1][key]) for p in points], row=plot_row, col=col,
                                    mode="lines+markers", name=f"{mixer} ({mode})", legendgroup=f"{mixer}{mode}",
                                    showlegend=col == 1 and plot_row == 1,
                                    line=dict(color=colors[mixer], dash="dash" if mode == "train" else "solid"))
    fig.update_xaxes(type="log", title_text="resolution (pixels)", row=2)
    fig.update_xaxes(type="log")
    fig.update_yaxes(type="log")
    fig.update_yaxes(title_text="images / s", row=1, col=1)
    fig.update_yaxes(title_text="peak memory (MB)", row=2, col=1)
    device = next((r["device"] for r in ok), "")
    fig.update_layout(title=f"Throughput and peak memory against resolution ({device})", height=650,
                      legend_title_text="mixer (mode)")
    return fig


def save_figure(rows: list[dict], path: str | Path, include_plotlyjs: str | bool = "cdn") -> Path:
    """Write figure(rows) as HTML. "cdn" keeps the file small (plotly.js loads from the CDN when opened);
    True inlines plotly.js (~4.5 MB) for offline viewing."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure(rows).write_html(path, include_plotlyjs=include_plotlyjs)
    return path


def ratio_table(rows: list[dict]) -> list[dict]:
    """Per (setting, mode, resolution, mixer): throughput relative to the fastest SDPA mixer (sdpa or
    sdpa-math, whichever measured faster), and peak memory relative to sdpa-math. None where a reference
    or the row itself failed."""
    ok = _ok(rows)
    index = {(r["setting"], r["mode"], int(r["resolution"]), r["mixer"]): r for r in ok}
    out = []
    for row in rows:
        key = (row["setting"], row["mode"], int(row["resolution"]))
        sdpa = [index[(*key, m)] for m in SDPA_MIXERS if (*key, m) in index]
        fastest = max(sdpa, key=lambda r: float(r["images_per_s"]), default=None)
        math_row = index.get((*key, "sdpa-math"))
        good = row.get("status") == "ok"
        out.append(dict(setting=row["setting"], mode=row["mode"], resolution=int(row["resolution"]),
                        mixer=row["mixer"], status=row.get("status"),
                        images_per_s=float(row["images_per_s"]) if good else None,
                        fastest_sdpa=fastest["mixer"] if fastest else None,
                        speed_vs_fastest_sdpa=float(row["images_per_s"]) / float(fastest["images_per_s"])
                        if good and fastest else None,
                        memory_vs_sdpa_math=float(row["peak_mb"]) / float(math_row["peak_mb"])
                        if good and math_row and float(math_row["peak_mb"]) > 0 else None))
    return out


def ratio_markdown(rows: list[dict], mode: str = "infer") -> str:
    """Markdown: one line per (setting, resolution), one column per mixer, cells `speed× / memory%`
    (throughput against the fastest SDPA, peak memory as a share of sdpa-math's)."""
    ratios = [r for r in ratio_table(rows) if r["mode"] == mode]
    mixers = [m for m in MIXERS if any(r["mixer"] == m for r in ratios)]
    cells = {(r["setting"], r["resolution"], r["mixer"]): r for r in ratios}
    lines = ["| setting | resolution | " + " | ".join(mixers) + " |", "|---|---:|" + "---:|" * len(mixers)]
    for setting, resolution in dict.fromkeys((r["setting"], r["resolution"]) for r in ratios):
        text = []
        for mixer in mixers:
            r = cells.get((setting, resolution, mixer))
            if r is None or r["status"] != "ok":
                text.append(r["status"] if r else "")
            else:
                memory = f"{100 * r['memory_vs_sdpa_math']:.0f}%" if r["memory_vs_sdpa_math"] is not None else "–"
                speed = f"{r['speed_vs_fastest_sdpa']:.2f}×" if r["speed_vs_fastest_sdpa"] is not None else "–"
                text.append(f"{speed} / {memory}")
        lines.append(f"| {setting} | {resolution}² | " + " | ".join(text) + " |")
    return "\n".join(lines)


def results_markdown(rows: list[dict]) -> str:
    """Markdown table of the raw rows: images/s and peak MB per configuration."""
    lines = ["| setting | mode | resolution | tokens | mixer | backend | images/s | peak MB | status |",
             "|---|---|---:|---:|---|---|---:|---:|---|"]
    for r in rows:
        good = r.get("status") == "ok"
        lines.append(f"| {r['setting']} | {r['mode']} | {r['resolution']}² | {r.get('tokens') or ''} | {r['mixer']} "
                     f"| {r.get('backend') or ''} | {float(r['images_per_s']):.3g} | {float(r['peak_mb']):.0f} "
                     f"| ok |" if good else
                     f"| {r['setting']} | {r['mode']} | {r['resolution']}² | | {r['mixer']} | | | | {r['status']} |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- the operator alone

def cuda_time_ms(fn, min_repeats: int = 10, min_seconds: float = 0.2, warmup: int = 2) -> float:
    """Median milliseconds of fn() on the GPU, timed with CUDA events, after `warmup` calls; repeats until
    both min_repeats calls and min_seconds have passed (at most 200 calls)."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times, start_wall = [], time.perf_counter()
    while len(times) < 200 and (len(times) < min_repeats or time.perf_counter() - start_wall < min_seconds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _median_ms(fn, repeats: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def operator_rows(sizes=(8, 12, 16, 24, 32, 48, 64), batch: int = 8, heads: int = 3, head_dim: int = 64,
                  atoms: int = 4, repeats: int = 5, dense_max_tokens: int = 1024, device: str = "cpu") -> list[dict]:
    """Forward and forward+backward milliseconds of SSoG (fixed and steered; dense and separable paths of the
    torch reference) and of SDPA (PyTorch's choice and the math backend) on square grids, all at the same
    (batch, heads, N, head_dim) float32 values. Dense paths run up to `dense_max_tokens` tokens."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from ..ops.reference import ssog_reference

    gen = torch.Generator().manual_seed(0)
    rows = []
    for size in sizes:
        n = size * size
        v = torch.randn(batch, heads, n, head_dim, generator=gen).to(device).requires_grad_()
        q, k = (torch.randn_like(v).requires_grad_() for _ in range(2))
        fixed = [torch.randn(heads, atoms, 2, generator=gen), torch.rand(heads, atoms, 2, generator=gen) + 0.5,
                 torch.randn(heads, atoms, generator=gen)]
        # Steered parameters: the fixed ones repeated at every token, (B, heads, N, M, 2) and (B, heads, N, M).
        steered = [p[None, :, None].expand(batch, heads, n, *p.shape[1:]).clone() for p in fixed]
        candidates = {"sdpa": lambda: F.scaled_dot_product_attention(q, k, v)}

        def math_sdpa():
            with sdpa_kernel(SDPBackend.MATH):
                return F.scaled_dot_product_attention(q, k, v)

        candidates["sdpa-math"] = math_sdpa
        for name, params in (("fixed", fixed), ("steered", steered)):
            params = [p.to(device).requires_grad_() for p in params]
            for dense in (True, False):
                if dense and n > dense_max_tokens:
                    continue
                label = f"ssog {name} {'dense' if dense else 'separable'}"
                candidates[label] = lambda p=params, d=dense: ssog_reference(v, *p, (size, size), dense=d)
        for label, fn in candidates.items():
            def forward_backward(fn=fn):
                fn().sum().backward()
            with torch.no_grad():
                forward = _median_ms(fn, repeats)
            rows.append(dict(grid=f"{size}×{size}", tokens=n, op=label, forward_ms=forward,
                             forward_backward_ms=_median_ms(forward_backward, repeats), batch=batch, heads=heads,
                             head_dim=head_dim, atoms=atoms))
    return rows


def operator_markdown(rows: list[dict], key: str = "forward_ms") -> str:
    """Markdown: one line per grid, one column per operator, cells in milliseconds (`key`)."""
    ops = list(dict.fromkeys(r["op"] for r in rows))
    cells = {(r["grid"], r["op"]): r[key] for r in rows}
    lines = ["| grid | tokens | " + " | ".join(ops) + " |", "|---|---:|" + "---:|" * len(ops)]
    for grid_name, tokens in dict.fromkeys((r["grid"], r["tokens"]) for r in rows):
        text = [f"{cells[(grid_name, op)]:.2f}" if (grid_name, op) in cells else "–" for op in ops]
        lines.append(f"| {grid_name} | {tokens} | " + " | ".join(text) + " |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- command line

def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ssog_lab bench", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--preset", default="tiny", choices=("nano", "tiny", "small", "base"))
    parser.add_argument("--depth", nargs="+", default=list(DEPTHS), choices=DEPTHS, help="depth forms (settings)")
    parser.add_argument("--mixer", nargs="+", default=list(MIXERS), choices=MIXERS)
    parser.add_argument("--resolution", nargs="+", type=int, default=list(RESOLUTIONS), help="input sizes (pixels)")
    parser.add_argument("--batch", type=int, default=1, help="images per batch, the same for every configuration")
    parser.add_argument("--train", action="store_true", help="also time a training step (forward + backward)")
    parser.add_argument("--repeats", type=int, default=3, help="timed batches (the median is reported)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed batches before timing")
    parser.add_argument("--min-seconds", type=float, default=1.0, help="time at least this long (more repeats)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per configuration")
    parser.add_argument("--ode-steps", type=int, default=3, help="fixed-grid steps of the ODE over [0, T]")
    parser.add_argument("--ode-method", default="rk4", choices=("euler", "midpoint", "rk4"))
    parser.add_argument("--device", default="cuda" if _cuda() else "cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--out", default="bench_results", help="directory for bench.csv, bench.html, ratios.md")
    parser.add_argument("--inline-js", action="store_true", help="inline plotly.js in bench.html (offline, ~4.5 MB)")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--operator", action="store_true",
                        help="time the operator alone (no model) and write DIR/operator.csv and operator.md")
    parser.add_argument("--grid-sizes", nargs="+", type=int, default=[8, 12, 16, 24, 32, 48, 64],
                        help="--operator: square grid sizes")
    parser.add_argument("--heads", type=int, default=3, help="--operator: heads")
    parser.add_argument("--head-dim", type=int, default=64, help="--operator: features per head")
    parser.add_argument("--one", metavar="JSON", help=argparse.SUPPRESS)
    return parser


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.one:
        return _one_main(args.one)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    if args.operator:
        if args.threads:
            import torch

            torch.set_num_threads(args.threads)
        rows = operator_rows(tuple(args.grid_sizes), batch=args.batch, heads=args.heads, head_dim=args.head_dim,
                             repeats=args.repeats, device=args.device)
        with open(out / "operator.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        text = (f"Operator alone, batch {args.batch}, heads {args.heads}, head_dim {args.head_dim}, float32, "
                f"{args.device}, {torch_threads()} threads, {stamp}\n\nforward (ms)\n\n{operator_markdown(rows)}\n\n"
                f"forward + backward (ms)\n\n{operator_markdown(rows, 'forward_backward_ms')}\n")
        (out / "operator.md").write_text(text)
        print(text)
        return 0
    configs = grid(args.preset, args.depth, args.mixer, args.resolution, batch=args.batch, train=args.train,
                   repeats=args.repeats, warmup=args.warmup, min_seconds=args.min_seconds, ode_steps=args.ode_steps,
                   ode_method=args.ode_method, device=args.device, threads=args.threads)
    rows = run(configs, out, timeout=args.timeout, progress=not args.no_progress)
    save_figure(rows, out / "bench.html", include_plotlyjs=True if args.inline_js else "cdn")
    modes = ("infer", "train") if args.train else ("infer",)
    text = "".join(f"\n{mode}: throughput vs fastest SDPA / peak memory vs sdpa-math\n\n{ratio_markdown(rows, mode)}\n"
                   for mode in modes)
    (out / "ratios.md").write_text(f"{stamp}\n{text}\nraw\n\n{results_markdown(rows)}\n")
    print(text)
    failed = [r for r in rows if r["status"] != "ok"]
    print(f"{len(rows) - len(failed)} ok, {len(failed)} not ok; wrote {out / 'bench.csv'}, {out / 'bench.html'}, "
          f"{out / 'ratios.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
