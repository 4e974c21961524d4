"""Shared test set-up. The Triton interpreter must be switched on before triton is first imported."""

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_TIMEOUT_S = 600

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (none on this machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _skipped(item: pytest.Item) -> bool:
    """Whether a skip marker, or a skipif whose condition is already True, skips `item`."""
    return any(mark.name == "skip" or (mark.name == "skipif" and any(arg is True for arg in mark.args))
               for mark in item.iter_markers())


def notebooks_wanted(items: list[pytest.Item]) -> list[Path]:
    """The notebooks that the tests in `items` that will run ask `executed` for: each test's notebook parameter
    (a path, or a name in notebooks/), and every notebook for the static site's tests (the `site` fixture publishes
    them all) and for a test that uses `executed` without naming a notebook."""
    all_notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    wanted: set[Path] = set()
    for item in items:
        names = getattr(item, "fixturenames", ())
        if "executed" not in names or _skipped(item):
            continue
        params = item.callspec.params.values() if hasattr(item, "callspec") else ()
        named = [p for p in all_notebooks for value in params if value in (p, p.stem)]
        wanted.update(all_notebooks if "site" in names or not named else named)
    return sorted(wanted)


@pytest.fixture(scope="session")
def executed(request, tmp_path_factory):
    """path -> (executed notebook, its HTML), made the ordinary way, with default settings:

        jupyter nbconvert --to notebook --execute NOTEBOOK     (kernel in notebooks/, widget state stored)
        jupyter nbconvert --to html EXECUTED_NOTEBOOK           (what `--execute --to html` renders)

    in fast mode, each notebook at most once per session (tests/test_notebook_render.py, tests/test_browser.py).
    Every notebook the session's tests will ask for is executed when the fixture is first used, one nbconvert per
    core at a time: the executions overlap instead of queueing, and the browser tests that follow run on a quiet
    machine.
    The project's environment configures nbconvert's HTML export (jupyter-config/, installed by `make`).
    The execution is `--execute`'s preprocessor run twice in one kernel (tests/run_twice.py): the notebook is the
    first pass, and `executed.second(path)` reads the second (Run All again, in the same kernel).
    """
    cache: dict[Path, tuple[nbformat.NotebookNode, str] | str] = {}
    folder = tmp_path_factory.mktemp("executed")
    second = folder / "second_pass"
    second.mkdir()
    wanted = notebooks_wanted(request.session.items)
    cores = len(os.sched_getaffinity(0))
    workers = max(1, min(cores, len(wanted)))
    # One nbconvert per core: each kernel's torch gets its share of the cores, not all of them.
    env = {**os.environ, "SSOG_LAB_FAST": "1", "OMP_NUM_THREADS": str(max(1, cores // workers)),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "tests"), os.environ.get("PYTHONPATH")]))}

    def nbconvert(*args: str) -> str | None:
        done = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", *args], env=env, capture_output=True,
                              text=True, timeout=NOTEBOOK_TIMEOUT_S)
        return None if done.returncode == 0 else done.stderr[-5000:]

    def execute(path: Path) -> None:
        """Into the cache: the executed notebook and its HTML, or why it failed (a timeout too), which `run`
        reports in the tests of that notebook only."""
        if path in cache:
            return
        out = folder / path.name
        try:
            error = (nbconvert("--to", "notebook", '--NotebookExporter.preprocessors=["run_twice.ExecuteTwice"]',
                               f"--ExecuteTwice.second_pass_dir={second}", "--output-dir", str(folder), str(path))
                     or nbconvert("--to", "html", str(out)))
            cache[path] = error or (nbformat.read(out, as_version=4), out.with_suffix(".html").read_text())
        except Exception as failure:  # kept for the notebook's own tests, not the whole session
            cache[path] = f"{type(failure).__name__}: {failure}"

    def run(path: Path) -> tuple[nbformat.NotebookNode, str]:
        execute(path)
        result = cache[path]
        if isinstance(result, str):
            pytest.fail(f"{path.name} failed in nbconvert:\n{result}")
        return result

    def second_pass(path: Path) -> nbformat.NotebookNode:
        run(path)
        return nbformat.read(second / f"{path.stem}.second.ipynb", as_version=4)

    run.second = second_pass
    with ThreadPoolExecutor(max_workers=workers) as pool:  # each job waits on its own subprocesses
        list(pool.map(execute, wanted))
    return run
