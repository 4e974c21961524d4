"""Which training solver makes a continuous-depth ViT a solution of its ODE: each mixer trained through a few
fixed-grid solvers, then solved again, much more finely, with the same trained weights.

A model is a *solution* of its ODE when the answer does not depend on the solver: its test accuracy under the
training solver and under a much finer one differ by at most CRITERION_POINTS, and its final features by at most
FEATURE_TOLERANCE (relative distance, `relative_distance`). The finer solvers are RK4 with 4× the training steps
and dopri5 at rtol = atol = FINE_RTOL. Each run is the defaults table's recipe (`experiments.defaults`: nano, 28²
Fashion-MNIST subset, 7×7 tokens, `TrainConfig(epochs=EPOCHS)`, everything else at the library's defaults) with
`depth="ode"` and the training solver's fields (`run --grid 14`: the same recipe at 14×14 tokens, patch 2, with the
default solver only). Only fixed-grid RK4 is trained through; dopri5 as a training solver is not measured. On the
trained models dopri5 at rtol 1e-3 takes more evaluations of f per solve than RK4 with 8 steps (the report's NFE
columns), and its adjoint adds a backward solve, so it is not expected to be the cheaper training solver.

    python -m ssog_lab.experiments.ode_solutions run --jobs 2   # resumable: docs/results/ode_solutions.{csv,md}
    python -m ssog_lab.experiments.ode_solutions report         # the markdown again from the CSV
    python -m ssog_lab.experiments.ode_solutions checkpoint     # the shipped ODE model (`make checkpoints`)
    python -m ssog_lab.experiments.ode_solutions cost --out docs/results/ode_matched_cost_cpu.md
        # side by side in one process: the trained models solved by dopri5 at the same tolerance (kept weights)
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from .. import lipschitz, repository
from ..bench.measure import git_commit, machine
from ..bench.report import markdown_table
from ..bench.timing import paired_speed, rotated
from ..models import ViT, ViTConfig, preset_config, rk4_residual
from ..ode_cost import solve_logits
from ..results.stats import beyond_noise, difference_std, mean_std, spread_text
from ..train import TrainConfig, fit
from ..train.atomic import atomic_write
from ..train.checkpoint import save_weights
from . import _jobs
from .defaults import DATASETS, EPOCHS, IMAGE_SIZE, MIXERS, inference_rate, load

DATASET = "fashion"
SEEDS = (0, 1, 2)
# name: ViTConfig fields of the training solver. nano has 4 layers, so T = 4: one RK4 step over [0, 4] costs
# 4 evaluations of f, as the discrete model's 4 blocks do (models.rk4_residual: a residual network with RK4's wiring).
SOLVERS = {
    "rk4, 1 step": rk4_residual(4.0),
    "rk4, 2 steps": dict(ode_method="rk4", ode_step_size=2.0),
    "rk4, 4 steps": dict(ode_method="rk4", ode_step_size=1.0),
    "rk4, 8 steps": dict(ode_method="rk4", ode_step_size=0.5),
}
DEFAULT_SOLVER = "rk4, 8 steps"  # the entry of SOLVERS that is ViTConfig's default (models.ViTConfig.ode_*)
FINE_RTOL = 1e-6  # dopri5's rtol = atol for the reference solve
NFE_RTOLS = (1e-3, 1e-6)
NFE_PROBE = 256  # test images solved by dopri5 after every epoch: how NFE grows during training
JACOBIAN_IMAGES = 8  # test images whose ‖∂f/∂x‖₂ is measured at x(0) and x(T) (the largest is reported)
CRITERION_POINTS = 0.5  # largest accuracy change under a finer solver for a model to count as a solution
# and the largest relative distance of its final features (`relative_distance`): "a few percent", the bound the shipped
# checkpoint's test has used since the default solver was chosen, before the 14×14 runs.
FEATURE_TOLERANCE = 0.05
EVAL_BATCH = 500
CSV_PATH = repository.RESULTS_DIR / "ode_solutions.csv"
REPORT_PATH = repository.RESULTS_DIR / "ode_solutions.md"
WEIGHTS_DIR = repository.ROOT / "runs" / "ode_solutions"
# The shipped ODE models, runs of this study's recipe: fixed SSoG trained through the library's default solver (a
# solution of its ODE), and through one RK4 step (the matched-cost wiring, which is not) to show the difference.
CHECKPOINT_PATH = repository.CHECKPOINTS_DIR / "nano_ssog_ode_fashion.pt"
RESIDUAL_CHECKPOINT_PATH = repository.CHECKPOINTS_DIR / "nano_ssog_rk4_residual_fashion.pt"
CHECKPOINTS = {CHECKPOINT_PATH: ("ssog", DEFAULT_SOLVER, 0), RESIDUAL_CHECKPOINT_PATH: ("ssog", "rk4, 1 step", 0)}
# tokens per side -> the training solvers tried there. 7×7 answers which solver gives solutions (and the paper's ODE
# questions on them); 14×14, the token count of a 224² image at patch 16, trains only the library's default solver
# (the cheapest that gives solutions at 7×7; each run checks again), for budget: four times the tokens per image.
GRID_SOLVERS = {7: tuple(SOLVERS), 14: (DEFAULT_SOLVER,)}
# The budget of the larger grid: the 7×7 runs' time per seed, finer solves included, × 4 for four times the tokens
# (docs/DESIGN.md §4 gives its history: it raised a first estimate when the first runs may have started).
GRID_BUDGET_CORE_HOURS = {14: 2.5}


@dataclass(frozen=True)
class Run:
    mixer: str
    solver: str
    seed: int
    grid: int = 7  # tokens per side: 28² images at patch 28 // grid

    @property
    def key(self) -> tuple[int, str, str, int]:
        return (self.grid, self.mixer, self.solver, self.seed)


def plan(grid: int = 7, mixers: tuple[str, ...] = MIXERS, seeds: tuple[int, ...] = SEEDS) -> list[Run]:
    """Every run at one grid (its GRID_SOLVERS), seed-major (every cell's seed 0 first)."""
    if grid not in GRID_SOLVERS:
        raise ValueError(f"grid must be one of {tuple(GRID_SOLVERS)}, got {grid!r}")
    return [Run(m, v, s, grid) for s, v, m in itertools.product(seeds, GRID_SOLVERS[grid], mixers)]


def model_and_recipe(run: Run) -> tuple[torch.nn.Module, TrainConfig]:
    """The defaults table's nano model at the run's grid with depth "ode" and the run's training solver."""
    if run.solver not in SOLVERS:
        raise ValueError(f"solver must be one of {tuple(SOLVERS)}, got {run.solver!r}")
    if run.grid not in GRID_SOLVERS:
        raise ValueError(f"grid must be one of {tuple(GRID_SOLVERS)}, got {run.grid!r}")
    if run.solver not in GRID_SOLVERS[run.grid]:
        raise ValueError(f"solver must be one of {GRID_SOLVERS[run.grid]} at grid {run.grid}, got {run.solver!r}")
    torch.manual_seed(run.seed)
    return ViT(ViTConfig(**model_config(run))), TrainConfig(epochs=EPOCHS, seed=run.seed, progress=False)


def model_config(run: Run) -> dict:
    """The ViTConfig fields of `model_and_recipe(run)`'s model, without building it."""
    return dataclasses.asdict(preset_config("nano", depth="ode", mixer=run.mixer, in_chans=1, num_classes=10,
                                            image_size=IMAGE_SIZE, patch_size=IMAGE_SIZE // run.grid,
                                            **SOLVERS[run.solver]))


def run_of(row: dict) -> Run:
    """The run a stored row records."""
    return Run(row["mixer"], row["solver"], row["seed"], row["grid"])


def is_current(row: dict) -> bool:
    """A stored run is current when today's code builds the model it trained (a default changed since: not)."""
    return json.loads(row["model_config"]) == model_config(run_of(row))


def solve_all(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor, **solver) -> dict:
    """The model's final ODE state and accuracy under `solver` (ViTConfig fields), in batches of EVAL_BATCH:
    {"features" (B, N, C), "accuracy" (fraction), "nfe" (mean f evaluations per batch), "seconds"}."""
    features, correct, nfe = [], 0, []
    start = time.perf_counter()
    with model.solved_with(**solver), torch.no_grad():
        for chunk, truth in zip(images.split(EVAL_BATCH), labels.split(EVAL_BATCH), strict=True):
            x = model.states(chunk, torch.tensor([0.0, model.config.end_time]))[-1]  # (b, N, C) at t = T
            logits = model.head(model.norm(x).mean(dim=1))  # (b, classes)
            features.append(x)
            correct += (logits.argmax(-1) == truth).sum().item()
            nfe.append(model.nfe)
    return dict(features=torch.cat(features), accuracy=correct / len(labels), nfe=statistics.mean(nfe),
                seconds=time.perf_counter() - start)


def dopri5(rtol: float) -> dict:
    """The ViTConfig fields of a torchdiffeq dopri5 solve at rtol = atol = rtol."""
    return dict(ode_method="dopri5", ode_solver="torchdiffeq", ode_rtol=rtol, ode_atol=rtol)


def relative_distance(a: torch.Tensor, b: torch.Tensor) -> float:
    """Median over images of ‖a − b‖ / ‖b‖, each image's (N, C) features as one vector."""
    a, b = a.flatten(1), b.flatten(1)  # (B, N·C)
    return (a - b).norm(dim=1).div(b.norm(dim=1)).median().item()


def dopri5_nfe(model: torch.nn.Module, images: torch.Tensor) -> dict[str, int]:
    """{f"{rtol:g}": NFE of one dopri5 solve of `images` at rtol = atol} for every NFE_RTOLS, in eval mode (the
    model's mode is restored)."""
    was_training = model.training
    model.eval()
    try:
        return {f"{rtol:g}": solve_logits(model, images, **dopri5(rtol))[1] for rtol in NFE_RTOLS}
    finally:
        model.train(was_training)


def lipschitz_columns(model: torch.nn.Module, images: torch.Tensor) -> dict:
    """The trained right-hand side's Lipschitz constants: fixed SSoG's certified bound of the whole branch
    (`lipschitz.branch_lipschitz_bound`; None for the other mixers) and the largest measured ‖∂f/∂x‖₂ over
    `images` at the initial state x(0) and the final state x(T)."""
    branch = model.block(0)
    with torch.no_grad():
        x, grid = model.embed(images)  # (B, N, C)
        ends = model.states(images, torch.tensor([0.0, model.config.end_time]))  # (2, B, N, C)
    f = lambda z: branch(z, grid)  # noqa: E731
    measured = [max(lipschitz.jacobian_spectral_norm(f, state[i:i + 1]).item() for i in range(len(images)))
                for state in (x, ends[-1])]
    bound = lipschitz.branch_lipschitz_bound(branch, grid)["total"] if model.config.mixer == "ssog" else None
    return dict(lipschitz_bound=bound, jacobian_norm_start=measured[0], jacobian_norm_end=measured[1])


def kept_model(run: Run) -> torch.nn.Module:
    """The model of `run` with the trained weights its run kept (runs/ is not committed: a fresh machine makes them
    with `one`, which trains deterministically), in eval mode."""
    path = weights_path(run)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: `python -m ssog_lab.experiments.ode_solutions one {run.mixer} "
                                f"{json.dumps(run.solver)} {run.seed} --grid {run.grid}` trains that run and keeps "
                                "its weights")
    model = model_and_recipe(run)[0]
    model.load_state_dict(torch.load(path))
    return model.eval()


def weights_path(run: Run) -> Path:
    """Where a run keeps its trained weights (runs/ is not committed): for analyses after the fact."""
    solver = run.solver.replace(", ", "-").replace(" ", "-")
    return WEIGHTS_DIR / f"{run.mixer}-{solver}-seed{run.seed}-{run.grid}x{run.grid}.pt"


def test_tensors(test=None) -> tuple[torch.Tensor, torch.Tensor]:
    """The study's test images (2000, 1, 28, 28) and labels (2000,), from its test set (loaded when not given)."""
    test = load(DATASET)[1] if test is None else test
    return (torch.stack([test[i][0] for i in range(len(test))]),
            torch.tensor([int(test[i][1]) for i in range(len(test))]))


def export_checkpoint(path: Path = CHECKPOINT_PATH, from_study: bool = False) -> dict:
    """Train the model of CHECKPOINTS[path] (or, with from_study, load the weights this study's run of it kept) and
    write it as a weights-only file that `train.load_model` reads, with a .json beside it: its test accuracy under
    its own solver and under dopri5 at FINE_RTOL on the study's test images, and how it was made. Returns the .json."""
    run = Run(*CHECKPOINTS[path])
    model, recipe = model_and_recipe(run)
    started = time.perf_counter()
    train, test = load(DATASET)
    if from_study:
        model = kept_model(run)  # in eval mode
    else:
        fit(model, train, test, recipe)
        model.eval()
    images, labels = test_tensors(test)
    own, fine = solve_all(model, images, labels), solve_all(model, images, labels, **dopri5(FINE_RTOL))
    # the command that made this file (it makes every file of CHECKPOINTS); `make checkpoints` retrains
    command = "python -m ssog_lab.experiments.ode_solutions checkpoint" + (" --from-study" if from_study else "")
    split = f"test ({len(labels)} images of the Fashion-MNIST subset of experiments.defaults)"
    numbers = dict(test_accuracy=own["accuracy"], test_accuracy_dopri5=fine["accuracy"],
                   feature_distance_dopri5=relative_distance(own["features"], fine["features"]))
    host = machine()
    metadata = dict(preset="nano", depth="ode", mixer=run.mixer, solver=run.solver, seed=run.seed,
                    dataset=f"fashion-mnist subset ({DATASETS[DATASET][1]} training images)", eval_split=split,
                    **numbers, fine_solver=f"dopri5, rtol = atol = {FINE_RTOL:g}",
                    train_seconds=None if from_study else time.perf_counter() - started,
                    train_config=dataclasses.asdict(recipe), command=command, commit=git_commit(),
                    torch=torch.__version__, machine=f"{host['cpu_model']} ({host['cpu_flags']}), one thread")
    save_weights(model, path, **numbers, eval_split=split, command=command, train_config=dataclasses.asdict(recipe))
    atomic_write(path.with_suffix(".json"), json.dumps(metadata, indent=1, allow_nan=False) + "\n")
    return metadata


def run_one(run: Run) -> dict:
    """Train one model (recording dopri5's NFE after every epoch), then solve it again with the finer solvers;
    the CSV row. The trained weights go to weights_path(run)."""
    train, test = load(DATASET)
    model, recipe = model_and_recipe(run)
    images, labels = test_tensors(test)
    nfe_per_epoch = {f"{rtol:g}": [] for rtol in NFE_RTOLS}
    probing = [0.0]  # seconds spent in the per-epoch probes, left out of train_s

    def record_nfe(record: dict) -> None:
        if record["kind"] == "epoch":
            started = time.perf_counter()
            for rtol, nfe in dopri5_nfe(model, images[:NFE_PROBE]).items():
                nfe_per_epoch[rtol].append(nfe)
            probing[0] += time.perf_counter() - started

    started = time.perf_counter()
    history = fit(model, train, test, recipe, on_log=record_nfe)
    train_s = time.perf_counter() - started - probing[0]
    model.eval()
    WEIGHTS_DIR.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), weights_path(run))
    own = solve_all(model, images, labels)
    fine_step = SOLVERS[run.solver]["ode_step_size"] / 4
    rk4_fine = solve_all(model, images, labels, ode_method="rk4", ode_step_size=fine_step)
    dopri = {rtol: solve_all(model, images, labels, **dopri5(rtol)) for rtol in NFE_RTOLS}
    fine = dopri[FINE_RTOL]
    host = machine()
    epochs = [r for r in history if r["kind"] == "epoch"]
    return dict(grid=run.grid, mixer=run.mixer, solver=run.solver, seed=run.seed,
                accuracy=own["accuracy"], accuracy_rk4_fine=rk4_fine["accuracy"], accuracy_dopri5=fine["accuracy"],
                distance_rk4_fine=relative_distance(own["features"], rk4_fine["features"]),
                distance_dopri5=relative_distance(own["features"], fine["features"]),
                nfe_train=own["nfe"], **{f"nfe_dopri5_{rtol:g}": dopri[rtol]["nfe"] for rtol in NFE_RTOLS},
                # in-run timings, beside the other run: kept as the run's record; the cost at matched tolerance
                # is measured side by side by `matched_cost`
                **{f"dopri5_images_per_s_{rtol:g}": len(labels) / dopri[rtol]["seconds"] for rtol in NFE_RTOLS},
                nfe_per_epoch=json.dumps(nfe_per_epoch), **lipschitz_columns(model, images[:JACOBIAN_IMAGES]),
                train_images_per_s=statistics.mean(r["images_per_s"] for r in epochs),
                infer_images_per_s=inference_rate(model, images[:256]), train_s=train_s,
                cpu_model=host["cpu_model"], cpu_flags=host["cpu_flags"], threads=host["threads"],
                commit=git_commit(), model_config=json.dumps(dataclasses.asdict(model.config), sort_keys=True),
                train_config=json.dumps(dataclasses.asdict(recipe), sort_keys=True))


NUMBERS = dict(grid=int, seed=int, threads=int, accuracy=float, accuracy_rk4_fine=float, accuracy_dopri5=float,
               distance_rk4_fine=float, distance_dopri5=float, nfe_train=float,
               **{f"nfe_dopri5_{rtol:g}": float for rtol in NFE_RTOLS},
               **{f"dopri5_images_per_s_{rtol:g}": float for rtol in NFE_RTOLS},
               lipschitz_bound=float, jacobian_norm_start=float, jacobian_norm_end=float,
               train_images_per_s=float, infer_images_per_s=float, train_s=float)
COLUMNS = ("grid", "mixer", "solver", "seed", *(k for k in NUMBERS if k not in ("grid", "seed", "threads")),
           "nfe_per_epoch",
           "cpu_model",
           "cpu_flags", "threads", "commit", "model_config", "train_config")


def matched_cost(solver: str = DEFAULT_SOLVER, seeds: tuple[int, ...] = SEEDS, rounds: int = 3,
                 count: int = EVAL_BATCH) -> list[dict]:
    """Cost at matched tolerance, side by side in this process: every mixer's trained models (`kept_model`) solve
    the first `count` test images by dopri5 at each NFE_RTOLS tolerance, in `rounds` rounds that take the mixers in
    a rotated order (after one untimed solve each), timed in CPU time. One row per (mixer, rtol): the per-seed
    accuracies (%) and NFE, images/s at the median solve time, the speed against SDPA, whole and per
    evaluation of f (`timing.paired_speed` over the solves paired by seed and round), and that speed seed by seed
    (`speed_by_seed`: each seed's models timed against each other, which shows how much the ratio varies)."""
    if not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds!r}")
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    models = {(m, seed): kept_model(Run(m, solver, seed)) for m, seed in itertools.product(MIXERS, seeds)}
    images, labels = (t[:count] for t in test_tensors())
    for model in models.values():  # one-time costs (first calls, allocations) stay out of the timings
        solve_all(model, images[:8], labels[:8], **dopri5(NFE_RTOLS[0]))
    seconds: dict[tuple, list[float]] = {}  # (mixer, seed, rtol) -> CPU seconds, one per round
    solved: dict[tuple, dict] = {}
    for r, seed, rtol in itertools.product(range(rounds), seeds, NFE_RTOLS):
        for mixer in rotated(MIXERS, r):
            start = time.process_time()
            solved[mixer, seed, rtol] = solve_all(models[mixer, seed], images, labels, **dopri5(rtol))
            seconds.setdefault((mixer, seed, rtol), []).append(time.process_time() - start)

    def times(mixer: str, rtol: float, per_evaluation: bool = False, only: tuple[int, ...] = seeds) -> list[float]:
        """CPU seconds of the mixer's timed solves, seed by seed (of `only`) and round by round (÷ NFE: per
        evaluation of f)."""
        return [t / (solved[mixer, seed, rtol]["nfe"] if per_evaluation else 1)
                for seed in only for t in seconds[mixer, seed, rtol]]

    return [dict(mixer=mixer, rtol=rtol, accuracy=[100 * solved[mixer, s, rtol]["accuracy"] for s in seeds],
                 nfe=[solved[mixer, s, rtol]["nfe"] for s in seeds],
                 images_per_s=count / statistics.median(times(mixer, rtol)),
                 speed=paired_speed(times("sdpa", rtol), times(mixer, rtol)),
                 speed_per_evaluation=paired_speed(times("sdpa", rtol, True), times(mixer, rtol, True)),
                 speed_by_seed=[paired_speed(times("sdpa", rtol, only=(s,)), times(mixer, rtol, only=(s,)))
                                for s in seeds])
            for mixer, rtol in itertools.product(MIXERS, NFE_RTOLS)]


def matched_cost_report(rows: list[dict], command: str, count: int, load: tuple[float, float],
                        solver: str = DEFAULT_SOLVER) -> str:
    """The markdown of `matched_cost`'s rows: the command, the host and its load average (1 minute) before and after,
    the table and how to read it."""
    host = machine()
    table = markdown_table(rows, {"mixer": "mixer", "dopri5 rtol = atol": lambda r: f"{r['rtol']:g}",
                                  "seeds": lambda r: str(len(r["nfe"])),
                                  "test % on these images": lambda r: spread_of(r["accuracy"]),
                                  "NFE": lambda r: spread_of(r["nfe"]),
                                  "images/s": lambda r: f"{r['images_per_s']:.0f}",
                                  "speed ÷ sdpa": lambda r: f"{r['speed']:.2f}",
                                  "per seed (min–max)": lambda r: f"{min(r['speed_by_seed']):.2f}–"
                                                                  f"{max(r['speed_by_seed']):.2f}",
                                  "against sdpa": lambda r: speed_verdict(r["speed_by_seed"])
                                  if r["mixer"] != "sdpa" else "—",
                                  "per evaluation of f ÷ sdpa": lambda r: f"{r['speed_per_evaluation']:.2f}"},
                           align="llrrrrrrlr")
    return "\n".join([
        "# Continuous depth: cost at matched tolerance, side by side (CPU)", "",
        f"Made by `{command}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, commit `{git_commit()}`.",
        f"Host: {host['cpu_model']} ({host['cpu_flags'] or 'no AVX-512/AMX'}), {host['threads']} thread(s); load "
        f"average (1 minute) {load[0]:.2f} before, {load[1]:.2f} after.", "",
        f"The ODE models of `ode_solutions.md` trained at {solver}, 7×7 tokens (the weights those runs keep in "
        "runs/ode_solutions/, or a retraining by its `one` command where they are missing) solve the first "
        f"{count} test images with dopri5 (torchdiffeq) at each tolerance, in one process: after one untimed solve "
        "each, every round solves with every model, the mixers in a rotated order, timed in CPU time. images/s: at "
        "the median solve time over rounds and seeds; speed ÷ sdpa: the median of the ratios paired by seed and round "
        "(≥ 1: faster than SDPA at the same tolerance); per evaluation of f: the same ratio of the times divided by "
        "each solve's NFE, which separates the cost of one evaluation from the number of evaluations; per seed: the "
        "same speed for each seed's models alone; against sdpa: faster or slower only where every seed's speed is "
        "on the same side of 1, else level. NFE and accuracy: mean ± std over the seeds.", "",
        table, "",
    ])


def speed_verdict(by_seed: list[float]) -> str:
    """"faster" / "slower" than SDPA when every seed's speed ratio is above / below 1, else "level"."""
    return "faster" if min(by_seed) > 1 else "slower" if max(by_seed) < 1 else "level"


def read_rows(path: Path = CSV_PATH) -> list[dict]:
    return _jobs.read_csv(path, NUMBERS)


def _child(run: Run) -> subprocess.Popen:
    return _jobs.start_child(["ssog_lab.experiments.ode_solutions", "one", run.mixer, run.solver, str(run.seed),
                              "--grid", str(run.grid)])


def execute(runs: list[Run], jobs: int, path: Path = CSV_PATH) -> int:
    """Run what the CSV lacks, `jobs` single-thread processes at once, writing each row as it finishes; the
    number of failed runs (retried on the next call)."""
    rows = read_rows(path)
    done = {run_of(r).key for r in rows}
    pending = [run for run in runs if run.key not in done]
    _jobs.log(f"{len(pending)} of {len(runs)} runs to do, {jobs} at a time")

    def finished(run: Run, row: dict) -> None:
        rows.append(row)
        _jobs.write_csv(rows, path, COLUMNS, _order)
        _jobs.log(f"done  {run}: {row['accuracy']:.4f} → dopri5 {row['accuracy_dopri5']:.4f} in "
                  f"{row['train_s']:.0f} s")

    return _jobs.run_children(pending, jobs, lambda run: _child(run), finished)  # _child looked up per run


def _order(row: dict) -> tuple:
    return (row["grid"], MIXERS.index(row["mixer"]), list(SOLVERS).index(row["solver"]), row["seed"])


def cells(rows: list[dict]) -> list[dict]:
    """One dict per (grid, mixer, solver): means and sample stds over seeds (NaN for one seed: no spread is
    measured), the largest accuracy change (points) and feature distance under a finer solver (over seeds and both
    finer solvers), each against its bound, and whether every seed meets both (`solution`)."""
    out = []
    for grid, mixer, solver in itertools.product(GRID_SOLVERS, MIXERS, SOLVERS):
        mine = [r for r in rows if (r["grid"], r["mixer"], r["solver"]) == (grid, mixer, solver)]
        if not mine:
            continue
        mean = lambda key, scale=1.0: statistics.mean(scale * r[key] for r in mine)  # noqa: E731
        shifts = [100 * abs(r[k] - r["accuracy"]) for r in mine for k in ("accuracy_rk4_fine", "accuracy_dopri5")]
        distance = max(r[k] for r in mine for k in ("distance_rk4_fine", "distance_dopri5"))
        accuracy_ok, features_ok = max(shifts) <= CRITERION_POINTS, distance <= FEATURE_TOLERANCE
        accuracy, std = mean_std([100 * r["accuracy"] for r in mine])
        out.append(dict(grid=grid, mixer=mixer, solver=solver, n=len(mine), accuracy=accuracy, std=std,
                        rk4_fine=mean("accuracy_rk4_fine", 100), dopri5=mean("accuracy_dopri5", 100),
                        worst_shift=max(shifts), accuracy_ok=accuracy_ok, distance=distance,
                        features_ok=features_ok, solution=accuracy_ok and features_ok, nfe_train=mean("nfe_train"),
                        **{f"nfe_{rtol:g}": mean(f"nfe_dopri5_{rtol:g}") for rtol in NFE_RTOLS},
                        **{f"nfe_{rtol:g}_std": mean_std([r[f"nfe_dopri5_{rtol:g}"] for r in mine])[1]
                           for rtol in NFE_RTOLS},
                        train=mean("train_images_per_s"), infer=mean("infer_images_per_s")))
    return out


def spread_of(values: list[float]) -> str:
    """`spread_text` of a list of per-seed values."""
    return spread_text(*mean_std(values), len(values))


def solution_solver(found: list[dict], grid: int = 7) -> str | None:
    """The cheapest training solver (in SOLVERS' order) whose cell at `grid` is a solution for every mixer, from
    `cells`."""
    for solver in SOLVERS:
        mine = [c for c in found if (c["grid"], c["solver"]) == (grid, solver)]
        if len(mine) == len(MIXERS) and all(c["solution"] for c in mine):
            return solver
    return None


def ode_questions(rows: list[dict]) -> str:
    """The paper's ODE questions on models that are solutions, at 7×7 tokens: one line per mixer at
    `solution_solver`, over the seeds of the runs that recorded them; empty when no solver gives solutions for every
    mixer."""
    rows = [r for r in rows if r["grid"] == 7]
    solver = solution_solver(cells(rows))
    if solver is None:
        return ""
    lines = []
    for mixer in MIXERS:
        runs = [r for r in rows if (r["mixer"], r["solver"]) == (mixer, solver) and r["jacobian_norm_end"] is not None]
        if not runs:
            continue
        recorded = [json.loads(r["nfe_per_epoch"]) for r in runs]
        # after each epoch, the mean over the seeds (zip stops at the shortest record)
        per_epoch = {k: [statistics.mean(e) for e in zip(*(record.get(k, []) for record in recorded), strict=False)]
                     for k in recorded[0]}
        lines.append(dict(
            mixer=mixer, n=len(runs), accuracy=spread_of([100 * r["accuracy"] for r in runs]),
            **{f"nfe_{rtol:g}": spread_of([r[f"nfe_dopri5_{rtol:g}"] for r in runs]) for rtol in NFE_RTOLS},
            **{f"epochs_{k}": " → ".join(f"{v:.0f}" for v in values) for k, values in per_epoch.items()},
            bound=(f"{max(r['lipschitz_bound'] for r in runs):.3g}" if runs[0]["lipschitz_bound"] is not None
                   else "no closed form"),
            start=f"{max(r['jacobian_norm_start'] for r in runs):.3g}",
            end=f"{max(r['jacobian_norm_end'] for r in runs):.3g}"))
    columns = {"mixer": "mixer", "seeds": "n", "test % (training solver)": "accuracy",
               **{f"dopri5 NFE {rtol:g}": f"nfe_{rtol:g}" for rtol in NFE_RTOLS},
               **{f"NFE {rtol:g} after each epoch": f"epochs_{rtol:g}" for rtol in NFE_RTOLS},
               "certified Lipschitz bound of f (max)": "bound", "measured ‖∂f/∂x‖₂ at x(0) (max)": "start",
               "at x(T) (max)": "end"}
    return "\n".join([
        f"## The trained ODE models at {solver}, 7×7 tokens: accuracy, NFE, Lipschitz constants",
        "",
        f"The runs of the table above at {solver}, the cheapest training solver whose models are solutions for every "
        f"mixer. NFE: dopri5's evaluations of f per solve of a batch of {EVAL_BATCH} test images, and after each "
        f"epoch of training on {NFE_PROBE} test images (the mean over seeds). Lipschitz: fixed SSoG's certified "
        "bound of the whole right-hand side f = (mixer + MLP)∘LN (`lipschitz.branch_lipschitz_bound`: LayerNorm's "
        "‖diag(γ)(I − 11ᵀ/C)‖₂/√ε times the mixer's and the MLP's spectral-norm products), and the largest "
        f"measured ‖∂f/∂x‖₂ over {JACOBIAN_IMAGES} test images at the initial and final states "
        "(`lipschitz.jacobian_spectral_norm`). The cost at matched tolerance (images/s when every model is solved by "
        "dopri5 at the same rtol = atol) is measured apart from these runs, whose timings share the machine with the "
        "other run: the same models side by side in one process, paired by seed and round, "
        "`ode_matched_cost_cpu*.md` (`python -m ssog_lab.experiments.ode_solutions cost --out "
        "docs/results/ode_matched_cost_cpu<_host>.md`).",
        "",
        markdown_table(lines, columns, align="lrrrrllrrr"),
        "",
        *readings(rows, solver),
        "",
    ])


def compare(mine: list[float], base: list[float], words: tuple[str, str] = ("fewer", "more")) -> str:
    """words[0] / words[1] when the mean of `mine` is below / above that of `base` by more than the larger standard
    deviation over seeds, else "level"; "not scored" when either side has one seed (its noise is not measured)."""
    if min(len(mine), len(base)) < 2:
        return "not scored (1 seed)"
    return {-1: words[0], 0: "level", 1: words[1]}[beyond_noise(*mean_std(mine), *mean_std(base))]


def readings(rows: list[dict], solver: str) -> list[str]:
    """The sentences under the ODE-questions table, computed from its runs: each SSoG variant's dopri5 NFE and
    largest measured Jacobian norm against SDPA's, how far fixed SSoG's certified bound sits above the norms it
    bounds, and, where fixed SSoG is no better than SDPA on the NFE or the measured norm, a sentence that says so."""
    runs = {m: [r for r in rows if (r["mixer"], r["solver"]) == (m, solver) and r["jacobian_norm_end"] is not None]
            for m in MIXERS}
    if not all(runs.values()):
        return []
    nfe = lambda m, rtol: [r[f"nfe_dopri5_{rtol:g}"] for r in runs[m]]  # noqa: E731
    norm = lambda m: [max(r["jacobian_norm_start"], r["jacobian_norm_end"]) for r in runs[m]]  # noqa: E731
    out, fixed = [], {}
    for mixer in MIXERS[1:]:
        words = {f"NFE at rtol {rtol:g}": compare(nfe(mixer, rtol), nfe("sdpa", rtol)) for rtol in NFE_RTOLS}
        words["largest measured ‖∂f/∂x‖₂"] = (
            f"{statistics.mean(norm(mixer)):.3g} against {statistics.mean(norm('sdpa')):.3g}, mean over seeds: "
            + compare(norm(mixer), norm("sdpa"), ("smaller", "larger")))
        fixed = words if mixer == "ssog" else fixed
        out.append(f"- **{mixer}** against sdpa after training: {'; '.join(f'{k} {v}' for k, v in words.items())} "
                   "(fewer, more, smaller or larger only where the means differ by more than the larger std over "
                   "seeds).")
    bound = max(r["lipschitz_bound"] for r in runs["ssog"])
    measured = max(max(r["jacobian_norm_start"], r["jacobian_norm_end"]) for r in runs["ssog"])
    out.append(f"- Fixed SSoG's certified bound of f ({bound:.3g}) is {bound / measured:.0f}× the largest ‖∂f/∂x‖₂ "
               f"measured at the trained models' states ({measured:.3g}): it holds for every input, LayerNorm's "
               "1/√ε at near-constant tokens included, where the measured norms come from real images.")
    no_better = [k for k, v in fixed.items() if v.endswith(("level", "more", "larger"))]
    if no_better:
        listed = ", ".join(no_better[:-1]) + (" and " if len(no_better) > 1 else "") + no_better[-1]
        lacks = (["fewer evaluations of an adaptive solver"] if any(k.startswith("NFE") for k in no_better) else []) \
            + (["a smoother trained right-hand side"] if any(k.startswith("largest") for k in no_better) else [])
        out.append(f"- Fixed SSoG is no better than SDPA here on {listed}: what it has that SDPA lacks is the "
                   f"certified bound (the theorem's premise), not {' or '.join(lacks)}.")
    return out


def _solver_table(found: list[dict]) -> str:
    """The markdown table of `cells` entries: accuracy under the training and the finer solvers, NFE, speeds."""
    return markdown_table(found, {
        "mixer": "mixer", "training solver": "solver", "seeds": "n",
        "test % (training solver)": lambda c: spread_text(c["accuracy"], c["std"], c["n"]),
        "RK4, 4× the steps": lambda c: f"{c['rk4_fine']:.1f}",
        f"dopri5 {FINE_RTOL:g}": lambda c: f"{c['dopri5']:.1f}",
        "largest change (points)": lambda c: f"{c['worst_shift']:.1f} {'✓' if c['accuracy_ok'] else '✗'}",
        "largest feature distance": lambda c: f"{c['distance']:.1e} {'✓' if c['features_ok'] else '✗'}",
        "NFE training": lambda c: f"{c['nfe_train']:.0f}",
        **{f"dopri5 NFE {rtol:g}": (lambda c, r=rtol: f"{c[f'nfe_{r:g}']:.0f}") for rtol in NFE_RTOLS},
        "train img/s": lambda c: f"{c['train']:.0f}", "inference img/s": lambda c: f"{c['infer']:.0f}"},
        align="lllrrrrrrrrrr")


def larger_grid(rows: list[dict], grid: int = 14) -> list[str]:
    """The section of the report on the runs at `grid` (empty without them): their table, which cells are not
    solutions and why, each SSoG variant's accuracy against SDPA's there, and the runs' cost: against their 7×7
    twins trained on the same CPU, and per seed against the budget."""
    found = [c for c in cells(rows) if c["grid"] == grid]
    if not found:
        return []
    by_mixer = {c["mixer"]: c for c in found}
    gaps = []
    for mixer in MIXERS[1:]:
        if mixer in by_mixer and "sdpa" in by_mixer:
            mine, base = by_mixer[mixer], by_mixer["sdpa"]
            spread = difference_std(mine["std"], mine["n"], base["std"], base["n"])
            seeds = f"{mine['n']} and {base['n']} seeds"
            gaps.append(f"- **{mixer}** − sdpa: {mine['accuracy'] - base['accuracy']:+.1f} points"
                        + (f" ({seeds}: no spread measured)" if math.isnan(spread) else f" ± {spread:.1f} ({seeds})")
                        + ("." if mine["solution"] and base["solution"] else
                           ", between models not all solutions of their ODE (above)."))
    solvers = " / ".join(GRID_SOLVERS[grid])
    train_s = [r["train_s"] for r in rows if r["grid"] == grid]
    # Each run beside its 7×7 twin (same mixer, solver and seed) trained on the same CPU model, so that the ratio
    # mixes neither mixers nor machines.
    small = {(r["mixer"], r["solver"], r["seed"]): r for r in rows if r["grid"] == 7}
    twinned = [(r, small[key]) for r in rows
               if r["grid"] == grid and (key := (r["mixer"], r["solver"], r["seed"])) in small]
    pairs = [(r["train_s"], twin["train_s"]) for r, twin in twinned if twin["cpu_model"] == r["cpu_model"]]
    cost = (f"its runs trained {sum(b for b, _ in pairs) / sum(s for _, s in pairs):.1f}× as long as their 7×7 twins "
            "(same mixer, solver, seed and CPU)" if pairs else
            f"a run costs about {(grid / 7) ** 2:.0f}× a 7×7 one in tokens (no measured ratio: "
            + ("its 7×7 twins trained on another CPU)" if twinned else "no 7×7 twins)"))
    cost += f"; its {len(train_s)} runs' training took {sum(train_s) / 3600:.1f} core-hours"
    complete = [[r["train_s"] for r in rows if (r["grid"], r["seed"]) == (grid, seed)] for seed in SEEDS]
    complete = [sum(times) for times in complete if len(times) == len(MIXERS)]
    if complete and grid in GRID_BUDGET_CORE_HOURS:
        cost += (f", {statistics.mean(complete) / 3600:.1f} per seed of the {len(MIXERS)} mixers, against the budget "
                 f"of {GRID_BUDGET_CORE_HOURS[grid]:g} core-hours per seed with the finer solves, "
                 "which this training time leaves out (docs/DESIGN.md §4 gives the budget's history)")
    missed = []
    for c in found:
        why = [f"accuracy moves {c['worst_shift']:.1f} points"] if not c["accuracy_ok"] else []
        why += [f"the final features move {c['distance']:.1%}"] if not c["features_ok"] else []
        if why:
            missed.append(f"- **{c['mixer']}** is not a solution at this grid: {' and '.join(why)} under a finer "
                          f"solve in its worst seed (bounds: {CRITERION_POINTS} points, {FEATURE_TOLERANCE:.0%}).")
    return [
        f"## {grid}×{grid} tokens (patch {IMAGE_SIZE // grid}): the default solver only", "",
        f"Made by `python -m ssog_lab.experiments.ode_solutions run --grid {grid} --jobs 2`. The same recipe at "
        f"{grid}×{grid} tokens, the token count of a 224² image at patch 16, trained through {solvers} only (the "
        f"cheapest solver whose models are solutions at 7×7 tokens; the finer solves check it again here), for "
        f"budget: {cost}. Every mixer trains at the library's defaults (the defaults table's protocol: one recipe "
        "for all, no per-mixer tuning), unlike the Fashion sweep's patch-2 looped runs, which use that sweep's "
        "per-mixer tuned recipe on the full training set (`accuracy_fashion/`): compare gaps within one recipe, not "
        "across the two. Differences: mean ± the standard deviation of the difference of means over seeds.", "",
        _solver_table(found), "", *missed, *gaps, "",
    ]


def report(rows: list[dict]) -> str:
    """docs/results/ode_solutions.md: the command, the host, the table and which training solver is the
    cheapest that gives solutions, per mixer; the ODE questions on those models; the runs at 14×14 tokens."""
    found = [c for c in cells(rows) if c["grid"] == 7]
    cheapest = []
    for mixer in MIXERS:
        ok = [c["solver"] for c in found if c["mixer"] == mixer and c["solution"]]
        if any(c["mixer"] == mixer for c in found):
            cheapest.append(f"- **{mixer}**: " + (f"cheapest training solver whose models are solutions: {ok[0]}"
                                                  if ok else "no training solver tried gives solutions"))
    _, n_train, n_test = DATASETS[DATASET]
    return "\n".join([
        "# Continuous depth: which training solver gives models that are solutions of their ODE",
        "",
        "Made by `python -m ssog_lab.experiments.ode_solutions run --jobs 2` (two single-thread runs at a time, "
        "one per core; resumable).",
        f"Host: {_jobs.hosts(rows)}. Commit(s): {', '.join(sorted({r['commit'] or '?' for r in rows}))}. Training "
        f"time of the {len(rows)} runs (every grid): {sum(r['train_s'] for r in rows) / 3600:.1f} core-hours "
        "(one thread each).",
        "",
        "Nano ViT, `depth=\"ode\"` (T = 4), 7×7 tokens, the Fashion-MNIST subset of the defaults table "
        f"({n_train} training / {n_test} test images), {EPOCHS} epochs, everything else at the library's defaults. "
        "Each model is trained through the solver in its row, then its test images are solved again with the same "
        f"weights by RK4 with 4× the steps and by dopri5 (torchdiffeq) at rtol = atol = {FINE_RTOL:g}. A model "
        f"is a solution when neither changes its test accuracy by more than {CRITERION_POINTS} points nor its "
        f"final features by more than {FEATURE_TOLERANCE:.0%} (✓: every seed, both finer solvers); the feature "
        "distance is the median over images of ‖x_train(T) − x_fine(T)‖ / ‖x_fine(T)‖, the largest over seeds and "
        f"finer solvers. NFE: evaluations of f per solve of a batch of {EVAL_BATCH} images. Speeds are "
        "measured inside the runs, beside the other run on the second core: read them as rough ratios.",
        "",
        _solver_table(found),
        "",
        *cheapest,
        "",
        ode_questions(rows),
        *larger_grid(rows),
    ]).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ssog_lab.experiments.ode_solutions",
                                     description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run what the CSV lacks, then write the report")
    run.add_argument("--jobs", type=int, default=2, help="single-thread processes at once (one per core)")
    run.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    run.add_argument("--grid", type=int, default=7, choices=list(GRID_SOLVERS),
                     help="tokens per side (14: the default solver only, see GRID_SOLVERS)")
    sub.add_parser("report", help="write the markdown from the CSV")
    checkpoint = sub.add_parser("checkpoint", help="train and write the shipped ODE models: "
                                + ", ".join(path.name for path in CHECKPOINTS))
    checkpoint.add_argument("--from-study", action="store_true",
                            help="load the weights this study's run of the same recipe kept instead of training")
    cost = sub.add_parser("cost", help="the kept models solved by dopri5 at matched tolerance, side by side")
    cost.add_argument("--out", type=Path, required=True, help="the markdown file to write (refused if it exists, "
                      "unless --overwrite)")
    cost.add_argument("--overwrite", action="store_true", help="let --out replace an existing file")
    cost.add_argument("--rounds", type=int, default=3, help="timed solves of every model at each tolerance")
    one = sub.add_parser("one", help="one run in this process; prints its CSV row as JSON")
    one.add_argument("mixer", choices=MIXERS)
    one.add_argument("solver", choices=list(SOLVERS))
    one.add_argument("seed", type=int)
    one.add_argument("--grid", type=int, default=7, choices=list(GRID_SOLVERS))
    args = parser.parse_args(argv)
    if args.command == "one":
        torch.set_num_threads(1)
        print(json.dumps(run_one(Run(args.mixer, args.solver, args.seed, args.grid))))
        return 0
    if args.command == "cost":
        if args.out.exists() and not args.overwrite:
            parser.error(f"--out {args.out} exists: pass --overwrite to replace it")
        torch.set_num_threads(1)
        command = f"python -m ssog_lab.experiments.ode_solutions {shlex.join(argv or sys.argv[1:])}"
        before = os.getloadavg()[0]
        rows = matched_cost(rounds=args.rounds)
        atomic_write(args.out, matched_cost_report(rows, command, EVAL_BATCH, (before, os.getloadavg()[0])))
        return 0
    if args.command == "checkpoint":
        torch.set_num_threads(1)
        for path in CHECKPOINTS:
            print(json.dumps(export_checkpoint(path, from_study=args.from_study)))
        return 0
    if args.command == "run":
        _jobs.check_run_flags(parser, args.jobs, args.seeds)
    failures = execute(plan(args.grid, seeds=args.seeds), args.jobs) if args.command == "run" else 0
    if rows := read_rows():
        atomic_write(REPORT_PATH, report(rows))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
