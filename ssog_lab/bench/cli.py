"""`python -m ssog_lab bench`: the model benchmark (default) or the operator alone (`--operator`).

    python -m ssog_lab bench --preset tiny --depth discrete looped ode --resolution 224 512 1024 --out DIR
    python -m ssog_lab bench --operator --grid-sizes 8 16 32 --out DIR

Writes DIR/bench.csv, bench.html and ratios.md (or DIR/operator.csv and operator.md). Exit status: 0 when
every configuration measured ok, 1 when any did not, 2 for bad flags.
"""

from __future__ import annotations

import argparse
import datetime
import math
import sys
from pathlib import Path

from ..models import DEPTHS, MIXERS, PRESETS
from .config import MODES, ODE_METHODS, RESOLUTIONS, check_device, check_distinct, check_threads, configurations
from .report import RATIO_LEGEND, ratio_markdown, results_markdown, write_csv


def _at_least(kind, low, strict: bool = False):
    """An argparse type: `kind` values ≥ low (> low when strict); the message names the bound."""
    def parse(text: str):
        value = kind(text)
        if not (math.isfinite(value) and (value > low if strict else value >= low)):
            raise argparse.ArgumentTypeError(f"must be {'>' if strict else '≥'} {low}, got {text}")
        return value
    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


_POSITIVE = _at_least(int, 1)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ssog_lab bench", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add = parser.add_argument
    add("--preset", default="tiny", choices=list(PRESETS))
    add("--depth", nargs="+", default=list(DEPTHS), choices=DEPTHS, help="depth forms")
    add("--mixer", nargs="+", default=list(MIXERS), choices=MIXERS)
    add("--resolution", nargs="+", type=_POSITIVE, default=list(RESOLUTIONS), help="input sizes (pixels)")
    add("--batch", type=_POSITIVE, default=1, help="images per batch, the same for every configuration")
    add("--train", action="store_true",
        help="also time a training step (forward, cross-entropy, backward, AdamW step): images/s, peak memory")
    add("--patch-size", type=_POSITIVE, default=None, help="patch size in pixels (default: the preset's)")
    add("--repeats", type=_POSITIVE, default=3, help="timed batches (the median is reported)")
    add("--warmup", type=_at_least(int, 0), default=1, help="untimed batches before timing")
    add("--min-seconds", type=_at_least(float, 0.0), default=1.0, help="time at least this long (more repeats)")
    add("--timeout", type=_at_least(float, 0.0, strict=True), default=600.0, help="seconds per configuration")
    add("--ode-steps", type=_POSITIVE, default=None,
        help="fixed-grid steps of the ODE over [0, T] (default: the library's step size, ViTConfig.ode_step_size)")
    add("--ode-method", default="rk4", choices=ODE_METHODS)
    add("--device", default=None, help="cpu or cuda (default: cuda when available)")
    add("--threads", type=_POSITIVE, default=None, help="torch intra-op threads (default: torch's)")
    add("--flush-denormal", action="store_true",
        help="torch.set_flush_denormal(True) in the measuring process (recorded per row; off by default)")
    add("--out", default="bench_results", help="directory for bench.csv, bench.html, ratios.md")
    add("--inline-js", action="store_true", help="inline plotly.js in bench.html (offline, ~4.5 MB)")
    add("--no-progress", action="store_true")
    add("--operator", action="store_true",
        help="time the operator alone (no model) and write DIR/operator.csv and operator.md")
    add("--grid-sizes", dest="sides", nargs="+", type=_POSITIVE, default=[8, 12, 16, 24, 32, 48, 64],
        help="--operator: square grid sides (tokens)")
    add("--heads", type=_POSITIVE, default=3, help="--operator: heads")
    add("--head-dim", type=_POSITIVE, default=64, help="--operator: features per head")
    add("--one", metavar="JSON", help=argparse.SUPPRESS)
    return parser


def _stamp() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _operator_main(args, out: Path) -> int:
    import torch

    from .operator import operator_rows

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.flush_denormal:
        torch.set_flush_denormal(True)
    rows = operator_rows(tuple(args.sides), batch=args.batch, heads=args.heads, head_dim=args.head_dim,
                         repeats=args.repeats, device=args.device)
    write_csv(rows, out / "operator.csv")
    from .report import operator_markdown

    m = rows[0]
    text = (f"Operator alone, batch {args.batch}, heads {args.heads}, head_dim {args.head_dim}, float32, "
            f"{args.device}, {m['cpu_model']} ({m['cpu_flags'] or 'no avx512/amx'}), {m['threads']} threads, "
            f"flush_denormal={m['flush_denormal']}, {_stamp()}\n\nforward (ms)\n\n{operator_markdown(rows)}\n\n"
            f"forward + backward (ms)\n\n{operator_markdown(rows, 'forward_backward_ms')}\n")
    (out / "operator.md").write_text(text)
    print(text)
    return 0


def _model_main(args, out: Path) -> int:
    from .figure import save_figure
    from .runner import run

    configs = configurations(args.preset, args.depth, args.mixer, args.resolution, batch=args.batch,
                             train=args.train, repeats=args.repeats, warmup=args.warmup, min_seconds=args.min_seconds,
                             ode_steps=args.ode_steps, ode_method=args.ode_method, device=args.device,
                             threads=args.threads, flush_denormal=args.flush_denormal,
                             overrides={} if args.patch_size is None else dict(patch_size=args.patch_size))
    rows = run(configs, out, timeout=args.timeout, progress=not args.no_progress)
    save_figure(rows, out / "bench.html", include_plotlyjs=True if args.inline_js else "cdn")
    modes = MODES if args.train else MODES[:1]
    text = "".join(f"\n{mode}: {RATIO_LEGEND}\n\n{ratio_markdown(rows, mode)}\n" for mode in modes)
    (out / "ratios.md").write_text(f"{_stamp()}\n{text}\nraw\n\n{results_markdown(rows)}\n")
    print(text)
    failed = [r for r in rows if r["status"] != "ok"]
    print(f"{len(rows) - len(failed)} ok, {len(failed)} not ok; wrote {out / 'bench.csv'}, {out / 'bench.html'}, "
          f"{out / 'ratios.md'}")
    return 1 if failed else 0


def _check_up_front(parser: argparse.ArgumentParser, args, out: Path) -> None:
    """Every check that needs no measurement, before anything runs or is written: exit 2 naming the flag."""
    from ..train.folder import check_creatable

    checks = {"--threads": lambda: args.threads is None or check_threads(args.threads),
              "--device": lambda: check_device(args.device),
              **{f"--{flag}": lambda name=name: check_distinct("", getattr(args, name))
                 for flag, name in (("depth", "depth"), ("mixer", "mixer"), ("resolution", "resolution"),
                                    ("grid-sizes", "sides"))},
              "--out": lambda: check_creatable(out, "folder")}
    for flag, check in checks.items():
        try:
            check()
        except ValueError as err:
            parser.error(f"argument {flag}: {err}")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.one:
        from .runner import one_main

        return one_main(args.one)
    if args.device is None:
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    out = Path(args.out)
    _check_up_front(parser, args, out)
    out.mkdir(parents=True, exist_ok=True)
    return _operator_main(args, out) if args.operator else _model_main(args, out)
