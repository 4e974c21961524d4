"""How long each notebook takes to run top to bottom, in full and in fast mode (`SSOG_LAB_FAST=1`): the figures
behind each notebook's "Running time" line.

Each notebook is executed by nbclient in a fresh kernel from `notebooks/` (as the tests do), one at a time, first
in full mode then in fast mode; the wall time of the whole execution, kernel start included, goes to a markdown
file with the machine, the commit, the date and the load average before and after (other work on the machine
slows the notebooks, so the file says how quiet it was).

    python scripts/notebook_times.py                  # every notebook → docs/results/notebook_times.md
    python scripts/notebook_times.py --modes fast     # fast mode only
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from ..repository import RESULTS_DIR, ROOT
from .measure import git_commit, machine
from .report import markdown_table

NOTEBOOKS = ROOT / "notebooks"
OUT = RESULTS_DIR / "notebook_times.md"  # the committed measurement the notebooks quote
MODES = {"full": "0", "fast": "1"}  # mode → SSOG_LAB_FAST
CELL_TIMEOUT_S = 1800


def execute_seconds(path: Path, fast: bool) -> float:
    """Wall seconds to execute the notebook at `path` in a fresh kernel (its outputs are discarded)."""
    nb = nbformat.read(path, as_version=4)
    os.environ["SSOG_LAB_FAST"] = MODES["fast" if fast else "full"]  # the kernel inherits this environment
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", store_widget_state=False,
                            resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.execute()
    return time.perf_counter() - start


def report(rows: list[dict], modes: list[str], command: str, loads: tuple[float, float]) -> str:
    """The markdown file: what was measured, where, and one line per notebook."""
    m = machine()
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    columns = {"notebook": lambda r: f"`{r['notebook']}`",
               **{f"{mode} mode, s": (lambda mode: lambda r: f"{r[mode]:.0f}")(mode) for mode in modes}}
    return "\n".join([
        "# Notebook running times", "",
        "Wall time to execute each notebook top to bottom in a fresh kernel (nbclient, kernel start included, as "
        "the tests run them), full mode and fast mode (`SSOG_LAB_FAST=1`). The time you spend with the widgets "
        "is not included. Each notebook's \"Running time\" line quotes this file.", "",
        f"- Machine: {m['cpu_model']} ({m['cpu_vendor']}; {m['cpu_flags'] or 'no AVX-512 or AMX'}), "
        f"{os.cpu_count()} cores, no GPU used; 1-minute load "
        f"average {loads[0]:.1f} before and {loads[1]:.1f} after (other work on the machine slows the notebooks).",
        f"- Date: {stamp}; code at commit {git_commit() or 'unknown (not a git checkout)'}.",
        f"- Command: `{command}`", "",
        markdown_table(rows, columns, align="l" + "r" * len(modes)), ""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook in notebooks/")
    parser.add_argument("--modes", nargs="+", choices=tuple(MODES), default=list(MODES))
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.notebooks] or sorted(NOTEBOOKS.glob("*.ipynb"))
    if not paths:
        parser.error(f"notebooks: none given and none found in {NOTEBOOKS}")
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        parser.error(f"notebooks: no such file: {', '.join(missing)}")
    before = os.getloadavg()[0]
    rows = []
    for path in paths:
        row = {"notebook": path.name}
        for mode in args.modes:
            row[mode] = execute_seconds(path, fast=mode == "fast")
            print(f"{path.name} {mode}: {row[mode]:.1f} s", flush=True)
        rows.append(row)
    command = "python scripts/notebook_times.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = report(rows, args.modes, command.strip(), (before, os.getloadavg()[0]))
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
