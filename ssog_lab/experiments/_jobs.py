"""What every experiment needs to run its plan: single-thread child processes, a few at a time, each printing its
result row as JSON on its last line, and a CSV of finished rows rewritten atomically after each one."""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..train.atomic import atomic_write


def log(message: str) -> None:
    """A timestamped progress line on stderr (the log of a background job)."""
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def start_child(module_argv: list[str]) -> subprocess.Popen:
    """`python -m <module_argv>` as a single-thread child process; its stdout is piped (its last line: the row)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", *module_argv], env=env, stdout=subprocess.PIPE, text=True)


def check_run_flags(parser: argparse.ArgumentParser, jobs: int, seeds: Sequence[int] | None = None) -> None:
    """parser.error (exit 2, before anything runs) unless jobs ≥ 1 and the seeds, where the command takes them, are
    distinct and ≥ 0: a repeated seed would be one run counted twice, a spread measured from nothing."""
    if seeds is not None and (not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds)):
        parser.error(f"--seeds must be distinct integers ≥ 0, got {list(seeds)}")
    if jobs < 1:
        parser.error(f"--jobs must be ≥ 1, got {jobs}")


def run_children(pending: Sequence[Any], jobs: int, start: Callable[[Any], subprocess.Popen],
                 on_row: Callable[[Any, dict], None]) -> int:
    """Run every pending run in the process `start(run)` returns (`start_child`), `jobs` at once; `on_row(run,
    row)` gets the JSON row each prints last, as soon as it finishes. Returns the number of failed runs."""
    if not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive integer, got {jobs!r}")
    queue, running, failures = list(pending), {}, 0
    while queue or running:
        while queue and len(running) < jobs:
            run = queue.pop(0)
            running[start(run)] = run
            log(f"start {run}")
        process = _wait_any(running)
        run = running.pop(process)
        out = process.stdout.read().strip().splitlines()
        if process.returncode == 0 and out:
            on_row(run, json.loads(out[-1]))
        else:
            failures += 1
            log(f"FAILED {run} (exit {process.returncode})")
    return failures


def _wait_any(running: dict[subprocess.Popen, Any]) -> subprocess.Popen:
    while True:
        for process in running:
            if process.poll() is not None:
                return process
        time.sleep(1.0)


def read_csv(path: Path, numbers: dict[str, type]) -> list[dict]:
    """The rows of a results CSV (none if it does not exist), the `numbers` columns parsed with their type; an
    empty or absent cell (a column added after the row was measured, or one that does not apply) is None."""
    if not path.exists():
        return []
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        for key, kind in numbers.items():
            row[key] = kind(row[key]) if row.get(key) not in (None, "") else None
    return rows


def write_csv(rows: list[dict], path: Path, columns: Sequence[str], sort_key: Callable[[dict], Any]) -> None:
    """All rows, sorted, written atomically (a kill never leaves half a file)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows(sorted(rows, key=sort_key))
    atomic_write(path, buffer.getvalue())


def hosts(rows: list[dict]) -> str:
    """The machines a results CSV's rows ran on, as its report names them: CPU model, ISA flags, threads."""
    return "; ".join(sorted({f"{r['cpu_model']} ({r['cpu_flags'] or 'no AVX-512/AMX'}), {r['threads']} thread"
                             for r in rows}))
