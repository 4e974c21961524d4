"""Fair accuracy sweep on Fashion-MNIST: tune every mixer on a validation split with the same budget, then
mixers × depth forms × seeds at 28² (patch 4, a 7×7 token grid) and two depth forms at patch 2 (14×14).

Phases, in order (one command runs them all; each run is one `python -m ssog_lab train` process):
  tune    per mixer, the same number of trials over lr, the atom lr scale (SSoG only) and heads/atoms, trained
          on the training set minus a held-out validation fraction (the same images for every run), discrete
          depth, seed 0; the best validation accuracy picks that mixer's hyper-parameters;
  main    mixers × {discrete, looped, ode} × seeds at patch 4 with the tuned hyper-parameters, on the full
          training set, evaluated once on the test set;
  patch2  at patch 2 (196 tokens, the paper's token count at 224²), the same tuned hyper-parameters: every mixer in
          the discrete form, and SDPA, fixed and steered SSoG in the looped form (the paper's largest accuracy
          claim), × seeds. The ODE form is not run at patch 2: trained as a solution of its ODE (the default solver's
          32 evaluations of f) it would cost 8× a discrete run (the CPU budget: accuracy_fashion/plan.md; the ODE
          form at 14×14 tokens is experiments.ode_solutions's);
  horizon SDPA, fixed and steered SSoG, discrete, seed 0, with twice the epochs: if they gain clearly over the main
          rows, the main recipe stopped before the curves flattened (the report shows both side by side);
  atom_lr each SSoG mixer's tuned configuration with the atom learning-rate scale it was not tuned to (1 or 10),
          on the tuning's validation split: the controlled evidence for the atom parameter group;
  heads   steered SSoG's tuned configuration with the nano default head count (2), which the tuning did not draw.
Beside training (`measure.py`):
  nfe     each ODE run of main and patch2, as soon as it has finished: dopri5's NFE at rtol 1e-3 and 1e-5
          (atol = rtol) on the first 256 test images, into RUN/nfe.json (checkpoints are not committed, so it
          is measured while the checkpoint is there; a later call fills in any that a finished run lacks);
  speed   once the final runs are done (no training beside it): inference images/s of every model (the final
          configurations, then the tuning trials' other heads/atoms) at 28² and 112² (4×, the same patch), one
          single-thread `ssog_lab.bench` process each, into speed.csv beside RUNS (one already there is skipped).
The main grid, the horizon and the variations go first, seed by seed (every main cell's seed 0 first), then patch 2.
Runs go in RUNS/<phase>/<name>/ (RUNS: docs/results/accuracy_fashion/runs). `summary.json` from the train CLI
marks a run done: it is skipped on the next call. A folder with a checkpoint but no summary is resumed (one with
metrics only is started afresh). A run that exited with an error leaves `failed.json` and is retried only with
--retry-failed (a tuning trial that diverged ranks last). `--jobs 2` runs two single-thread processes at once (one
per core); every start and end is appended to RUNS/sweep.log.
`report` writes the markdown tables (`report.py`), with the goals' verdicts computed from them.

    python scripts/fashion_sweep.py run --dry-run       # print every command, run nothing
    python scripts/fashion_sweep.py run --only 'patch2/looped/*'   # only the runs whose phase/name matches
    python scripts/fashion_sweep.py run                 # tune, then main and patch2 (resumable), NFE, speed
    python scripts/fashion_sweep.py nfe                 # only the NFE of finished ODE runs with a checkpoint
    python scripts/fashion_sweep.py speed [--dry-run]   # only the inference throughput (speed.csv)
    python scripts/fashion_sweep.py report              # tables into docs/results/accuracy_fashion/README.md
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import itertools
import json
import os
import random
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ... import data, models
from ...bench.measure import git_commit, machine
from .. import _jobs
from . import measure, plan, report

MIXERS = ("sdpa", "axial", "ssog", "ssog-steered")
# Each depth form's train flags, from its ViTConfig fields (`plan.DEPTH_FIELDS`: the ODE form's one RK4 step).
DEPTHS = {depth: [arg for key, value in fields.items() for arg in ("--set", f"{key}={value}")]
          for depth, fields in plan.DEPTH_FIELDS.items()}
RUNS = Path("docs/results/accuracy_fashion/runs")  # tracked: a sweep spans sessions; .gitignore drops checkpoints
TRAIN_IMAGES = 60_000  # Fashion-MNIST's training split
PATCH2_EPOCHS = 3  # 196 tokens cost several times more per image than 49 (docs/results/accuracy_fashion/plan.md)
# The tuning grid per mixer; each mixer gets the same number of trials drawn from its own grid.
SEARCH: dict[str, dict[str, tuple]] = {
    "sdpa": {"lr": (1e-3, 2e-3, 4e-3), "heads": (2, 4)},
    "axial": {"lr": (1e-3, 2e-3, 4e-3), "heads": (2, 4)},
    "ssog": {"lr": (1e-3, 2e-3, 4e-3), "atom_lr_scale": (1.0, 10.0, 30.0), "ssog_heads": (8, 16), "atoms": (4, 8)},
    # Steered heads cost time (each evaluates M·(H+W) weights per token, and the steering head predicts
    # heads·atoms·5 values per token): the nano default of 2, twice that, and 1 (one steering shared by every
    # channel, much faster than 4 heads: docs/results/operator_cpu.md times 1, 4 and 24 heads; does accuracy hold?).
    "ssog-steered": {"lr": (1e-3, 2e-3, 4e-3), "atom_lr_scale": (1.0, 10.0, 30.0), "ssog_heads": (1, 2, 4)},
}


@dataclasses.dataclass(frozen=True)
class Recipe:
    """What every run of a phase shares (the train CLI's flags)."""

    epochs: int = 6  # sized in docs/results/accuracy_fashion/plan.md
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
    return ["--preset", plan.PRESET, "--depth", depth, "--mixer", mixer, *DEPTHS[depth],
            "--set", f"image_size={plan.IMAGE_SIZE}",
            "--set", f"patch_size={patch}", "--dataset", "fashion-mnist", "--data-dir", str(data_dir)]


def validation_run(phase: str, name: str, mixer: str, hp: dict, recipe: Recipe, validation_fraction: float,
                   data_dir: Path, labels: dict) -> Run:
    """A discrete, patch-4, seed-0 run that trains on the training set minus the held-out validation images (the
    same for every run) and is judged on them: a tuning trial or an ablation."""
    return Run(phase, name, [*model_argv(mixer, "discrete", 4, data_dir), *hyper_argv(hp), *recipe.argv(),
                             "--validation-fraction", str(validation_fraction), "--seed", "0"],
               TRAIN_IMAGES - round(TRAIN_IMAGES * validation_fraction), {"mixer": mixer, **labels, **hp})


def tune_runs(recipe: Recipe, n_trials: int, validation_fraction: float, data_dir: Path) -> list[Run]:
    return [validation_run("tune", f"{mixer}/t{i}", mixer, hp, recipe, validation_fraction, data_dir, {"trial": i})
            for mixer in MIXERS for i, hp in enumerate(trials(mixer, n_trials))]


ATOM_LR_SCALES = (1.0, 10.0)  # the atom learning-rate ablation: atoms at the base lr against 10× it
# Validation runs that change one hyper-parameter of a tuned configuration: phase -> (the key it varies, its
# values per mixer). atom_lr: the evidence for the atom parameter group; heads: the nano default steered head count
# (`models.default_ssog_heads`), which the tuning's random draw did not try.
VARIATIONS: dict[str, tuple[str, str, dict[str, tuple]]] = {  # phase -> (key, run-name prefix, values per mixer)
    "atom_lr": ("atom_lr_scale", "x", {mixer: ATOM_LR_SCALES for mixer in plan.SSOG_MIXERS}),
    "heads": ("ssog_heads", "h", {"ssog-steered": (models.default_ssog_heads(models.PRESETS[plan.PRESET]["dim"],
                                                                             "ssog-steered"),)}),
}


def variation_runs(recipe: Recipe, validation_fraction: float, hyper: dict[str, dict], data_dir: Path) -> list[Run]:
    """Each mixer's tuned configuration with one hyper-parameter at each of its VARIATIONS values that the tuning did
    not pick, on the tuning's validation split: the varied key is the only difference from the winning trial (the
    random draw never trained a winner with another value)."""
    return [validation_run(phase, f"{mixer}/{prefix}{value:g}", mixer, {**hyper[mixer], key: value}, recipe,
                           validation_fraction, data_dir, {"depth": "discrete", "patch": 4, "seed": 0})
            for phase, (key, prefix, values) in VARIATIONS.items() for mixer, options in values.items()
            for value in options if value != hyper[mixer].get(key)]


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


HORIZON_MIXERS = ("sdpa", "ssog", "ssog-steered")  # the baseline and both SSoG variants


def final_runs(recipe: Recipe, patch2_recipe: Recipe, seeds: list[int], hyper: dict[str, dict],
               data_dir: Path, validation_fraction: float = 0.1) -> list[Run]:
    """The main grid at patch 4, the discrete and looped forms at patch 2, the horizon check and the atom learning-rate
    ablation, each mixer with its tuned hyper-parameters. The main grid, the horizon check and the ablation go
    first, seed by seed (every main cell's seed 0, the horizon, the ablation, then every seed 1, ...), then patch 2
    seed by seed: a sweep stopped partway has every main cell at least once, and the longest runs (patch 2; their
    CPU budget is in accuracy_fashion/plan.md) do not hold up the main grid."""
    out = variation_runs(recipe, validation_fraction, hyper, data_dir) if all(hyper.values()) else []
    horizon = dataclasses.replace(recipe, epochs=2 * recipe.epochs)
    for phase, patch, depths, mixers, run_seeds, rec in (
            ("main", 4, tuple(DEPTHS), MIXERS, seeds, recipe),
            ("patch2", 2, ("discrete",), MIXERS, seeds, patch2_recipe),
            ("patch2", 2, ("looped",), HORIZON_MIXERS, seeds, patch2_recipe),
            ("horizon", 4, ("discrete",), HORIZON_MIXERS, seeds[:1], horizon)):
        for depth, mixer, seed in itertools.product(depths, mixers, run_seeds):
            out.append(Run(phase, f"{depth}/{mixer}/s{seed}",
                           [*model_argv(mixer, depth, patch, data_dir), *hyper_argv(hyper[mixer]), *rec.argv(),
                            "--seed", str(seed)],
                           TRAIN_IMAGES, {"mixer": mixer, "depth": depth, "patch": patch, "seed": seed,
                                          **hyper[mixer]}))
    return sorted(out, key=lambda run: (run.phase == "patch2", run.labels["seed"], run.phase in VARIATIONS))


# ------------------------------------------------------------------------------------------ execution

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
            retry_failed: bool = False, after: Callable[[Run], None] | None = None) -> int:
    """Run every run that has no summary.json (nor failed.json, unless retry_failed), `jobs` single-thread
    processes at a time; `after(run)` is called when a run has finished without error (e.g. to measure its
    NFE while its checkpoint is there). Returns the number of runs that failed now (each logged with its exit
    status and recorded in failed.json; its output is in its folder's train.log)."""
    pending = [run for run in runs if read_summary(root, run) is None and
               (retry_failed or read_failure(root, run) is None)]
    log(f"{runs[0].phase if runs else '-'}: {len(pending)} runs to do, {len(runs) - len(pending)} done or failed")
    if dry_run:
        for run in pending:
            print(shlex.join(command(root, run)))
        return 0
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    host = {**{k: v for k, v in machine().items() if k in ("cpu_model", "cpu_vendor", "cpu_flags")}, "threads": 1}
    active: list[tuple[Run, subprocess.Popen, float]] = []
    failed = 0
    while pending or active:
        while pending and len(active) < jobs:
            run = pending.pop(0)
            folder = root / run.phase / run.name
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "failed.json").unlink(missing_ok=True)
            argv = command(root, run)
            shown = shlex.join(["python", *argv[1:]])  # recorded without this machine's interpreter path
            record = {"command": shown, "commit": git_commit(),
                      "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": host,
                      "train_images": run.train_images, "labels": run.labels}
            (folder / "run.json").write_text(json.dumps(record, indent=1) + "\n")
            log(f"start {run.phase}/{run.name}: {shown}")
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
            if process.returncode == 0 and after is not None:
                after(run)
    return failed


# ------------------------------------------------------------------------------------------ CLI

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=("run", "report", "nfe", "speed"))
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
    p.add_argument("--only", nargs="+", metavar="PATTERN", default=None,
                   help="run, measure and report only the final runs whose PHASE/NAME matches one of these "
                   "shell patterns, e.g. 'patch2/looped/*' (tuning always runs first)")
    p.add_argument("--retry-failed", action="store_true", help="run again the runs (and speed configurations) "
                   "that exited with an error")
    p.add_argument("--report-out", type=Path, default=Path("docs/results/accuracy_fashion/README.md"))
    p.add_argument("--speed-batch", type=int, default=measure.SPEED_BATCH,
                   help="images per timed batch of the speed step")
    p.add_argument("--speed-out", type=Path, default=None, help="the speed step's CSV (default: "
                   f"{measure.SPEED_FILE} beside the runs folder; the report also reads every "
                   "speed_*.csv beside it: the same measurements on another CPU)")
    return p


def _logger(args: argparse.Namespace) -> Callable[[str], None]:
    """Print a time-stamped line and append it to RUNS/sweep.log (print only with --dry-run)."""
    def log(message: str) -> None:
        line = f"{time.strftime('%Y-%m-%d %H:%M:%S')} {message}"
        print(line, flush=True)
        if not args.dry_run:
            args.runs.mkdir(parents=True, exist_ok=True)
            with open(args.runs / "sweep.log", "a") as f:
                f.write(line + "\n")
    return log


def selected(run: Run, patterns: list[str] | None) -> bool:
    """Whether `run` is one of --only's runs (every run without --only)."""
    return patterns is None or any(fnmatch.fnmatchcase(f"{run.phase}/{run.name}", p) for p in patterns)


def speed_path(args: argparse.Namespace) -> Path:
    return args.speed_out or args.runs.parent / measure.SPEED_FILE


def nfe(args: argparse.Namespace, runs: list[Run], log: Callable[[str], None]) -> int:
    """The NFE step (nfe.json for finished ODE runs that still have their checkpoint); returns failures."""
    return measure.nfe_step(args.runs, runs, args.data_dir, log, args.dry_run,
                                    commit=git_commit())


def speed(args: argparse.Namespace, runs: list[Run], log: Callable[[str], None]) -> int:
    """The speed step (inference images/s of every model of `runs` into speed.csv); returns rows not ok."""
    return measure.speed_step(speed_path(args), runs, log, args.dry_run, args.retry_failed,
                                      args.speed_batch)


def run_all(args: argparse.Namespace, tuning: list[Run], finals_of: Callable[[dict], list[Run]],
            log: Callable[[str], None]) -> int:
    """tune → main, patch2, horizon (each ODE run's NFE as soon as it finishes, and any a previous call
    missed) → speed. Returns the exit status."""
    failed = execute(args.runs, tuning, args.jobs, args.dry_run, log, args.retry_failed)
    hyper = best_hyper(args.runs, tuning)
    if hyper is None:
        later = len(finals_of({m: {} for m in MIXERS}))
        log(f"tuning not finished (or --dry-run): the {later} main, patch2 and horizon runs wait for it")
        return 1 if failed else 0
    log("tuned: " + json.dumps(hyper))
    finals = finals_of(hyper)
    failed += nfe(args, finals, log)

    def after(run: Run) -> None:
        nonlocal failed
        if measure.nfe_pending(args.runs, [run]):
            failed += nfe(args, [run], log)

    failed += execute(args.runs, finals, args.jobs, args.dry_run, log, args.retry_failed, after=after)
    failed += speed(args, finals + tuning, log)  # when no training runs beside it
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # Checked before anything runs: a bad value found by the child runs would surface hours in (tuning that
    # scored on the test set, or every trial failed and the first one picked).
    _jobs.check_run_flags(parser, args.jobs, args.seeds)
    for flag, value in (("--speed-batch", args.speed_batch), ("--trials", args.trials), ("--epochs", args.epochs),
                        ("--patch2-epochs", args.patch2_epochs)):
        if value < 1:
            parser.error(f"{flag} must be ≥ 1, got {value}")
    if not 0 < args.validation_fraction < 0.5:
        parser.error(f"--validation-fraction must be in (0, 0.5): the tuning is scored on it, got "
                     f"{args.validation_fraction}")
    recipe, patch2_recipe = Recipe(epochs=args.epochs), Recipe(epochs=args.patch2_epochs)
    tuning = tune_runs(recipe, args.trials, args.validation_fraction, args.data_dir)
    log = _logger(args)

    def finals_of(hyper: dict[str, dict]) -> list[Run]:
        runs = final_runs(recipe, patch2_recipe, args.seeds, hyper, args.data_dir, args.validation_fraction)
        return [run for run in runs if selected(run, args.only)]

    hyper = best_hyper(args.runs, tuning)
    finals = finals_of(hyper) if hyper else []
    if args.action == "report":
        main_speed = speed_path(args)
        others = tuple(sorted(p for p in main_speed.parent.glob("speed_*.csv") if p != main_speed))
        text = report.report(args.runs, tuning, finals, main_speed, others)
        args.report_out.parent.mkdir(parents=True, exist_ok=True)
        args.report_out.write_text(text)
        print(text)
        return 0
    if args.action in ("nfe", "speed"):
        if not finals:
            log(f"{args.action}: tuning not finished, so there are no configurations to measure yet")
            return 0
        failed = nfe(args, finals, log) if args.action == "nfe" else speed(args, finals + tuning, log)
        return 1 if failed else 0
    return run_all(args, tuning, finals_of, log)


if __name__ == "__main__":
    sys.exit(main())
