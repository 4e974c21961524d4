"""Accuracy results as configuration rows, read from the committed run folders (`record.RunRecord`): one row per
distinct configuration of a sweep's phase, its per-seed test accuracies kept apart from every other
configuration's (the claims ledger, notebook 05's stored-results widget).

A sweep is a folder `docs/results/<name>/runs/<phase>/…/` of run folders; the runs of a phase that share every
label but the seed (the sweep's own grouping, run.json) form one configuration. `SWEEPS` says how a sweep's older
folders, written before summary.json held the model config, get it from their labels.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from .. import repository
from ..experiments.fashion import plan
from ..models import RK4_RESIDUAL_LABEL, is_rk4_residual
from .record import Derive, RunRecord, read_json, read_runs

SWEEPS: dict[str, Derive] = {"accuracy_fashion": plan.model_config}  # sweep folder -> labels → ViTConfig


def _phase(record: RunRecord, runs: Path) -> str:
    return record.folder.relative_to(runs).parts[0]


def _configuration(record: RunRecord) -> str:
    """What a run's seeds share: its labels without the seed, else its model and recipe without the seed."""
    if record.labels:
        return json.dumps({k: v for k, v in record.labels.items() if k != "seed"}, sort_keys=True, default=str)
    config = vars(record.config) if record.config is not None else {}
    return json.dumps([config, {k: v for k, v in record.recipe.items() if k != "seed"}], sort_keys=True)


def _nfe(members: list[RunRecord]) -> tuple[dict[float, list[float]], dict[float | str, list[float]]]:
    """({rtol: dopri5 NFE per seed}, {rtol: dopri5 accuracy per seed, "trained": the trained solver's}) from the
    runs' nfe.json files ({} without)."""
    nfe: dict[float, list[float]] = {}
    accuracy: dict[float | str, list[float]] = {}
    for record in members:
        stored = read_json(record.folder / plan.NFE_FILE) or {}
        for entry in stored.get("dopri5", []):
            nfe.setdefault(entry["rtol"], []).append(entry["nfe"])
            accuracy.setdefault(entry["rtol"], []).append(entry["accuracy"])
        if "trained_solver" in stored:
            accuracy.setdefault("trained", []).append(stored["trained_solver"]["accuracy"])
    return nfe, accuracy


def _group_title(members: list[RunRecord]) -> str:
    """The setting of a configuration's runs, e.g. "28², patch 4 (7×7 tokens), 6 epochs"."""
    config = members[0].config
    epochs = "/".join(str(e) for e in sorted({r.summary["epochs_done"] for r in members}))
    if config is None:
        return f"{epochs} epochs"
    side = config.image_size // config.patch_size
    return f"{config.image_size}², patch {config.patch_size} ({side}×{side} tokens), {epochs} epochs"


def _row(source: str, phase: str, members: list[RunRecord]) -> dict:
    first = members[0]
    nfe, solver_accuracy = _nfe(members)
    return dict(source=source, phase=phase, group=_group_title(members), depth=first.summary["depth"],
                mixer=first.summary["mixer"], dataset=first.summary.get("dataset", "?"),
                # the ODE form trained through one RK4 step is no solution of its ODE (docs/results/ode_solutions.md)
                label=RK4_RESIDUAL_LABEL if first.config is not None and is_rk4_residual(first.config) else "",
                image_size=first.config.image_size if first.config is not None else None,
                grid=f"{first.config.image_size // first.config.patch_size}" if first.config is not None else "?",
                values=[float(r.test_accuracy) for r in members], parameters=first.summary.get("parameters"),
                current=all(r.current for r in members), nfe=nfe, solver_accuracy=solver_accuracy,
                hosts=sorted({r.machine.get("cpu_model") or "unknown machine" for r in members}),
                epochs=statistics.mean(r.summary["epochs_done"] for r in members))


def accuracy_results(results_dir: str | Path = repository.RESULTS_DIR) -> list[dict]:
    """Configuration rows of every committed sweep's finished test runs: {source (the phase folder, from
    results_dir), phase, group (its setting), depth, mixer, label ("1 RK4 step" for an ODE model trained through
    one RK4 step, `models.is_rk4_residual`, else ""), dataset, image_size, grid (tokens per side),
    values (per-seed test accuracies, fractions), parameters, current (today's code builds the same models), nfe
    and solver_accuracy ({rtol: per-seed values} of the ODE runs' nfe.json), hosts (the CPU models that trained
    them)}. Each sweep's main phase comes first.
    Runs judged on a validation split (tuning, ablations) have no test accuracy and are left out."""
    results_dir = Path(results_dir)
    rows = []
    for runs in sorted(results_dir.glob("*/runs")):
        groups: dict[tuple[str, str], list[RunRecord]] = {}
        for record in read_runs(runs, SWEEPS.get(runs.parent.name)):
            if record.test_accuracy is not None:
                groups.setdefault((_phase(record, runs), _configuration(record)), []).append(record)
        ordered = sorted(groups.items(), key=lambda item: item[0][0] != "main")  # stable: path order otherwise
        rows += [_row(str((runs / phase).relative_to(results_dir)), phase, members)
                 for (phase, _), members in ordered]
    return rows
