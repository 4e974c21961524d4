"""Shared test set-up. The Triton interpreter must be switched on before triton is first imported.

The notebooks' tests run last, and the notebooks they read are executed in the background while the other tests
run (one nbconvert at a time, beside a test process that mostly keeps one core busy): see `executed`.
"""

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import nbformat
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_TIMEOUT_S = 600
_THREADS = torch.get_num_threads()  # torch's default (OMP_NUM_THREADS, else one per core)

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_collection_modifyitems(config, items):
    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="needs a CUDA GPU (none on this machine)")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)
    # The tests that read executed notebooks go last (in their own order), so that their notebooks can execute
    # while the others run.
    items.sort(key=lambda item: "executed" in getattr(item, "fixturenames", ()))


def pytest_collection_finish(session):
    """Start executing the notebooks the selected tests will read, in the background (see `executed`)."""
    if session.config.option.collectonly or session.testsfailed:  # nothing will run
        return
    wanted = notebooks_wanted(session.items)
    if wanted:
        session.config.stash[_EXECUTIONS] = _Executions(wanted, Path(tempfile.mkdtemp(prefix="ssog_lab_executed_")))


def pytest_runtest_setup(item):
    """A test's own torch ops get one thread while a notebook executes in the background, every core otherwise:
    two threads beside the notebook's would share a core with it, and OpenMP's threads, each waiting for the
    slowest, then run at about half speed (one process per core, as the long jobs run). Subprocesses that a test
    starts choose their own threads. The `executed` fixture gives the threads back once the notebooks are done."""
    executions = item.config.stash.get(_EXECUTIONS, None)
    _set_threads(1 if executions is not None and executions.busy() else _THREADS)


def _set_threads(threads: int) -> None:
    if torch.get_num_threads() != threads:  # setting it rebuilds the thread pools: only on a change
        torch.set_num_threads(threads)


def pytest_sessionfinish(session):
    executions = session.config.stash.get(_EXECUTIONS, None)
    if executions is not None:
        executions.cancel()  # a session cut short (-x, Ctrl-C) stops its nbconvert
        shutil.rmtree(executions.folder, ignore_errors=True)


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


class _Executions:
    """Notebooks executed the ordinary way (see `executed`), each once, by worker threads that take the next
    pending notebook until none is left: one worker from the start of the session (beside the other tests), more
    when `wait` is called (then nothing else runs). Each worker runs its nbconvert as a subprocess with one thread
    (OMP_NUM_THREADS=1: one process per core); `cancel` stops them (the kernel exits with its nbconvert)."""

    def __init__(self, notebooks: list[Path], folder: Path):
        self.pending = list(notebooks)
        self.results: dict[Path, tuple[nbformat.NotebookNode, str] | str] = {}
        self.folder, self.second = folder, folder / "second_pass"
        self.second.mkdir()
        self.lock = threading.Lock()
        self.running: set[subprocess.Popen] = set()
        self.cancelled = False
        self.env = {**os.environ, "SSOG_LAB_FAST": "1", "OMP_NUM_THREADS": "1",
                    "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "tests"), os.environ.get("PYTHONPATH")]))}
        self.workers = [threading.Thread(target=self._work, daemon=True)]
        self.workers[0].start()

    def _work(self) -> None:
        while True:
            with self.lock:
                if not self.pending:
                    return
                path = self.pending.pop(0)
            self.results[path] = self.execute(path)

    def _nbconvert(self, *args: str) -> str | None:
        """None, or why it failed: its stderr's end, a timeout, or a cancel."""
        with self.lock:
            if self.cancelled:
                return "cancelled"
            process = subprocess.Popen([sys.executable, "-m", "jupyter", "nbconvert", *args], env=self.env,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            self.running.add(process)
        try:
            _, stderr = process.communicate(timeout=NOTEBOOK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            _, stderr = process.communicate()
            return f"timed out after {NOTEBOOK_TIMEOUT_S} s:\n{stderr[-5000:]}"
        finally:
            with self.lock:
                self.running.discard(process)
        return None if process.returncode == 0 else stderr[-5000:]

    def execute(self, path: Path) -> tuple[nbformat.NotebookNode, str] | str:
        """The executed notebook and its HTML, or why it failed (a timeout too): kept for the tests of that
        notebook only, not the whole session."""
        out = self.folder / path.name
        try:
            error = (self._nbconvert("--to", "notebook", '--NotebookExporter.preprocessors=["run_twice.ExecuteTwice"]',
                                     f"--ExecuteTwice.second_pass_dir={self.second}", "--output-dir",
                                     str(self.folder), str(path))
                     or self._nbconvert("--to", "html", str(out)))
            return error or (nbformat.read(out, as_version=4), out.with_suffix(".html").read_text())
        except Exception as failure:
            return f"{type(failure).__name__}: {failure}"

    def busy(self) -> bool:
        """Whether a worker is still executing notebooks."""
        return any(worker.is_alive() for worker in self.workers)

    def cancel(self) -> None:
        """Start no other nbconvert, stop the running ones, and wait for the workers."""
        with self.lock:
            self.pending.clear()
            self.cancelled = True
            for process in self.running:
                process.terminate()
        for worker in self.workers:
            worker.join()

    def wait(self) -> None:
        """Every wanted notebook executed: one worker per core from now on."""
        cores = len(os.sched_getaffinity(0))
        with self.lock:
            extra = min(cores - 1, len(self.pending))  # beside the worker already running
        for _ in range(extra):
            self.workers.append(threading.Thread(target=self._work, daemon=True))
            self.workers[-1].start()
        for worker in self.workers:
            worker.join()


_EXECUTIONS = pytest.StashKey[_Executions]()


@pytest.fixture(scope="session")
def load_script():
    """name -> the module of scripts/<name>.py, imported from its file (scripts/ is not a package)."""
    def load(name: str):
        spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    return load


@pytest.fixture(scope="session")
def executed(request, tmp_path_factory):
    """path -> (executed notebook, its HTML), made the ordinary way, with default settings:

        jupyter nbconvert --to notebook --execute NOTEBOOK     (kernel in notebooks/, widget state stored)
        jupyter nbconvert --to html EXECUTED_NOTEBOOK           (what `--execute --to html` renders)

    in fast mode, each notebook at most once per session (tests/test_notebook_render.py, tests/test_browser.py).
    The notebooks that the session's selected tests ask for start executing when collection ends, one at a time
    beside the other tests (which meanwhile get one thread each, `pytest_runtest_setup`); the tests that read them
    run last, and the first of them waits for the rest, executed one per core: the browser tests that follow run
    on a quiet machine.
    The project's environment configures nbconvert's HTML export (jupyter-config/, installed by `make`).
    The execution is `--execute`'s preprocessor run twice in one kernel (tests/run_twice.py): the notebook is the
    first pass, and `executed.second(path)` reads the second (Run All again, in the same kernel).
    """
    executions = request.config.stash.get(_EXECUTIONS, None)
    if executions is None:  # no collected test asked for a notebook: `run` executes what it is given
        executions = _Executions([], tmp_path_factory.mktemp("executed"))
    executions.wait()
    _set_threads(_THREADS)  # the machine is quiet now (this test's setup ran while the notebooks executed)

    def run(path: Path) -> tuple[nbformat.NotebookNode, str]:
        if path not in executions.results:
            executions.results[path] = executions.execute(path)
        result = executions.results[path]
        if isinstance(result, str):
            pytest.fail(f"{path.name} failed in nbconvert:\n{result}")
        return result

    def second_pass(path: Path) -> nbformat.NotebookNode:
        run(path)
        return nbformat.read(executions.second / f"{path.stem}.second.ipynb", as_version=4)

    run.second = second_pass
    return run
