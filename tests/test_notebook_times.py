"""The notebooks' running times: ssog_lab.bench.notebook_times (scripts/notebook_times.py) measures them,
and each notebook's "Running time" line quotes the committed measurement (docs/results/notebook_times.md) rather
than a figure nobody measured."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

from ssog_lab.bench import notebook_times

ROOT = Path(__file__).resolve().parents[1]
TIMES = ROOT / "docs" / "results" / "notebook_times.md"


def stored_times() -> dict[str, dict[str, int]]:
    """{notebook file name: {"full": s, "fast": s}} from the committed file's table."""
    out = {}
    for line in TIMES.read_text().splitlines():
        if match := re.fullmatch(r"\| `(\S+\.ipynb)` \| (\d+) \| (\d+) \|", line):
            out[match[1]] = {"full": int(match[2]), "fast": int(match[3])}
    return out


def test_the_script_runs_each_mode_in_a_fresh_kernel_and_reports_where(tmp_path, monkeypatch):
    monkeypatch.setenv("SSOG_LAB_FAST", "unset")
    seen = tmp_path / "seen.txt"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        f"import os\nwith open({str(seen)!r}, 'a') as f:\n    f.write(os.environ['SSOG_LAB_FAST'])")])
    path, out = tmp_path / "tiny.ipynb", tmp_path / "times.md"
    nbformat.write(nb, path)
    assert notebook_times.main([str(path), "--out", str(out)]) == 0
    assert seen.read_text() == "01"  # full mode, then fast mode, each in its own kernel
    text = out.read_text()
    assert re.search(r"^\| `tiny\.ipynb` \| \d+ \| \d+ \|$", text, re.M)
    assert "- Machine: " in text and "load average" in text and "commit" in text
    assert f"scripts/notebook_times.py {path} --out {out}" in text


def test_by_default_it_times_the_course_and_writes_the_committed_file(tmp_path, monkeypatch):
    assert notebook_times.NOTEBOOKS == ROOT / "notebooks"
    assert notebook_times.OUT == TIMES
    monkeypatch.setattr(notebook_times, "NOTEBOOKS", tmp_path)  # no notebook there: an error, not an empty table
    with pytest.raises(SystemExit):
        notebook_times.main(["--out", str(tmp_path / "times.md")])
    assert not (tmp_path / "times.md").exists()


def test_every_notebook_quotes_its_measured_running_time():
    stored = stored_times()
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert sorted(stored) == [p.name for p in notebooks], "notebook_times.md covers every notebook"
    for path in notebooks:
        first = "".join(json.loads(path.read_text())["cells"][0]["source"])
        line = next((x for x in first.splitlines() if x.startswith("**Running time**")), "")
        full = re.search(r"(\d+) s top to bottom", line)
        fast = re.search(r"(\d+) s with `SSOG_LAB_FAST=1`", line)
        assert full and fast and "docs/results/notebook_times.md" in line, f"{path.name}: {line!r}"
        assert {"full": int(full[1]), "fast": int(fast[1])} == stored[path.name], path.name
