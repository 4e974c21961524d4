"""Shared test set-up. The Triton interpreter must be switched on before triton is first imported."""

import os
from pathlib import Path

import nbformat
import pytest
import torch
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from nbconvert import HTMLExporter

ROOT = Path(__file__).resolve().parents[1]
CELL_TIMEOUT_S = 300

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
def executed():
    """path -> (executed notebook, its nbconvert HTML); each notebook runs at most once per session, in fast
    mode, in its folder, without storing widget state (tests/test_notebook_render.py, tests/test_browser.py)."""
    cache: dict[Path, tuple[nbformat.NotebookNode, str] | Exception] = {}
    env = {**os.environ, "SSOG_LAB_FAST": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}

    def run(path: Path) -> tuple[nbformat.NotebookNode, str]:
        if path not in cache:
            nb = nbformat.read(path, as_version=4)
            client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", store_widget_state=False,
                                    resources={"metadata": {"path": str(path.parent)}})
            try:
                client.execute(env=env)
                cache[path] = nb, HTMLExporter(template_name="lab").from_notebook_node(nb)[0]
            except CellExecutionError as error:
                cache[path] = error
        result = cache[path]
        if isinstance(result, Exception):
            pytest.fail(f"{path.name} raised while running:\n{result}")
        return result

    return run
