"""Shared test set-up. The Triton interpreter must be switched on before triton is first imported."""

import os
import subprocess
import sys
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


@pytest.fixture(scope="session")
def executed(tmp_path_factory):
    """path -> (executed notebook, its HTML), made the ordinary way, with default settings:

        jupyter nbconvert --to notebook --execute NOTEBOOK     (kernel in notebooks/, widget state stored)
        jupyter nbconvert --to html EXECUTED_NOTEBOOK           (what `--execute --to html` renders)

    in fast mode, each notebook at most once per session (tests/test_notebook_render.py, tests/test_browser.py).
    The project's environment configures nbconvert's HTML export (jupyter-config/, installed by `make`).
    The execution is `--execute`'s preprocessor run twice in one kernel (tests/run_twice.py): the notebook is the
    first pass, and `executed.second(path)` reads the second (Run All again, in the same kernel).
    """
    cache: dict[Path, tuple[nbformat.NotebookNode, str] | str] = {}
    folder = tmp_path_factory.mktemp("executed")
    second = folder / "second_pass"
    second.mkdir()
    env = {**os.environ, "SSOG_LAB_FAST": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "tests"), os.environ.get("PYTHONPATH")]))}

    def nbconvert(*args: str) -> str | None:
        done = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", *args], env=env, capture_output=True,
                              text=True, timeout=NOTEBOOK_TIMEOUT_S)
        return None if done.returncode == 0 else done.stderr[-5000:]

    def run(path: Path) -> tuple[nbformat.NotebookNode, str]:
        if path not in cache:
            out = folder / path.name
            error = (nbconvert("--to", "notebook", '--NotebookExporter.preprocessors=["run_twice.ExecuteTwice"]',
                               f"--ExecuteTwice.second_pass_dir={second}", "--output-dir", str(folder), str(path))
                     or nbconvert("--to", "html", str(out)))
            cache[path] = error or (nbformat.read(out, as_version=4), out.with_suffix(".html").read_text())
        result = cache[path]
        if isinstance(result, str):
            pytest.fail(f"{path.name} failed in nbconvert:\n{result}")
        return result

    def second_pass(path: Path) -> nbformat.NotebookNode:
        run(path)
        return nbformat.read(second / f"{path.stem}.second.ipynb", as_version=4)

    run.second = second_pass
    return run
