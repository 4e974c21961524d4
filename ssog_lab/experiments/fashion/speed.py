"""speed.csv as the Fashion-MNIST report reads it (`report.py`): each run's rows by its exact model,
the table cells of a measurement, and the section that lists every measurement with where it was made."""

from __future__ import annotations

import json
from collections.abc import Callable

from ...bench.report import markdown_table
from . import plan
from .measure import SPEED_RESOLUTIONS, SweepRun, speed_key, speed_model_key


def speed_index(rows: list[dict]) -> dict[tuple, dict]:
    """speed.csv rows by (depth, mixer, patch, model overrides, resolution); the last row of a model wins."""
    return {speed_key(r)[:-1]: r for r in rows}


def run_speed(run: SweepRun, speed: dict[tuple, dict] | None) -> dict[int, dict | None]:
    """{resolution: the speed.csv row of `run`'s model (None when not measured)}."""
    return {res: (speed or {}).get((*speed_model_key(run), res)) for res in SPEED_RESOLUTIONS}


def ok_speed(row: dict | None) -> float | None:
    return float(row["images_per_s"]) if row and row.get("status") == "ok" else None


def rate(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def infer_cell(resolution: int) -> Callable[[dict], str]:
    def cell(row: dict) -> str:
        measured = row["infer"][resolution]
        if measured is None:
            return "–"
        return rate(float(measured["images_per_s"])) if measured["status"] == "ok" else measured["status"]
    return cell


def speed_section(speed_rows: list[dict]) -> list[str]:
    """The inference measurements (speed.csv) and where they were made; one line when there are none."""
    if not speed_rows:
        return ["No inference measurements yet (speed.csv: `python scripts/fashion_sweep.py speed`, run once the "
                "tuning has finished)."]
    first = next((r for r in speed_rows if r["status"] == "ok"), speed_rows[0])
    where = (f"Inference under `torch.inference_mode()`, untrained weights, batch {first['batch']}, "
             f"{first.get('threads') or 1} thread, median of the timed batches, one process per configuration "
             f"(`ssog_lab.bench`), on {first.get('cpu_model') or first.get('device')}, torch {first.get('torch')}, "
             f"{_provenance(speed_rows)}.")
    columns = {"depth": "depth", "mixer": "mixer", "patch": "patch", "model": model_cell,
               "resolution": lambda r: f"{r['resolution']}²",
               "tokens": "tokens", "parameters": lambda r: f"{r['params']:,}" if r.get("params") else "",
               "images/s": lambda r: rate(r["images_per_s"]) if r["status"] == "ok" else "",
               "best images/s": lambda r: rate(r["best_images_per_s"]) if r["status"] == "ok" else "",
               "peak MB": lambda r: f"{r['peak_mb']:.0f}" if r["status"] == "ok" else "", "status": "status"}
    return [where, "", markdown_table(speed_rows, columns, align="llrlrrrrrrl")]


def host_of(speed_rows: list[dict]) -> str:
    """The CPU (or device) a speed file was measured on, from its first row, with its vector ISA: CPUs of one
    name differ in it ("AMD EPYC" hosts with and without AVX-512 have both served here)."""
    row = speed_rows[0] if speed_rows else {}
    if not row.get("cpu_model"):
        return row.get("device") or "an unrecorded machine"
    flags = str(row.get("cpu_flags") or "").split()
    isa = "AVX-512, AMX" if any(f.startswith("amx") for f in flags) else "AVX-512" if "avx512f" in flags else \
        "no AVX-512"
    return f"{row['cpu_model']}, {isa}"


def _provenance(speed_rows: list[dict]) -> str:
    """The code and the time the rows were measured at ("commit X, 2026-12-03 14:38 UTC"), as speed.csv records
    them; rows from before it recorded them are counted as such."""
    stamps = sorted({(r["commit"], r["measured"]) for r in speed_rows if r.get("commit")}, key=lambda s: s[1])
    commits = list(dict.fromkeys(commit for commit, _ in stamps))
    text = (f"commit {', '.join(commits)}, {stamps[0][1]}" + (f" to {stamps[-1][1]}" if len(stamps) > 1 else "")
            if stamps else "")
    missing = sum(not r.get("commit") for r in speed_rows)
    return "; ".join(filter(None, [text, f"{missing} rows without a recorded commit" if missing else ""]))


def model_cell(row: dict) -> str:
    """The tuned model settings of a speed.csv row (its overrides: heads, SSoG heads, atoms)."""
    overrides = row["overrides"] if isinstance(row["overrides"], dict) else json.loads(row["overrides"] or "{}")
    return ", ".join(f"{k}={overrides[k]}" for k in plan.HYPER_FIELDS if k in overrides)
