"""Fair accuracy sweep on Fashion-MNIST: tune every mixer on a validation split with the same budget, then
mixers × depth forms × seeds at 28² (patch 4, a 7×7 token grid) and one depth form at patch 2 (14×14).

Phases, in order (one command runs them all; each run is one `python -m ssog_lab train` process):
  tune    per mixer, the same number of trials over lr, the atom lr scale (SSoG only) and heads/atoms, trained
          on the training set minus a held-out validation fraction (the same images for every run), discrete
          depth, seed 0; the best validation accuracy picks that mixer's hyper-parameters;
  main    mixers × {discrete, looped, ode} × seeds at patch 4 with the tuned hyper-parameters, on the full
          training set, evaluated once on the test set;
  patch2  mixers × the discrete form × seeds at patch 2 (196 tokens), the same tuned hyper-parameters;
  horizon SDPA and steered SSoG, discrete, seed 0, with twice the epochs: if they gain clearly over the main
          rows, the main recipe stopped before the curves flattened (the report shows both side by side).
Runs go in RUNS/<phase>/<name>/ (RUNS: docs/results/accuracy_fashion/runs). `summary.json` from the train CLI
marks a run done: it is skipped on the next call. A folder with a checkpoint but no summary is resumed (one with
metrics only is started afresh). A run that exited with an error leaves `failed.json` and is retried only with
--retry-failed (a tuning trial that diverged ranks last). `--jobs 2` runs two single-thread processes at once (one
per core); every start and end is appended to RUNS/sweep.log.
`report` writes the markdown tables.

    python scripts/fashion_sweep.py run --dry-run       # print every command, run nothing
    python scripts/fashion_sweep.py run                 # tune, then main and patch2 (resumable)
    python scripts/fashion_sweep.py report              # tables into docs/results/accuracy_fashion.md
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import os
import random
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ssog_lab import data

MIXERS = ("sdpa", "axial", "ssog", "ssog-steered")
SSOG_MIXERS = ("ssog", "ssog-steered")
# ODE: dx/dt = f(x) on [0, T = layers] with one fixed RK4 step, 4 evaluations of f (the compute of 4 blocks).
DEPTHS = {"discrete": [], "looped": [], "ode": ["--set", "ode_method=rk4", "--set", "ode_step_size=4.0"]}
RUNS = Path("docs/results/accuracy_fashion/runs")  # tracked: a sweep spans sessions; .gitignore drops checkpoints
TRAIN_IMAGES = 60_000  # Fashion-MNIST's training split
PATCH2_EPOCHS = 3  # 196 tokens cost 3–7× more per image (docs/results/accuracy_plan.md)
# The tuning grid per mixer; each mixer gets the same number of trials drawn from its own grid.
SEARCH: dict[str, dict[str, tuple]] = {
    "sdpa": {"lr": (1e-3, 2e-3, 4e-3), "heads": (2, 4)},
    "axial": {"lr": (1e-3, 2e-3, 4e-3), "heads": (2, 4)},
    "ssog": {"lr": (1e-3, 2e-3, 4e-3), "atom_lr_scale": (1.0, 10.0, 30.0), "ssog_heads": (8, 16), "atoms": (4, 8)},
    # Steered heads cost time (each evaluates M·(H+W) weights per token, and the steering head predicts
    # heads·atoms·5 values per token): the nano default of 2 and twice that (models.ViTConfig gives the timings).
    "ssog-steered": {"lr": (1e-3, 2e-3, 4e-3), "atom_lr_scale": (1.0, 10.0, 30.0), "ssog_heads": (2, 4)},
}


@dataclasses.dataclass(frozen=True)
class Recipe:
    """What every run of a phase shares (the train CLI's flags)."""

    epochs: int = 6  # sized in docs/results/accuracy_plan.md
    batch_size: int = 128
    warmup_epochs: float = 1.0
    weight_decay: float = 0.05
    augment: bool = True  # random 2-pixel shifts and horizontal flips

    def argv(self) -> list[str]:
        return ["--epochs", str(self.epochs), "--batch-size", str(self.batch_size), "--warmup-epochs",
                str(self.warmup_epochs), "--weight-decay", str(self.weight_decay),
                "--augment" if self.augment else "--no-augment"]


@dataclasses.dataclass(frozen=True)
class Run:
    phase: str
    name: str  # unique within the phase; also the run folder's relative path
    argv: list[str]  # train CLI arguments without --out
    train_images: int  # images per epoch (for images/s)
    labels: dict  # what the report groups by: mixer, depth, patch, seed, trial, hyper-parameters


def space(mixer: str) -> list[dict]:
    """Every combination of `mixer`'s grid, as {name: value} dicts, in a fixed order."""
    grid = SEARCH[mixer]
    return [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]


def trials(mixer: str, n: int, seed: int = 0) -> list[dict]:
    """n distinct hyper-parameter sets for `mixer`, drawn from its grid with a seed of its own (all of the grid
    when n equals its size). n must fit every mixer's grid, so each mixer gets exactly n trials."""
    smallest = min(len(space(m)) for m in MIXERS)
    if not 1 <= n <= smallest:
        raise ValueError(f"trials must be in [1, {smallest}] (the smallest grid), got {n}")
    return random.Random(f"{seed}/{mixer}").sample(space(mixer), n)


def hyper_argv(hp: dict) -> list[str]:
    """Train CLI flags for a hyper-parameter set."""
    out = []
    for key, value in hp.items():
        if key == "lr":
            out += ["--lr", str(value)]
        elif key == "atom_lr_scale":
            out += ["--atom-lr-scale", str(value)]
        else:  # a ViTConfig field: heads, ssog_heads, atoms
            out += ["--set", f"{key}={value}"]
    return out


def model_argv(mixer: str, depth: str, patch: int, data_dir: Path) -> list[str]:
    return ["--preset", "nano", "--depth", depth, "--mixer", mixer, *DEPTHS[depth], "--set", "image_size=28",
            "--set", f"patch_size={patch}", "--dataset", "fashion-mnist", "--data-dir", str(data_dir)]


def tune_runs(recipe: Recipe, n_trials: int, validation_fraction: float, data_dir: Path) -> list[Run]:
    held_out = round(TRAIN_IMAGES * validation_fraction)
    return [Run("tune", f"{mixer}/t{i}",
                [*model_argv(mixer, "discrete", 4, data_dir), *hyper_argv(hp), *recipe.argv(),
                 "--validation-fraction", str(validation_fraction), "--seed", "0"],
                TRAIN_IMAGES - held_out, {"mixer": mixer, "trial": i, **hp})
            for mixer in MIXERS for i, hp in enumerate(trials(mixer, n_trials))]


def read_summary(root: Path, run: Run) -> dict | None:
    path = root / run.phase / run.name / "summary.json"
    return json.loads(path.read_text()) if path.is_file() else None


def read_failure(root: Path, run: Run) -> dict | None:
    path = root / run.phase / run.name / "failed.json"
    return json.loads(path.read_text()) if path.is_file() else None


def best_hyper(root: Path, tuning: list[Run]) -> dict[str, dict] | None:
    """{mixer: the hyper-parameters of its best validation accuracy} once every trial has finished (a failed
    trial, e.g. one that diverged, ranks last), else None."""
    best: dict[str, tuple[float, dict]] = {}
    for run in tuning:
        summary = read_summary(root, run)
        if summary is None and read_failure(root, run) is None:
            return None
        accuracy, mixer = (summary["val_accuracy"] if summary else -1.0), run.labels["mixer"]
        hp = {k: v for k, v in run.labels.items() if k not in ("mixer", "trial")}
        if mixer not in best or accuracy > best[mixer][0]:  # ties keep the earlier trial
            best[mixer] = accuracy, hp
    return {mixer: hp for mixer, (_, hp) in best.items()}


HORIZON_MIXERS = ("sdpa", "ssog-steered")


def final_runs(recipe: Recipe, patch2_recipe: Recipe, seeds: list[int], hyper: dict[str, dict],
               data_dir: Path) -> list[Run]:
    """The main grid at patch 4, the discrete form at patch 2 and the horizon check, each mixer with its tuned
    hyper-parameters."""
    out = []
    horizon = dataclasses.replace(recipe, epochs=2 * recipe.epochs)
    for phase, patch, depths, mixers, run_seeds, rec in (
            ("main", 4, tuple(DEPTHS), MIXERS, seeds, recipe),
            ("patch2", 2, ("discrete",), MIXERS, seeds, patch2_recipe),
            ("horizon", 4, ("discrete",), HORIZON_MIXERS, seeds[:1], horizon)):
        for depth, mixer, seed in itertools.product(depths, mixers, run_seeds):
            out.append(Run(phase, f"{depth}/{mixer}/s{seed}",
                           [*model_argv(mixer, depth, patch, data_dir), *hyper_argv(hyper[mixer]), *rec.argv(),
                            "--seed", str(seed)],
                           TRAIN_IMAGES, {"mixer": mixer, "depth": depth, "patch": patch, "seed": seed,
                                          **hyper[mixer]}))
    return out


# ------------------------------------------------------------------------------------------ execution

def _commit() -> str | None:
    """The checkout's commit (a sweep spans sessions: each run records the code it ran), None outside git."""
    try:
        return subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def command(root: Path, run: Run) -> list[str]:
    """The full train command of `run`: --resume when an interrupted attempt left a checkpoint, --overwrite when
    it died before its first checkpoint (only metrics, nothing finished to keep; the train CLI refuses to
    write into a folder holding a run without one of the two)."""
    folder = root / run.phase / run.name
    if (folder / "checkpoint.pt").is_file():
        again = ["--resume"]
    elif any((folder / name).is_file() for name in ("metrics.jsonl", "metrics.csv")):
        again = ["--overwrite"]
    else:
        again = []
    return [sys.executable, "-m", "ssog_lab", "train", *run.argv, "--out", str(folder), "--no-progress",
            "--log-every", "100", *again]


def execute(root: Path, runs: list[Run], jobs: int, dry_run: bool, log: Callable[[str], None],
            retry_failed: bool = False) -> int:
    """Run every run that has no summary.json (nor failed.json, unless retry_failed), `jobs` single-thread
    processes at a time. Returns the number of runs that failed now (each logged with its exit status and
    recorded in failed.json; its output is in its folder's train.log)."""
    pending = [run for run in runs if read_summary(root, run) is None and
               (retry_failed or read_failure(root, run) is None)]
    log(f"{runs[0].phase if runs else '-'}: {len(pending)} runs to do, {len(runs) - len(pending)} done or failed")
    if dry_run:
        for run in pending:
            print(shlex.join(command(root, run)))
        return 0
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    active: list[tuple[Run, subprocess.Popen, float]] = []
    failed = 0
    while pending or active:
        while pending and len(active) < jobs:
            run = pending.pop(0)
            folder = root / run.phase / run.name
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "failed.json").unlink(missing_ok=True)
            argv = command(root, run)
            record = {"command": shlex.join(argv), "commit": _commit(), "started": time.strftime("%Y-%m-%d %H:%M UTC",
                      time.gmtime()), "train_images": run.train_images, "labels": run.labels}
            (folder / "run.json").write_text(json.dumps(record, indent=1) + "\n")
            log(f"start {run.phase}/{run.name}: {shlex.join(argv)}")
            with open(folder / "train.log", "a") as out:
                active.append((run, subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env),
                               time.perf_counter()))
        time.sleep(1.0)
        for item in [a for a in active if a[1].poll() is not None]:
            run, process, start = item
            active.remove(item)
            status = "done" if process.returncode == 0 else f"FAILED (exit {process.returncode})"
            if process.returncode != 0:
                failed += 1
                (root / run.phase / run.name / "failed.json").write_text(json.dumps({"returncode":
                                                                                      process.returncode}) + "\n")
            log(f"{status} {run.phase}/{run.name} in {time.perf_counter() - start:.0f} s")
    return failed


# ------------------------------------------------------------------------------------------ report

def markdown_table(rows: list[dict], columns: list[tuple[str, Callable[[dict], str]]]) -> str:
    """One markdown table: a header per column and each row formatted by the column's function (the only
    table writer of the report, so every table has the same conventions)."""
    aligns = ["---" if i == 0 else "---:" for i in range(len(columns))]
    lines = ["| " + " | ".join(h for h, _ in columns) + " |", "|" + "|".join(aligns) + "|"]
    lines += ["| " + " | ".join(f(row) for _, f in columns) + " |" for row in rows]
    return "\n".join(lines)


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (n − 1; NaN for a single value)."""
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else math.nan


def _pm(mean: float, std: float) -> str:
    return f"{mean:.2f} ± {std:.2f}" if math.isfinite(std) else f"{mean:.2f}"


def train_speed(root: Path, run: Run, summary: dict) -> float:
    """Training images/s of a finished run: the mean of the train CLI's per-epoch rates in metrics.jsonl (they
    survive a resume, while summary.json's train_seconds restarts with the process), else images × epochs /
    train_seconds."""
    path = root / run.phase / run.name / "metrics.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []
    rates = [r["images_per_s"] for r in records if r.get("kind") == "epoch" and r.get("images_per_s")]
    return statistics.mean(rates) if rates else run.train_images * summary["epochs_done"] / summary["train_seconds"]


def group_rows(root: Path, runs: list[Run], keys: tuple[str, ...]) -> list[dict]:
    """One row per distinct `keys` of the finished runs: test accuracy (%) over seeds, parameters, images/s."""
    groups: dict[tuple, list[tuple[Run, dict]]] = {}
    for run in runs:
        summary = read_summary(root, run)
        if summary is not None and summary.get("test_accuracy") is not None:
            groups.setdefault(tuple(run.labels[k] for k in keys), []).append((run, summary))
    rows = []
    for key, members in groups.items():
        accuracy = [100 * s["test_accuracy"] for _, s in members]
        speed = [train_speed(root, r, s) for r, s in members]
        rows.append({**dict(zip(keys, key, strict=True)), "accuracy": mean_std(accuracy), "n": len(members),
                     "per_seed": accuracy, "parameters": members[0][1]["parameters"],
                     "images_per_s": statistics.mean(speed)})
    for row in rows:  # the difference of means to SDPA in the same form, with the std of that difference
        base = next((r for r in rows if r["mixer"] == "sdpa" and all(r[k] == row[k] for k in keys if k != "mixer")),
                    None)
        if base is not None and row is not base:
            (m1, s1), (m0, s0) = row["accuracy"], base["accuracy"]
            row["vs_sdpa"] = m1 - m0, math.sqrt(s1 ** 2 / row["n"] + s0 ** 2 / base["n"])
    return rows


ACCURACY_COLUMNS = [
    ("depth", lambda r: r["depth"]), ("mixer", lambda r: r["mixer"]),
    ("test accuracy % (mean ± sample std)", lambda r: _pm(*r["accuracy"])),
    ("Δ vs SDPA (points)", lambda r: _pm(*r["vs_sdpa"]) if "vs_sdpa" in r else "—"), ("n", lambda r: str(r["n"])),
    ("per seed", lambda r: ", ".join(f"{a:.1f}" for a in r["per_seed"])),
    ("parameters", lambda r: f"{r['parameters']:,}"), ("train images/s", lambda r: f"{r['images_per_s']:.0f}"),
]


def report(root: Path, tuning: list[Run], finals: list[Run]) -> str:
    parts = ["# Fashion-MNIST accuracy: mixers × depth forms (generated by scripts/fashion_sweep.py report)", ""]
    for phase, title in (("main", "28², patch 4 (7×7 tokens)"), ("patch2", "28², patch 2 (14×14 tokens)"),
                         ("horizon", "Horizon check: twice the epochs (28², patch 4, seed 0)")):
        rows = group_rows(root, [r for r in finals if r.phase == phase], ("depth", "mixer"))
        if rows:
            parts += [f"## {title}", "", markdown_table(rows, ACCURACY_COLUMNS), ""]
    trial_rows = []
    for run in tuning:
        summary, failure = read_summary(root, run), read_failure(root, run)
        if summary is not None or failure is not None:
            trial_rows.append({**run.labels, "val": f"{100 * summary['val_accuracy']:.2f}" if summary else
                               f"failed (exit {failure['returncode']})"})
    if trial_rows:
        columns = [("mixer", lambda r: r["mixer"]), ("trial", lambda r: str(r["trial"])),
                   ("hyper-parameters", lambda r: ", ".join(f"{k}={v}" for k, v in r.items()
                                                            if k not in ("mixer", "trial", "val"))),
                   ("validation accuracy %", lambda r: r["val"])]
        parts += ["## Tuning (validation split, discrete, seed 0)", "", markdown_table(trial_rows, columns), ""]
    return "\n".join(parts)


# ------------------------------------------------------------------------------------------ CLI

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=("run", "report"))
    p.add_argument("--runs", type=Path, default=RUNS, help="root of the run folders (finished runs' summaries "
                   "and metrics are committed there; checkpoints are not)")
    p.add_argument("--data-dir", type=Path, default=data.FASHION_MNIST_ROOT)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--trials", type=int, default=6, help="tuning trials per mixer (the same for every mixer)")
    p.add_argument("--validation-fraction", type=float, default=0.1)
    p.add_argument("--epochs", type=int, default=Recipe.epochs, help="epochs of every tune and main run")
    p.add_argument("--patch2-epochs", type=int, default=PATCH2_EPOCHS, help="epochs of the patch-2 runs")
    p.add_argument("--jobs", type=int, default=2, help="single-thread train processes at once")
    p.add_argument("--dry-run", action="store_true", help="print the commands still to run; run nothing")
    p.add_argument("--retry-failed", action="store_true", help="run again the runs that exited with an error")
    p.add_argument("--report-out", type=Path, default=Path("docs/results/accuracy_fashion.md"))
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.jobs < 1:
        raise SystemExit("error: --jobs must be ≥ 1")
    recipe, patch2_recipe = Recipe(epochs=args.epochs), Recipe(epochs=args.patch2_epochs)
    tuning = tune_runs(recipe, args.trials, args.validation_fraction, args.data_dir)

    def log(message: str) -> None:
        line = f"{time.strftime('%Y-%m-%d %H:%M:%S')} {message}"
        print(line, flush=True)
        if not args.dry_run:
            args.runs.mkdir(parents=True, exist_ok=True)
            with open(args.runs / "sweep.log", "a") as f:
                f.write(line + "\n")

    hyper = best_hyper(args.runs, tuning)
    finals = final_runs(recipe, patch2_recipe, args.seeds, hyper, args.data_dir) if hyper else []
    if args.action == "report":
        text = report(args.runs, tuning, finals)
        args.report_out.parent.mkdir(parents=True, exist_ok=True)
        args.report_out.write_text(text)
        print(text)
        return 0
    failed = execute(args.runs, tuning, args.jobs, args.dry_run, log, args.retry_failed)
    hyper = best_hyper(args.runs, tuning)
    if hyper is None:
        later = len(final_runs(recipe, patch2_recipe, args.seeds, {m: {} for m in MIXERS}, args.data_dir))
        log(f"tuning not finished (or --dry-run): the {later} main, patch2 and horizon runs wait for it")
        return 1 if failed else 0
    log("tuned: " + json.dumps(hyper))
    finals = final_runs(recipe, patch2_recipe, args.seeds, hyper, args.data_dir)
    failed += execute(args.runs, finals, args.jobs, args.dry_run, log, args.retry_failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
