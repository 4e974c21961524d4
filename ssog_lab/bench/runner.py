"""Many configurations, each in its own fresh process, and the CSV of their rows.

The child is `python -m ssog_lab.bench --one <json>` (the fields of a BenchConfig): it measures with
`measure.run_one` and prints one line, `_RESULT_TAG` + the row as JSON. A configuration that fails, runs
out of memory, is killed or exceeds its timeout becomes a row with that status, and the run goes on.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from . import report
from .config import COLUMNS, BenchConfig

_RESULT_TAG = "SSOG_LAB_BENCH_RESULT "
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
KILLED = "killed (likely OOM)"  # SIGKILL: on Linux almost always the kernel's out-of-memory killer


def _classify(error: str) -> str:
    text = error.lower()
    return "oom" if ("out of memory" in text or "can't allocate memory" in text
                     or "memoryerror" in text) else "failed"


def _failed_row(config: BenchConfig, status: str, error: str) -> dict:
    row = dict.fromkeys(COLUMNS, "")
    row.update(depth=config.depth, mixer=config.mixer, mode=config.mode, resolution=config.resolution,
               batch=config.batch, repeats=config.repeats, status=status, error=error.strip()[-300:])
    return row


def run_in_subprocess(config: BenchConfig, timeout: float | None = None, fail: bool | str = False) -> dict:
    """Run one configuration in a fresh `python -m ssog_lab.bench --one` process; a row with status "ok",
    "failed", "oom", "timeout" or KILLED. fail: True raises inside the child after the model is built,
    "kill" makes the child SIGKILL itself (tests of the reporting)."""
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be > 0 seconds (or None), got {timeout!r}")
    payload = json.dumps(dict(config.payload(), fail=fail, parent=os.getpid()))
    command = [sys.executable, "-m", "ssog_lab.bench", "--one", payload]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return _failed_row(config, "timeout", f"exceeded {timeout} s")
    for line in done.stdout.splitlines():
        if line.startswith(_RESULT_TAG):
            return json.loads(line[len(_RESULT_TAG):])
    if done.returncode == -signal.SIGKILL:
        return _failed_row(config, KILLED, f"the process got SIGKILL {done.stderr}")
    error = done.stderr or done.stdout or f"exit status {done.returncode}"
    return _failed_row(config, _classify(error), error)


def _end_with_parent(parent: int | None) -> None:
    """End this measuring process when the bench process that started it (pid `parent`) ends, however it ends:
    on Linux the kernel sends SIGKILL at the parent's death (prctl PR_SET_PDEATHSIG); a parent already gone by
    now (killed while this process started) ends it here."""
    if parent is None:
        return
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def one_main(payload: str) -> int:
    """The child's side of the protocol: measure, print the row, exit 0 (failures are rows)."""
    from .measure import run_one

    fields = json.loads(payload)
    fail = fields.pop("fail", False)
    _end_with_parent(fields.pop("parent", None))
    config = BenchConfig(**fields)
    if fail == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        row = run_one(config, fail=bool(fail))
    except Exception as error:  # reported as a row: the caller's run goes on
        text = f"{type(error).__name__}: {error}"
        row = _failed_row(config, _classify(text), text)
    print(_RESULT_TAG + json.dumps(row), flush=True)
    return 0


def run(configs: list[BenchConfig], out_dir: str | Path | None = None, timeout: float | None = 600.0,
        progress: bool = True, fail: tuple[int, ...] = ()) -> list[dict]:
    """Run every configuration in its own process (tqdm progress); rows in the order of `configs`.

    out_dir: when given, DIR/bench.csv is rewritten after each configuration (a partial run keeps its rows).
    timeout: seconds per configuration (None: no limit). fail: indices of configurations forced to fail.
    """
    from tqdm.auto import tqdm

    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be > 0 seconds (or None), got {timeout!r}")
    rows = []
    bar = tqdm(configs, desc="bench", unit="config", disable=not progress)
    for index, config in enumerate(bar):
        bar.set_postfix_str(f"{config.depth} {config.mixer} {config.resolution}² {config.mode}")
        rows.append(run_in_subprocess(config, timeout=timeout, fail=index in fail))
        if out_dir is not None:
            write_csv(rows, Path(out_dir) / "bench.csv")
    return rows


def write_csv(rows: list[dict], path: str | Path) -> Path:
    """Bench rows as CSV with the columns of `COLUMNS`."""
    return report.write_csv(rows, path, COLUMNS)


_NUMERIC = {"resolution": int, "tokens": int, "batch": int, "params": int, "nfe": int, "repeats": int,
            "threads": int, "images_per_s": float, "seconds_per_batch": float, "best_images_per_s": float,
            "peak_mb": float}


def load_csv(path: str | Path) -> list[dict]:
    """Rows of a bench.csv with numbers parsed (empty cells of failed rows become None), `flush_denormal` a bool."""
    import csv

    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        for key, kind in _NUMERIC.items():
            if key in row:
                row[key] = kind(row[key]) if row[key] not in ("", None) else None
        if "flush_denormal" in row:
            row["flush_denormal"] = {"True": True, "False": False}.get(row["flush_denormal"])
    return rows
