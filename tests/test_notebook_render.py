"""Every notebook, executed the ordinary way (`jupyter nbconvert --to notebook --execute`, default settings: widget
state stored), runs without error, stays small, and its HTML (`jupyter nbconvert --to html`) draws each figure as a
plot: what an instructor publishes, read without a kernel.

The session fixture `executed` (conftest.py) executes each notebook once; these tests and the browser tests read
that result. In the same kernel it then runs every cell a second time (tests/run_twice.py): Run All, Run All must
print the same, or a cell depends on state an earlier run left behind. A notebook's figures are the outputs holding
a plotly figure or a live widget; in the HTML each must be a plotly.js plot <div>, plotly.js must be inlined exactly
once (before the first plot, no CDN), no widget may fall back to its Python repr (`VBox(children=…`), and every
formula is MathML (typeset with no script).
"""

from __future__ import annotations

import difflib
import re
import tempfile
from pathlib import Path

import nbformat
import numpy as np
import pytest
from plotly_json import typed_array

from ssog_lab.viz.render import PLOTLY_MIME

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
MAX_NOTEBOOK_BYTES = 5_000_000  # the .ipynb with its widget state, and its HTML with plotly.js (gzipped) once
PLOT_DIV = 'class="plotly-graph-div"'
PLOTLYJS_MARK = "window.plotlyLoaded = "  # the promise of the inlined plotly.js (ssog_lab.viz.export)
REMOTE_SCRIPT = re.compile(r'<script[^>]*\bsrc="(https?://[^"]*)"')
WIDGET_REPR = re.compile(r"\b(?:VBox|HBox|FigureWidget|[A-Z]\w*(?:Slider|Dropdown))\(")


# What a second Run All in the same kernel prints differently although no cell depends on hidden state; masked
# before the two passes are compared. A measured time or speed (a number with its unit, or the slopes fitted to
# timings) changes with the machine's load, in a fresh kernel as much as in the same one; a temporary folder
# (tempfile.mkdtemp) and an object's memory address or widget model id are new for every new object.
TIMED = re.compile(r"\d[\d,.]*\s*(?:ms|µs|s|images/s|img/s|tokens/s|it/s)\b|(?<=fitted slopes: ).*")
FRESH = re.compile(re.escape(tempfile.gettempdir()) + r"/[^\s'\"]+|0x[0-9a-f]{6,}|\b[0-9a-f]{32}\b")


def printed(nb: nbformat.NotebookNode) -> list[tuple[int, str]]:
    """(cell index, what it printed) for every code cell: its streams, errors, and each result's or display's
    text/plain, with the load-dependent and fresh parts masked (TIMED, FRESH)."""
    def text(out) -> str:
        if out["output_type"] == "stream":
            return out["text"]
        if out["output_type"] == "error":
            return f"{out['ename']}: {out['evalue']}"
        return out.get("data", {}).get("text/plain", "")

    return [(index, FRESH.sub("…", TIMED.sub("…", "".join(text(out) for out in cell.outputs))))
            for index, cell in enumerate(nb.cells) if cell.cell_type == "code"]


def figure_outputs(nb: nbformat.NotebookNode) -> list[tuple[int, dict]]:
    """(cell index, data) of every output that shows a plotly figure or a live widget."""
    return [(index, out["data"]) for index, cell in enumerate(nb.cells) if cell.cell_type == "code"
            for out in cell.outputs if PLOTLY_MIME in out.get("data", {}) or WIDGET_MIME in out.get("data", {})]


def test_found_the_notebooks():
    assert len(NOTEBOOKS) >= 9, f"expected the course's notebooks in notebooks/, found {NOTEBOOKS}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_and_stays_small(path, executed):
    nb, html = executed(path)
    for kind, size in (("executed", len(nbformat.writes(nb).encode())), ("as HTML", len(html.encode()))):
        assert size <= MAX_NOTEBOOK_BYTES, f"{path.name} {kind} is {size / 1e6:.1f} MB > {MAX_NOTEBOOK_BYTES / 1e6} MB"
    assert "widgetbundle" not in nbformat.writes(nb), "a widget's state carries plotly's 5 MB front-end bundle"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_second_run_all_in_the_same_kernel_prints_the_same(path, executed):
    """No hidden state: a cell that draws from a random generator no cell above it seeds, or reads a name that a
    later cell rebinds, prints something else the second time."""
    first, second = printed(executed(path)[0]), printed(executed.second(path))
    for (index, once), (_, again) in zip(first, second, strict=True):
        diff = "\n".join(difflib.unified_diff(once.splitlines(), again.splitlines(), "first", "second", lineterm=""))
        assert once == again, f"{path.name} cell {index} prints otherwise when run again in the same kernel:\n{diff}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_figure_renders_as_a_plot_without_a_kernel(path, executed):
    nb, html = executed(path)
    figures = figure_outputs(nb)
    for index, data in figures:  # each view a reader without a kernel may pick
        assert PLOTLY_MIME in data and PLOT_DIV in data.get("text/html", ""), \
            f"{path.name} cell {index}: a figure without its static views ({sorted(data)})"
        assert not WIDGET_REPR.search(data.get("text/plain", "")), f"cell {index}: {data['text/plain']}"
    assert html.count(PLOT_DIV) == len(figures), \
        f"{path.name}: {len(figures)} figure outputs but {html.count(PLOT_DIV)} plots in the HTML"
    assert not WIDGET_REPR.search(html), f"{path.name}: a widget shown as text: {WIDGET_REPR.search(html)[0]}…"
    if figures:
        assert html.count(PLOTLYJS_MARK) == 1, f"{path.name}: plotly.js inlined {html.count(PLOTLYJS_MARK)} times"
        assert html.index(PLOTLYJS_MARK) < html.index(PLOT_DIV), "a plot is drawn before plotly.js loads"
    # Not even the template's require.js and MathJax: `viz.export` points them at an empty script.
    remote = set(REMOTE_SCRIPT.findall(html))
    assert not remote, f"{path.name}: the page needs the network for {sorted(remote)}"
    markdown = "".join(cell.source for cell in nb.cells if cell.cell_type == "markdown")
    assert html.count("<math ") >= markdown.count("$$") // 2, f"{path.name}: formulas left for MathJax"


def test_static_views_hold_the_figure_data_and_no_plotlyjs():
    import plotly.graph_objects as go

    from ssog_lab.viz import render

    figure = go.Figure(go.Scatter(x=[0, 1, 2], y=[3.0, 1.0, 2.0]))
    bundle = render.figure_bundle(figure, caption="<b>hi</b>")
    assert bundle["text/html"].startswith("<b>hi</b>") and PLOT_DIV in bundle["text/html"]
    assert PLOTLYJS_MARK not in bundle["text/html"]  # 4.8 MB: the HTML export inlines it once (viz.export)
    assert bundle[PLOTLY_MIME]["data"][0]["y"] == [3.0, 1.0, 2.0]


def test_a_live_figure_displays_live_and_static_views():
    import ipywidgets as widgets
    import plotly.graph_objects as go

    from ssog_lab.viz import LiveFigure

    slope = widgets.FloatSlider(value=2.0, min=0.0, max=5.0, description="slope")
    live = LiveFigure(go.Figure(go.Scatter(x=[0, 1])), {"slope": slope},
                      lambda fig, slope: (fig.data[0].update(y=[0, slope]), f"slope is {slope:g}")[1])
    bundle = live.widget._repr_mimebundle_()
    assert {WIDGET_MIME, PLOTLY_MIME, "text/html", "text/plain"} <= set(bundle)
    assert bundle[PLOTLY_MIME]["data"][0]["y"] == [0, 2.0]
    assert "slope = 2" in bundle["text/html"] and "slope is 2" in bundle["text/html"]
    assert not WIDGET_REPR.search(bundle["text/plain"])
    live.update(slope=3.5)  # the static views are taken when the widget is displayed
    assert live.widget._repr_mimebundle_()[PLOTLY_MIME]["data"][0]["y"] == [0, 3.5]


def test_the_live_view_holds_the_figure_as_drawn_after_every_update():
    """What the browser draws is the view's one output: plotly's JSON of the figure after the last redraw, sent as
    one state change of an ipywidgets Output (no per-figure front-end module that must load in time)."""
    import ipywidgets as widgets

    from ssog_lab import viz

    kron, monitor = viz.kronecker_widget(grid=(5, 6)), viz.TrainingMonitor(["run"])
    (shown,) = kron.view.outputs
    assert set(shown["data"]) == {PLOTLY_MIME, "text/plain"} and isinstance(kron.view, widgets.Output)
    z = [typed_array(trace["z"]) for trace in shown["data"][PLOTLY_MIME]["data"]]
    assert [array.shape for array in z] == [(5, 5), (6, 6), (30, 30), (30, 30)]
    np.testing.assert_array_equal(z[3], kron.figure.data[3].z)
    sent = []
    kron.view.observe(lambda change: sent.append(change["new"]), names="outputs")
    control = next(iter(kron.controls.values()))
    kron.update(**{next(iter(kron.controls)): control.max if control.value != control.max else control.min})
    assert len(sent) == 1, "one update, one message to the browser"
    np.testing.assert_array_equal(typed_array(sent[0][0]["data"][PLOTLY_MIME]["data"][3]["z"]), kron.figure.data[3].z)
    monitor.log({"kind": "epoch", "epoch": 1.0, "test_loss": 0.5, "test_accuracy": 0.8})
    monitor_traces = monitor.view.outputs[0]["data"][PLOTLY_MIME]["data"]
    assert monitor_traces[1]["y"] == [0.5] and len(monitor_traces) == len(monitor.figure.data)
