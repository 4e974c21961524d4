"""Matched accuracy comparison on the embedded digits: mixers × depth forms × seeds, plus an SSoG head-count /
initialization probe. Each run is exactly one `python -m ssog_lab train` command (printed, and stored with
its result), executed in this process one after another; results are appended to a JSONL file, so an
interrupted sweep continues where it stopped. `--report` turns the JSONL into the markdown tables.

    OMP_NUM_THREADS=1 python scripts/accuracy_sweep.py --out docs/results/accuracy.jsonl
    python scripts/accuracy_sweep.py --out docs/results/accuracy.jsonl --report
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import time
from pathlib import Path

import torch

from ssog_lab import train
from ssog_lab.bench.report import markdown_table

MIXERS = ("sdpa", "ssog", "ssog-steered")
DEPTHS = {"discrete": [], "looped": [],
          # one RK4 step over [0, T = layers]: 4 evaluations of f, the compute of 4 discrete layers
          "ode": ["--set", "ode_method=rk4", "--set", "ode_step_size=4.0"]}
COLUMNS = ("run", "test accuracy % (mean ± std)", "per seed", "parameters", "train s (mean)")
PROBE = {"heads2-spread0": ["--set", "ssog_heads=2", "--set", "ssog_init_spread=0.0"],
         "heads2-spread2": ["--set", "ssog_heads=2", "--set", "ssog_init_spread=2.0"],
         "heads16-spread0": ["--set", "ssog_heads=16", "--set", "ssog_init_spread=0.0"],
         "heads16-spread2": ["--set", "ssog_heads=16", "--set", "ssog_init_spread=2.0"]}


def runs(recipe: list[str], seeds: list[int]) -> list[tuple[str, list[str]]]:
    """(name, train argv) for the main comparison and the probe."""
    out = []
    for seed in seeds:
        for depth, extra in DEPTHS.items():
            for mixer in MIXERS:
                out.append((f"main/{depth}/{mixer}/s{seed}",
                            ["--preset", "nano", "--depth", depth, "--mixer", mixer, *extra, *recipe,
                             "--seed", str(seed)]))
        for variant, extra in PROBE.items():
            out.append((f"probe/{variant}/s{seed}",
                        ["--preset", "nano", "--depth", "discrete", "--mixer", "ssog", *extra, *recipe,
                         "--seed", str(seed)]))
    return out


def sweep(out: Path, recipe: list[str], seeds: list[int], run_root: Path) -> None:
    done = {json.loads(line)["name"] for line in out.read_text().splitlines()} if out.exists() else set()
    for name, argv in runs(recipe, seeds):
        if name in done:
            continue
        argv = [*argv, "--out", str(run_root / name), "--no-progress", "--log-every", "1000"]
        print("python -m ssog_lab train " + shlex.join(argv), flush=True)
        start = time.perf_counter()
        if train.main(argv) != 0:
            raise SystemExit(f"run {name} failed")
        summary = json.loads((run_root / name / "summary.json").read_text())
        record = {"name": name, **summary, "wall_s": time.perf_counter() - start,
                  "command": "python -m ssog_lab train " + shlex.join(argv), "threads": torch.get_num_threads()}
        with open(out, "a") as f:
            f.write(json.dumps(record) + "\n")


def report(out: Path) -> str:
    """Markdown tables: mean ± std of test accuracy over seeds, parameters, mean training seconds."""
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r["name"].rsplit("/", 1)[0], []).append(r)

    def line(key: str, label: str) -> dict:
        g = groups[key]
        acc = [100 * r["test_accuracy"] for r in g]
        std = statistics.stdev(acc) if len(acc) > 1 else float("nan")
        return {"run": label, "test accuracy % (mean ± std)": f"{statistics.mean(acc):.2f} ± {std:.2f}",
                "per seed": ", ".join(f"{a:.1f}" for a in acc), "parameters": f"{g[0]['parameters']:,}",
                "train s (mean)": f"{statistics.mean(r['train_seconds'] for r in g):.0f}"}

    def table(lines: list[dict]) -> str:
        return markdown_table(lines, {name: name for name in COLUMNS}, align="lrlrr")

    main = [line(f"main/{d}/{m}", f"{d} / {m}") for d in DEPTHS for m in MIXERS if f"main/{d}/{m}" in groups]
    probe = [line(f"probe/{v}", f"ssog {v}") for v in PROBE if f"probe/{v}" in groups]
    default = "main/discrete/ssog"
    if default in groups:
        probe.append(line(default, "ssog default (heads 8, spread 2)"))
    return "\n".join(["### Mixers × depth forms", "", table(main), "", "### Fixed-SSoG heads and init (discrete)",
                      "", table(probe)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/results/accuracy.jsonl"))
    parser.add_argument("--runs", type=Path, default=Path("runs/accuracy"), help="run folders")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--recipe", default="--set image_size=16 --epochs 3 --batch-size 64 --lr 2e-3 "
                        "--warmup-epochs 0.5 --no-augment", help="training arguments shared by every run")
    parser.add_argument("--report", action="store_true", help="print the markdown tables and exit")
    args = parser.parse_args()
    if args.report:
        print(report(args.out))
        return
    sweep(args.out, shlex.split(args.recipe), args.seeds, args.runs)
    print(report(args.out))


if __name__ == "__main__":
    main()
