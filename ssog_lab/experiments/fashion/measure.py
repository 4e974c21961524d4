"""What the Fashion-MNIST sweep measures beside training (scripts/fashion_sweep.py's `nfe` and `speed` steps).

nfe    dopri5's number of function evaluations (NFE) for each trained ODE model of the `main` and `patch2`
       phases: torchdiffeq, atol = rtol, at rtol 1e-3 and 1e-5, on the first 256 test images solved as one
       batch (torchdiffeq's error norm is taken over the whole batch state, as at inference), counted by the
       model itself (`ViT.nfe`). Written to RUN/nfe.json right after the run finishes, because checkpoints
       are not committed; a finished run whose checkpoint is still there gets it on a later call.
speed  inference throughput (images/s) of every model the sweep trains (the final configurations and the
       tuning trials' heads/atoms, so that tuning has a speed–accuracy table) at the models' own 28² and at 4×
       (112², same patch), one single-thread process per
       configuration through the benchmark's runner (`ssog_lab.bench.run_in_subprocess`), untrained weights
       (speed does not depend on them). Rows go to speed.csv through the benchmark's CSV writer.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

import torch

from ... import bench
from ...bench.measure import git_commit
from ...bench.report import write_csv
from ...ode_cost import solve_logits
from ...train import load_model
from . import plan

NFE_RTOLS = (1e-3, 1e-5)  # dopri5's rtol; atol = rtol
NFE_IMAGES = 256  # the first NFE_IMAGES test images, one batch
NFE_PHASES = ("main", "patch2")  # the phases whose ODE runs get nfe.json
SPEED_FILE = "speed.csv"  # beside the runs folder: docs/results/accuracy_fashion/speed.csv
SPEED_RESOLUTIONS = (28, 112)  # pixels: the models' own and 4× (the same patch: 16× the tokens)
SPEED_BATCH = 64  # images per timed batch
SPEED_TIMEOUT_S = 900.0  # per configuration
# the bench's columns, the patch, the exact model, and the code and time of the measurement
SPEED_COLUMNS = (*bench.COLUMNS, "patch", "overrides", "commit", "measured")


class SweepRun(Protocol):
    """The fields of sweep.Run these steps read."""

    phase: str
    name: str
    argv: list[str]
    train_images: int
    labels: dict


def run_folder(root: Path, run: SweepRun) -> Path:
    return root / run.phase / run.name


# ------------------------------------------------------------------------------------------ NFE

def nfe_pending(root: Path, runs: Iterable[SweepRun]) -> list[SweepRun]:
    """The ODE runs of NFE_PHASES that finished (summary.json), still have their checkpoint and lack nfe.json."""
    return [run for run in runs if run.phase in NFE_PHASES and run.labels.get("depth") == "ode"
            and (run_folder(root, run) / "summary.json").is_file()
            and (run_folder(root, run) / "checkpoint.pt").is_file()
            and not (run_folder(root, run) / plan.NFE_FILE).is_file()]


def first_test_images(data_dir: Path, count: int = NFE_IMAGES) -> tuple[torch.Tensor, torch.Tensor]:
    """The first `count` Fashion-MNIST test images (N, 1, 28, 28), normalized as in training, and labels (N,)."""
    from ssog_lab import data

    test = data.fashion_mnist("test", root=data_dir)
    items = [test[i] for i in range(min(count, len(test)))]
    return torch.stack([image for image, _ in items]), torch.stack([label for _, label in items])


def dopri5_nfe(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor,
               rtols: tuple[float, ...] = NFE_RTOLS) -> dict:
    """NFE of the model's own (training) solver and of dopri5 (torchdiffeq, atol = rtol) at each rtol, each
    solving the ODE on [0, T] for `images` as one batch; with each solve's accuracy on `labels` (fraction) and
    its wall time (seconds, this process's threads). The model is left as it was."""
    trained = model.config
    if trained.depth != "ode":
        raise ValueError(f"model must have depth 'ode', got {trained.depth!r}")

    def solve(**fields) -> dict:
        start = time.perf_counter()
        logits, nfe = solve_logits(model, images, **fields)
        correct = (logits.argmax(-1) == labels).float().mean().item()
        return {"nfe": int(nfe), "accuracy": correct, "seconds": round(time.perf_counter() - start, 3)}

    own = {"method": trained.ode_method, "step_size": trained.ode_step_size, **solve()}
    adaptive = [{"rtol": rtol, "atol": rtol, **solve(ode_method="dopri5", ode_solver="torchdiffeq", ode_rtol=rtol,
                                                     ode_atol=rtol, ode_adjoint=False)} for rtol in rtols]
    return {"end_time": trained.end_time, "trained_solver": own, "dopri5": adaptive}


def write_nfe(folder: Path, images: torch.Tensor, labels: torch.Tensor, **extra) -> dict:
    """Measure `dopri5_nfe` on folder/checkpoint.pt with one thread and write folder/nfe.json (its record)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the other core trains
    try:
        model, _ = load_model(folder / "checkpoint.pt")
        measured = dopri5_nfe(model, images, labels)
    finally:
        torch.set_num_threads(threads)
    record = {"solver": "dopri5 (torchdiffeq), atol = rtol", "images": f"the first {len(images)} test images, "
              "one batch", "n_images": len(images), "threads": 1, **measured,
              "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), **extra}
    (folder / plan.NFE_FILE).write_text(json.dumps(record, indent=1) + "\n")
    return record


def nfe_step(root: Path, runs: Iterable[SweepRun], data_dir: Path, log: Callable[[str], None],
             dry_run: bool = False, **extra) -> int:
    """nfe.json for every run of `nfe_pending`; returns how many failed (logged; retried on the next call)."""
    pending = nfe_pending(root, runs)
    log(f"nfe: {len(pending)} finished ODE runs without nfe.json (with a checkpoint)")
    if dry_run or not pending:
        for run in pending:
            print(f"nfe {run_folder(root, run)}")
        return 0
    images, labels = first_test_images(data_dir)
    failed = 0
    for run in pending:
        try:
            record = write_nfe(run_folder(root, run), images, labels, **extra)
        except Exception as error:  # the sweep goes on; the next call tries again
            failed += 1
            log(f"nfe FAILED {run.phase}/{run.name}: {type(error).__name__}: {error}")
            continue
        log(f"nfe {run.phase}/{run.name}: " + ", ".join(f"rtol {r['rtol']:g}: {r['nfe']}" for r in record["dopri5"]))
    return failed


# ------------------------------------------------------------------------------------------ speed

def speed_model(run: SweepRun) -> tuple[str, str, str, int, dict]:
    """(preset, depth, mixer, patch, model overrides) of a run: its labels' ViTConfig fields (`plan.model_fields`,
    with the data set's channels and classes), what its speed depends on."""
    model = plan.model_fields(run.labels)
    return plan.PRESET, run.labels.get("depth", "discrete"), run.labels["mixer"], model["patch_size"], model


def speed_model_key(run: SweepRun) -> tuple[str, str, int, str]:
    """(depth, mixer, patch, the model's overrides as speed.csv stores them): the speed rows of `run`'s model
    are those whose `speed_key` starts with it."""
    return _model_key(*speed_model(run)[1:])


def _model_key(depth: str, mixer: str, patch: int, model: dict) -> tuple[str, str, int, str]:
    """`speed_model_key` from `speed_model`'s parts (the class count is the data set's, not the model's speed)."""
    return depth, mixer, patch, json.dumps({k: v for k, v in model.items() if k != "num_classes"}, sort_keys=True)


def speed_configs(runs: Iterable[SweepRun], batch: int = SPEED_BATCH,
                  resolutions: tuple[int, ...] = SPEED_RESOLUTIONS) -> list[tuple[int, bench.BenchConfig]]:
    """(patch, BenchConfig) per distinct model of `runs` (`speed_model`: tuning trials with other heads or atoms
    are models of their own) and resolution: inference, one thread, `batch` images."""
    out, seen = [], set()
    for run in runs:
        preset, depth, mixer, patch, model = speed_model(run)
        key = _model_key(depth, mixer, patch, model)
        if key in seen:
            continue
        seen.add(key)
        classes = model.pop("num_classes")
        out += [(patch, bench.BenchConfig(preset=preset, depth=depth, mixer=mixer, resolution=resolution, batch=batch,
                                          num_classes=classes, threads=1, ode_steps=1, overrides=model))
                for resolution in resolutions]
    return out


def speed_key(row: dict) -> tuple:
    """What identifies a speed row: depth, mixer, patch, the exact model (overrides), resolution and batch."""
    return (row["depth"], row["mixer"], int(row["patch"]),
            row["overrides"] if isinstance(row["overrides"], str) else json.dumps(row["overrides"], sort_keys=True),
            int(row["resolution"]), int(row["batch"]))


def read_speed(path: Path) -> list[dict]:
    """The rows of a speed.csv (the bench's reader: numbers parsed), [] when there is none."""
    if not path.is_file():
        return []
    return [dict(row, patch=int(row["patch"])) for row in bench.load_csv(path)]


def bench_command(config: bench.BenchConfig) -> str:
    """The child command the bench's runner starts for `config` (what --dry-run prints)."""
    return shlex.join([sys.executable, "-m", "ssog_lab.bench", "--one", json.dumps(config.payload())])


def speed_step(path: Path, runs: Iterable[SweepRun], log: Callable[[str], None], dry_run: bool = False,
               retry_failed: bool = False, batch: int = SPEED_BATCH, timeout: float | None = SPEED_TIMEOUT_S,
               measure: Callable[..., dict] = bench.run_in_subprocess) -> int:
    """Measure every configuration of `speed_configs` that speed.csv (`path`) lacks (or holds as failed, with
    retry_failed), one fresh process each; the file is rewritten after each row. Returns how many are not ok."""
    rows = read_speed(path)
    done = {speed_key(r) for r in rows if r["status"] == "ok" or not retry_failed}
    pending = [(patch, config) for patch, config in speed_configs(runs, batch)
               if speed_key({**config.payload(), "patch": patch}) not in done]
    log(f"speed: {len(pending)} configurations to measure, {len(rows)} in {path}")
    if dry_run:
        for _, config in pending:
            print(bench_command(config))
        return 0
    failed = 0
    for patch, config in pending:
        row = {**measure(config, timeout=timeout), "patch": patch,
               "overrides": json.dumps(config.overrides, sort_keys=True), "commit": git_commit(),
               "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
        rows = [r for r in rows if speed_key(r) != speed_key(row)] + [row]
        write_csv(rows, path, SPEED_COLUMNS)
        failed += row["status"] != "ok"
        log(f"speed {config.depth} {config.mixer} patch {patch} {config.resolution}²: "
            + (f"{float(row['images_per_s']):.1f} images/s" if row["status"] == "ok" else row["status"]))
    return failed
