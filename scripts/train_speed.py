"""Training-step speed of every mixer against SDPA, side by side in one process: the ratios of issue #26.

    OMP_NUM_THREADS=1 python scripts/train_speed.py                       # the three cases, library defaults
    OMP_NUM_THREADS=1 python scripts/train_speed.py --case nano7 --set atoms=8 --profile
    OMP_NUM_THREADS=1 python scripts/train_speed.py --out docs/results/train_speed_cpu.md  # the results file

A training step is `ssog_lab.bench.measure.train_step` (forward, cross-entropy, backward, AdamW step). Every model
of a case is built and warmed up first; then each round times one step of every mixer, in a rotated order, so
that all mixers share the machine's load. Steps are timed in this process's CPU time (time.process_time: on a
shared machine, time spent waiting for a core does not count; with several threads it adds up their time).
Reported: the median ms per step and images/s, the speed against SDPA (SDPA's time ÷ the mixer's, ≥ 1 means
faster) as the median of the per-round ratios, which a shared machine disturbs less than a ratio of medians, and the
median number of minor page faults per step (mostly first touches of memory the allocator took fresh from the
kernel).
`bench --train` gives images/s and peak memory per configuration, each in its own process; this script gives the
paired ratios. --profile prints torch.profiler's operator table of a few steps per mixer.
"""

from __future__ import annotations

import argparse
import ast
import os
import resource
import shlex
import statistics
import sys
import time
from pathlib import Path

import torch

from ssog_lab.bench.measure import git_commit, machine, train_step
from ssog_lab.bench.timing import paired_speed, rotated
from ssog_lab.models import MIXERS, build_model
from ssog_lab.train.atomic import atomic_write

# name: (preset, ViTConfig overrides, batch); the nano cases are the sweep's 28² grey images at 7×7 and 14×14 tokens.
CASES = {
    "nano7": ("nano", dict(in_chans=1, num_classes=10, image_size=28, patch_size=4), 128),
    "nano14": ("nano", dict(in_chans=1, num_classes=10, image_size=28, patch_size=2), 64),
    "tiny": ("tiny", dict(), 8),
}
MIXER_CHOICES = ("sdpa", "ssog", "ssog-steered", "axial")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--mixer", nargs="+", default=list(MIXER_CHOICES), choices=MIXERS,
                        help="the first is the baseline of the ratios")
    parser.add_argument("--set", nargs="+", default=[], metavar="FIELD=VALUE",
                        help="ViTConfig overrides for the SSoG mixers only (e.g. atoms=8 ssog_heads=16)")
    parser.add_argument("--rounds", type=int, default=7, help="timed steps per mixer")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps per mixer")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="print torch.profiler's table per mixer")
    parser.add_argument("--out", type=Path, help="also write the table, the command and the host to this markdown "
                        "file (refused if it exists, unless --overwrite)")
    parser.add_argument("--overwrite", action="store_true", help="let --out replace an existing file")
    return parser


def _setup(case: str, mixer: str, ssog_overrides: dict):
    """(model, images, labels, AdamW) of one mixer in one case; the same seed for every mixer."""
    preset, overrides, batch = CASES[case]
    torch.manual_seed(0)
    extra = ssog_overrides if mixer.startswith("ssog") else {}
    model = build_model(preset, mixer=mixer, **overrides, **extra).train()
    c = model.config
    images = torch.randn(batch, c.in_chans, c.image_size, c.image_size)
    labels = torch.randint(0, c.num_classes, (batch,))
    return model, images, labels, torch.optim.AdamW(model.parameters())


def _profile(case: str, mixer: str, run) -> None:
    from torch.profiler import profile

    with profile() as prof:
        for _ in range(3):
            run()
    print(f"\n{case} {mixer}: three training steps\n")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))


def measure(case: str, mixers: list[str], ssog_overrides: dict, rounds: int, warmup: int,
            profile: bool = False) -> list[dict]:
    """One row per mixer: median ms per step, images/s, speed against mixers[0] (median of per-round ratios) and
    median minor page faults per step."""
    runs = {}
    for mixer in mixers:
        model, images, labels, optimizer = _setup(case, mixer, ssog_overrides)
        runs[mixer] = lambda m=model, x=images, y=labels, o=optimizer: train_step(m, x, y, o)
        for _ in range(warmup):
            runs[mixer]()
        if profile:
            _profile(case, mixer, runs[mixer])
    times: dict[str, list[float]] = {m: [] for m in mixers}
    faults: dict[str, list[int]] = {m: [] for m in mixers}
    for r in range(rounds):
        for mixer in rotated(mixers, r):
            faulted, start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.process_time()
            runs[mixer]()
            times[mixer].append(time.process_time() - start)
            faults[mixer].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faulted)
    batch = CASES[case][2]
    base = times[mixers[0]]
    return [dict(case=case, mixer=m, ms=1e3 * statistics.median(t), images_per_s=batch / statistics.median(t),
                 speed=paired_speed(base, t),
                 faults=statistics.median(faults[m])) for m, t in times.items()]


def main() -> None:
    args = _parser().parse_args()
    if args.out and args.out.exists() and not args.overwrite:
        sys.exit(f"--out {args.out} exists: pass --overwrite to replace it")
    torch.set_num_threads(args.threads)
    ssog_overrides = {k: ast.literal_eval(v) for k, v in (item.split("=", 1) for item in args.set)}
    rows = []
    for case in args.case:  # the table after all cases: --profile prints while measuring
        rows += measure(case, args.mixer, ssog_overrides, args.rounds, args.warmup, args.profile)
    table = "\n".join([f"| case | mixer | ms / step | images/s | speed ÷ {args.mixer[0]} | page faults / step |",
                       "|---|---|---:|---:|---:|---:|",
                       *(f"| {r['case']} | {r['mixer']} | {r['ms']:.1f} | {r['images_per_s']:.1f} | {r['speed']:.2f} "
                         f"| {r['faults']:.0f} |" for r in rows)])
    print("\n" + table)
    if args.out:
        host = machine()
        # glibc's allocator settings change the page faults (docs/DESIGN.md §3): the command carries them
        malloc_env = "".join(f"{k}={shlex.quote(v)} " for k, v in sorted(os.environ.items()) if k.startswith("MALLOC_"))
        cases = "; ".join(f"{name}: {CASES[name][0]}, {CASES[name][1] or 'defaults'}, batch {CASES[name][2]}"
                          for name in args.case)
        atomic_write(args.out, "\n".join([
            "# Training step against SDPA, side by side (CPU)", "",
            f"Made by `{malloc_env}OMP_NUM_THREADS={args.threads} python scripts/train_speed.py "
            f"{shlex.join(sys.argv[1:])}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
            f"commit `{git_commit()}`.",
            f"Host: {host['cpu_model']} ({host['cpu_flags'] or 'no AVX-512/AMX'}), {host['threads']} thread(s).", "",
            "One training step = forward, cross-entropy, backward and an AdamW step (`bench.measure.train_step`), "
            f"at the library's defaults{' with ' + ' '.join(args.set) + ' for SSoG' if args.set else ''}. "
            f"Every model is warmed up ({args.warmup} steps), then {args.rounds} rounds each time one step of every "
            "mixer in a rotated order, in CPU time. Speed is the median of the per-round ratios (≥ 1: faster "
            f"than {args.mixer[0]}); ms, images/s and minor page faults per step are medians.", "",
            f"Cases: {cases}.", "", table, ""]))


if __name__ == "__main__":
    main()
