"""The notebooks in a real browser: Debian's Chromium, driven by Playwright, opens every notebook in JupyterLab
(one server for all), runs all its cells, and moves the main control of **every** live figure (its first slider,
else its first dropdown with a choice, else its checkbox); each figure must redraw on the first try, with no cell
re-run. Each notebook does this twice: on an idle machine, and with both cores kept busy by two busy loops (the
front-end must not depend on the machine's speed or load). And every notebook as executed by the `executed`
fixture (conftest.py), opened without running it, shows each of its figures as a drawn plot.

This is the one test that sees what a learner sees: widget and plotly front-ends loaded, the kernel
answering the browser's comm messages, the figure actually drawn. Screenshots land in a temporary folder
whose path is printed (shown by pytest for failing tests, or with `-s`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest
from playwright.sync_api import Page, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from ssog_lab import book
from ssog_lab.viz.render import CONTROLS_NOTE, PLOTLY_MIME

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# Every notebook, found by name: 15–40 s each to open and run in fast mode on a 2-core machine when idle.
NOTEBOOKS = sorted(path.stem for path in (ROOT / "notebooks").glob("*.ipynb"))
RUN_ALL_TIMEOUT_S = 240  # one notebook in fast mode on a busy 2-core machine

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                       reason="Chromium not installed (`make test` installs it as root; else sudo apt-get install "
                              "chromium)"),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def lab_api(base: str, token: str, path: str, method: str = "GET"):
    request = urllib.request.Request(f"{base}/api/{path}", method=method,
                                     headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read()
    return json.loads(body) if body else None


def shut_down(base: str, token: str, kind: str) -> None:
    """Delete every item of `kind` ("sessions" or "kernels") on the server; nothing to do if it is gone."""
    with contextlib.suppress(OSError):
        for item in lab_api(base, token, kind):
            lab_api(base, token, f"{kind}/{item['id']}", method="DELETE")


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """JupyterLab on a free loopback port over a temporary copy of notebooks/, kernels in fast mode.

    Jupyter's config, data, runtime, settings and workspace folders are fresh temporary ones, so neither
    the user's settings nor a stale workspace change what the browser sees. Yields (base URL, token, log file,
    the served folder).
    """
    home = tmp_path_factory.mktemp("jupyter")
    notebooks = home / "notebooks"
    shutil.copytree(ROOT / "notebooks", notebooks, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    lab_settings = {
        # Attach every cell to the DOM, so outputs below the fold exist and render like the visible ones.
        "notebook-extension/tracker": {"windowingMode": "none"},
        # Neither ask about nor fetch the news feed (a toast over the screenshots, a request to the web).
        "apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    }
    for plugin, values in lab_settings.items():
        file = home / "settings" / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(json.dumps(values))
    (home / "config").mkdir()
    (home / "config" / "jupyter_server_config.json").write_text(json.dumps({
        "LabApp": {
            "expose_app_in_browser": True,  # window.jupyterapp: run commands and read cell models
            "user_settings_dir": str(home / "settings"),
            "workspaces_dir": str(home / "workspaces"),
            "news_url": None,  # no announcements feed: no network
            "check_for_updates_class": "jupyterlab.NeverCheckForUpdate",
        },
    }))
    port, token = free_port(), os.urandom(16).hex()
    env = {**os.environ, "SSOG_LAB_FAST": "1", "JUPYTER_CONFIG_DIR": str(home / "config"),
           "JUPYTER_DATA_DIR": str(home / "data"), "JUPYTER_RUNTIME_DIR": str(home / "runtime")}
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--ServerApp.root_dir={notebooks}",
               "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
               f"--IdentityProvider.token={token}"]
    if os.getuid() == 0:
        command.append("--allow-root")
    log_path = home / "jupyter.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(command, cwd=notebooks, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                lab_api(base, token, "status")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not answer on {base}:\n{log_path.read_text()[-3000:]}")
                time.sleep(0.5)
        yield base, token, log_path, notebooks
    finally:
        shut_down(base, token, "kernels")
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    """Headless Chromium with a fresh, empty profile and no background networking."""
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1400, "height": 1000})
        context.set_default_timeout(60_000)
        yield context
        context.close()


@dataclass
class LabPage:
    """A browser page with JupyterLab loaded, and the errors the page reported since the current test took it."""
    page: Page
    errors: list[str] = field(default_factory=list)


@pytest.fixture(scope="session")
def lab_page(lab, browser):
    """kind -> the JupyterLab page that the tests of that kind share, one kind open at a time (the tests come
    grouped by kind: every notebook idle, then every notebook busy, then the executed files).

    A learner loads the lab once and opens one notebook after another in it; the tests do the same, so the lab's
    own JavaScript loads once per kind, inside the caller's machine load (the busy page loads with both cores
    busy), and plotly.js once per page, when the first notebook's first figure draws. Each notebook still gets
    its own kernel and widget manager. A page that a failed test closed (see `notebook_open`) is replaced, so one
    notebook's failure cannot leave anything behind for the next."""
    base, token, _, _ = lab
    current: dict[str, LabPage] = {}

    def page_for(kind: str) -> LabPage:
        if kind in current and not current[kind].page.is_closed():
            current[kind].errors.clear()
            return current[kind]
        for shared in current.values():
            shared.page.close()
        current.clear()
        shared = LabPage(browser.new_page())
        shared.page.on("console", lambda m: m.type == "error" and shared.errors.append(m.text[:300]))
        shared.page.on("pageerror", lambda error: shared.errors.append(str(error)[:300]))
        try:
            # `reset`: start from an empty workspace, not from one a previous run left.
            shared.page.goto(f"{base}/lab?reset&token={token}")
            shared.page.wait_for_function("() => window.jupyterapp")
            shared.page.evaluate(LAB_READY_JS)
        except BaseException:
            shared.page.close()
            raise
        current[kind] = shared
        return shared

    yield page_for
    for shared in current.values():
        shared.page.close()


@contextlib.contextmanager
def notebook_open(shared: LabPage, path: str, to_run: bool):
    """Open `path` in the shared lab page (to run: its kernel ready and its outputs cleared); yields the notebook's
    locator, and closes the notebook afterwards (the caller shuts its kernel down). If opening it or the caller's
    block fails, or it does not close, the page is closed instead: the next test loads a fresh one."""
    failed = True
    try:
        yield shared.page.locator(f"#{shared.page.evaluate(OPEN_NOTEBOOK_JS, [path, to_run])}")
        shared.page.evaluate(CLOSE_NOTEBOOK_JS)
        failed = False
    finally:
        if failed:
            shared.page.close()


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory):
    """Where each notebook's screenshot goes: a temporary folder, or SSOG_LAB_SCREENSHOTS (the README's picture:
    `SSOG_LAB_SCREENSHOTS=docs/images pytest tests/test_browser.py -k "follows and 01_ and idle"`)."""
    chosen = os.environ.get("SSOG_LAB_SCREENSHOTS")
    folder = Path(chosen).resolve() if chosen else tmp_path_factory.mktemp("browser-screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots of the notebooks in the browser: {folder}")
    return folder


# JavaScript run in the page. `window.jupyterapp` is the JupyterLab application (expose_app_in_browser).
# The lab has loaded and restored its (reset, empty) workspace.
LAB_READY_JS = "async () => { await window.jupyterapp.restored; }"

# Open the notebook at `path` in the running lab and keep its panel as window.panel for the snippets below; to run
# it, wait for its kernel and clear its outputs (blank prompts: [n] is ours). Returns the panel's id.
OPEN_NOTEBOOK_JS = """async ([path, toRun]) => {
    await window.jupyterapp.commands.execute('docmanager:open', {path});
    window.panel = [...window.jupyterapp.shell.widgets('main')].find(w => w.context?.path === path);
    window.jupyterapp.shell.activateById(window.panel.id);
    await window.panel.context.ready;
    if (toRun) {
        await window.panel.sessionContext.ready;
        await window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs');
    }
    return window.panel.id;
}"""

# Close the notebook without the unsaved-changes dialog (dispose, not close: its outputs changed).
CLOSE_NOTEBOOK_JS = "() => { window.panel?.dispose(); window.panel = undefined; }"

# Start Run All without awaiting it here: its promise resolves (true, or false after an error) in window.
RUN_ALL_JS = """() => {
    window.runAllResult = undefined;
    window.jupyterapp.commands.execute('notebook:run-all-cells').then(ok => { window.runAllResult = ok; });
}"""

# Run All has settled: its promise resolved, the kernel is idle, no cell is queued or running ([*]);
# or the kernel died.
SETTLED_JS = """() => {
    const panel = window.panel;
    const prompts = [...panel.node.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].map(p => p.textContent);
    const status = panel.sessionContext.session?.kernel?.status;
    return status === 'dead' || (window.runAllResult !== undefined && status === 'idle'
                                 && !prompts.some(p => p.includes('*')));
}"""

# Indices of the non-empty code cells whose prompt shows no execution count (they did not run).
NOT_RUN_JS = """() => window.panel.content.widgets
    .map((cell, index) => [cell, index])
    .filter(([cell]) => cell.model.type === 'code' && cell.model.sharedModel.getSource().trim() !== '')
    .filter(([cell]) => !/\\[\\d+\\]/.test(cell.node.querySelector('.jp-InputPrompt').textContent))
    .map(([, index]) => index)"""

# Errors from the cell models (the kernel's word) and from the DOM (what is shown).
ERRORS_JS = """() => {
    const panel = window.panel;
    const found = [];
    panel.content.widgets.forEach((cell, index) => {
        if (cell.model.type !== 'code') return;
        for (const out of cell.model.outputs.toJSON()) {
            const text = out.output_type === 'stream' ? [].concat(out.text).join('') : '';
            if (out.output_type === 'error') found.push(`cell ${index}: ${out.ename}: ${out.evalue}`);
            else if (out.name === 'stderr' && /Traceback|Error/.test(text)) found.push(`cell ${index}: ${text}`);
        }
    });
    for (const node of panel.node.querySelectorAll('.jp-OutputArea-output')) {
        const text = node.textContent;
        if (node.matches('[data-mime-type="application/vnd.jupyter.error"]')
                || /Traceback|Error displaying widget|Failed to load model/.test(text))
            found.push(`shown: ${text.slice(0, 500)}`);
    }
    return found;
}"""

# The figure's traces as plotly.js holds them (typed arrays turned into plain lists).
FIGURE_DATA_JS = """plot => JSON.stringify(plot.data, (key, value) => ArrayBuffer.isView(value) ? Array.from(value)
                                                                                         : value)"""


def wait_until(page, condition_js: str, arg, timeout_s: float, message: str) -> None:
    """Wait until `condition_js(arg)` is truthy in the page; else fail with `message` (and the timeout)."""
    try:
        page.wait_for_function(condition_js, arg=arg, timeout=timeout_s * 1000, polling=250)
    except PlaywrightTimeout as error:
        raise AssertionError(f"{message} within {timeout_s:g} s") from error


def live_figures(page, notebook):
    """Every live figure: the outputs holding a plotly figure and a control (the figure's own Output widget, nested
    inside, holds no control)."""
    controls = ".widget-slider, .widget-dropdown select, .widget-checkbox input"
    return (notebook.locator(".jp-OutputArea-output").filter(has=page.locator(".js-plotly-plot"))
            .filter(has=page.locator(controls)))


# The figure's traces as plotly.js holds them now (the view replaces its plot <div> on every redraw).
WIDGET_FIGURE_JS = """widget => { const plot = widget.querySelector('.js-plotly-plot');
    return plot && plot.data && plot.data.length ? (""" + FIGURE_DATA_JS + """)(plot) : null; }"""


def figure_redraws(page, widget, name: str) -> tuple[str, float]:
    """Move the widget's main control; its figure must redraw within 30 s. Returns (what moved, seconds)."""
    widget.scroll_into_view_if_needed()
    # The widget's figure may reach plotly.js after its first paint (a busy machine): wait for the traces.
    wait_until(page, WIDGET_FIGURE_JS, widget.element_handle(), 30, f"{name}: the figure has no traces")
    before = widget.evaluate(WIDGET_FIGURE_JS)
    pressed = time.monotonic()
    moved = move_main_control(page, widget, name)
    wait_until(page, "([widget, before]) => { const now = (" + WIDGET_FIGURE_JS + ")(widget);"
               " return now !== null && now !== before; }",
               [widget.element_handle(), before], 30, f"{name}: {moved} but the figure's data did not change")
    return moved, time.monotonic() - pressed


def move_main_control(page, widget, name: str) -> str:
    """Move the widget's first slider three steps (arrow keys), or else pick its first dropdown's next option, or
    else toggle its checkbox. Returns what it did, for the messages."""
    sliders = widget.locator(".widget-slider .noUi-handle")
    if sliders.count():
        handle = sliders.first
        value, top = float(handle.get_attribute("aria-valuenow")), float(handle.get_attribute("aria-valuemax"))
        handle.focus()
        for _ in range(3):
            page.keyboard.press("ArrowLeft" if value >= top else "ArrowRight")
        wait_until(page, "([h, v]) => parseFloat(h.getAttribute('aria-valuenow')) !== v",
                   [handle.element_handle(), value], 10,
                   f"{name}: the slider did not move from {value:g} on arrow keys")
        return f"the slider moved from {value:g} to {handle.get_attribute('aria-valuenow')}"
    select = next((s for s in widget.locator(".widget-dropdown select").all()
                   if s.locator("option").count() > 1), None)
    if select is None:
        box = widget.locator(".widget-checkbox input")
        assert box.count(), f"{name}: a live figure with neither a slider, a dropdown with a choice nor a checkbox"
        box.first.click()
        return f"the checkbox turned {'on' if box.first.is_checked() else 'off'}"
    options = select.locator("option").all_text_contents()
    current = select.evaluate("s => s.selectedIndex")
    choice = options[(current + 1) % len(options)]
    select.select_option(label=choice)
    return f"the dropdown moved from {options[current]!r} to {choice!r}"


@contextlib.contextmanager
def machine_load(load: str):
    """"idle": nothing; "busy": one busy loop per core (two on the 2-core machine) while the block runs."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range(os.cpu_count() or 2)] if load == "busy" else []
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def live_figure_count(nb: nbformat.NotebookNode) -> int:
    """How many live figures with controls the executed notebook displays (`FigureBox`'s text/plain says so)."""
    return sum(1 for cell in nb.cells for out in cell.get("outputs", [])
               if out.get("data", {}).get("text/plain", "").endswith(CONTROLS_NOTE))


def run_all_and_move_every_figure(page, notebook, name: str, label: str, expected: int, lab_log: Path) -> str:
    """Run All in the open notebook, check that every cell ran without an error, then move the main control of
    each of its `expected` live figures (each must redraw on the first move). Returns a summary."""
    start = time.monotonic()
    page.evaluate(RUN_ALL_JS)
    wait_until(page, SETTLED_JS, None, RUN_ALL_TIMEOUT_S, f"{name}: Run All did not finish")
    ran = time.monotonic() - start
    status = page.evaluate("() => window.panel.sessionContext.session.kernel.status")
    assert status != "dead", f"{name}: the kernel died during Run All (see {lab_log})"
    errors = page.evaluate(ERRORS_JS)
    assert not errors, f"{name}: error output after Run All:\n" + "\n".join(errors)
    assert page.evaluate(NOT_RUN_JS) == [], f"{name}: these cells did not run"
    assert page.evaluate("() => window.runAllResult") is True, f"{name}: Run All reported a failure"
    figures = live_figures(page, notebook)
    if expected:  # the kernel is idle once the cells ran, but a view may reach the page later
        wait_until(page, "() => window.panel.node.querySelectorAll('.widget-slider, .widget-dropdown, "
                         ".widget-checkbox').length > 0", None, 60, f"{name}: no control shown")
        figures.nth(expected - 1).wait_for(state="attached", timeout=60_000)
    assert figures.count() == expected, \
        f"{name}: {figures.count()} live figures with a control shown, {expected} displayed by the kernel"
    moves = [figure_redraws(page, figures.nth(k), f"{name}, live figure {k + 1} of {expected} ({label})")
             for k in range(expected)]
    slowest = max((seconds for _, seconds in moves), default=0.0)
    return (f"ran all cells in {ran:.0f} s; {len(moves)} live figures redrew on the first move, the slowest "
            f"{slowest:.1f} s after it")


@pytest.mark.parametrize("name", NOTEBOOKS)
@pytest.mark.parametrize("load", ["idle", "busy"])  # outer: every notebook idle, then every notebook busy
def test_every_live_figure_follows_its_controls(name, load, lab, lab_page, executed, screenshots):
    base, token, lab_log, _ = lab
    expected = live_figure_count(executed(ROOT / "notebooks" / f"{name}.ipynb")[0])
    shared = None
    try:
        with machine_load(load):
            start = time.monotonic()
            shared = lab_page(load)
            with notebook_open(shared, f"{name}.ipynb", to_run=True) as notebook:
                opened = time.monotonic() - start  # with the lab's own load for the first notebook of a kind
                try:
                    summary = run_all_and_move_every_figure(shared.page, notebook, name, load, expected, lab_log)
                    print(f"{name} ({load}): opened in {opened:.0f} s, {summary}")
                    shared.page.wait_for_timeout(300)  # let plotly finish painting before the screenshot
                finally:
                    shared.page.screenshot(path=screenshots / (f"{name}.png" if load == "idle" else
                                                               f"{name}_{load}.png"))
    finally:
        if shared is not None:  # what the page itself reported (e.g. a widget that failed)
            print(f"{name} ({load}):" + "".join(f"\n  page error: {text}" for text in shared.errors))
        shut_down(base, token, "sessions")  # and their kernels: free the CPU and memory for the next notebook


# Outputs JupyterLab shows as a drawn plotly figure, and outputs shown as a Python repr or a widget error.
STATIC_VIEW_JS = """() => {
    const outputs = [...window.panel.node.querySelectorAll('.jp-OutputArea-output')];
    return {
        plots: outputs.filter(o => o.querySelector('.js-plotly-plot .main-svg')).length,
        broken: outputs.map(o => o.textContent)
            .filter(t => /VBox\\(|HBox\\(|FigureWidget\\(|Error displaying widget/.test(t)).map(t => t.slice(0, 200)),
    };
}"""


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_executed_notebook_shows_its_figures_without_running(name, lab, lab_page, executed, screenshots):
    """The notebook file an instructor hands out (executed elsewhere, so not trusted here): JupyterLab has no
    widget model for its outputs and must draw each figure from its static plotly view."""
    base, token, _, served = lab
    nb, _ = executed(ROOT / "notebooks" / f"{name}.ipynb")
    figures = sum(1 for cell in nb.cells for out in cell.get("outputs", []) if PLOTLY_MIME in out.get("data", {}))
    path = f"executed_{name}.ipynb"
    nbformat.write(nb, served / path)
    shared = lab_page("executed")
    try:
        with notebook_open(shared, path, to_run=False):
            try:
                wait_until(shared.page, f"() => ({STATIC_VIEW_JS})().plots >= {figures}", None, 60,
                           f"{name}: fewer than {figures} drawn figures ({shared.page.evaluate(STATIC_VIEW_JS)})")
                view = shared.page.evaluate(STATIC_VIEW_JS)
                assert view["plots"] == figures and not view["broken"], f"{name}: {view}"
            finally:
                shared.page.screenshot(path=screenshots / f"executed_{name}.png")
    finally:
        shut_down(base, token, "sessions")


# What the exported page shows: drawn plots, typeset formulas, and Markdown text still holding a raw `$`.
OFFLINE_PAGE_JS = """() => ({
    plots: [...document.querySelectorAll('.js-plotly-plot')].filter(p => p.querySelector('.main-svg')).length,
    formulas: [...document.querySelectorAll('.jp-MarkdownOutput math')].filter(m => m.getBoundingClientRect().width > 0)
        .length,
    raw: [...document.querySelectorAll('.jp-MarkdownOutput')].map(m => {
        const copy = m.cloneNode(true);
        copy.querySelectorAll('code, pre').forEach(c => c.remove());
        return copy.textContent; }).filter(t => t.includes('$')).map(t => t.slice(0, 120)),
})"""


# The traces of every drawn plot with a built-in slider, as JSON (the data plotly.js holds now).
SLIDER_PLOTS_JS = """() => [...document.querySelectorAll('.js-plotly-plot')]
    .filter(plot => plot.layout && plot.layout.sliders && plot.layout.sliders.length)
    .map(plot => JSON.stringify(plot.data))"""


def built_in_sliders_move(page, name: str) -> int:
    """Click the far end of every plot's built-in slider (from its active step); each plot's data must change.
    Returns how many sliders moved."""
    before = page.evaluate(SLIDER_PLOTS_JS)
    plots = page.locator(".js-plotly-plot").filter(has=page.locator(".slider-rail-touch-rect"))
    assert plots.count() == len(before), f"{name}: {plots.count()} drawn sliders, {len(before)} in the layouts"
    for k in range(plots.count()):
        plot = plots.nth(k)
        plot.scroll_into_view_if_needed()
        steps, active = plot.evaluate("p => [p.layout.sliders[0].steps.length, p.layout.sliders[0].active || 0]")
        box = plot.locator(".slider-rail-touch-rect").first.bounding_box()
        far = 0.98 if active < steps / 2 else 0.02
        page.mouse.click(box["x"] + far * box["width"], box["y"] + box["height"] / 2)
        wait_until(page, f"() => ({SLIDER_PLOTS_JS})()[{k}] !== {json.dumps(before[k])}", None, 10,
                   f"{name}: the built-in slider of figure {k + 1} moved but its figure did not change")
    return len(before)


def offline_page_works(page, name: str, nb: nbformat.NotebookNode, uri: str) -> str:
    """Open `uri` with every web request refused (and none made): each figure of the executed notebook `nb` is
    drawn, each live figure's built-in slider moves it, each formula is typeset (MathML), no raw `$` is left.
    Returns a summary."""
    figures = sum(1 for cell in nb.cells for out in cell.get("outputs", []) if PLOTLY_MIME in out.get("data", {}))
    formulas = sum(cell.source.count("$") for cell in nb.cells if cell.cell_type == "markdown") > 0
    refused = []
    page.route(re.compile(r"^https?://"), lambda route: (refused.append(route.request.url), route.abort()))
    page.goto(uri)
    wait_until(page, f"() => ({OFFLINE_PAGE_JS})().plots >= {figures}", None, 60,
               f"{name}: fewer than {figures} drawn figures offline ({page.evaluate(OFFLINE_PAGE_JS)})")
    view = page.evaluate(OFFLINE_PAGE_JS)
    assert view["plots"] == figures, f"{name}: {view['plots']} drawn figures, {figures} in the notebook"
    assert not view["raw"], f"{name}: maths left as TeX offline: {view['raw'][:3]}"
    assert view["formulas"] > 0 or not formulas, f"{name}: no formula typeset"
    moved = built_in_sliders_move(page, name)
    assert moved == live_figure_count(nb), f"{name}: {moved} built-in sliders, {live_figure_count(nb)} live figures"
    assert not refused, f"{name}: the page asked the web for {sorted(set(refused))}"
    return f"{figures} figures ({moved} with a built-in slider that moves them) and {view['formulas']} formulas"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_exported_html_works_offline(name, browser, executed, tmp_path, screenshots):
    """The HTML of `jupyter nbconvert --to html`, opened from disk with no network: see `offline_page_works`."""
    nb, html = executed(ROOT / "notebooks" / f"{name}.ipynb")
    path = tmp_path / f"{name}.html"
    path.write_text(html)
    page = browser.new_page()
    try:
        print(f"{name}: " + offline_page_works(page, name, nb, path.as_uri()))
    finally:
        page.screenshot(path=screenshots / f"html_{name}.png", full_page=False)
        page.close()


@pytest.fixture(scope="module")
def site(executed, tmp_path_factory) -> Path:
    """The static course of `python -m ssog_lab book`, published from the `executed` notebooks (fast mode)."""
    out = tmp_path_factory.mktemp("site")
    (out / "notebooks").mkdir()
    for name in NOTEBOOKS:
        nbformat.write(executed(ROOT / "notebooks" / f"{name}.ipynb")[0], out / "notebooks" / f"{name}.ipynb")
    book.publish(out, dict.fromkeys(NOTEBOOKS), fast=True)
    return out


def test_static_site_index_links_every_page(site, browser):
    page = browser.new_page()
    try:
        page.goto((site / "index.html").as_uri())
        links = page.locator("ol a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
        assert links == [f"{name}.html" for name in NOTEBOOKS]
        assert all((site / link).is_file() for link in links)
    finally:
        page.close()


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_static_site_works_offline(name, site, browser, executed):
    """Each page of the static course, from disk with no network and plotly.js loaded once from the site's
    folder: see `offline_page_works`."""
    nb, _ = executed(ROOT / "notebooks" / f"{name}.ipynb")
    page = browser.new_page()
    try:
        print(f"site, {name}: " + offline_page_works(page, name, nb, (site / f"{name}.html").as_uri()))
    finally:
        page.close()
