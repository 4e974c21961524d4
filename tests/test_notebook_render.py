"""Every notebook, executed once in fast mode, runs without error, stays small, and renders to HTML with each
figure drawn as a plot: what an instructor publishes, read without a kernel.

The session fixture `executed` (conftest.py) executes each notebook once (nbclient, in notebooks/, widget
state not stored, as `ssog_lab.viz.render` recommends); these tests and the browser test read that result.
This replaces `pytest --nbmake notebooks`. A notebook's figures are the outputs holding a plotly figure or a
live widget; in the HTML each must be a plotly.js plot <div>, plotly.js must be inlined exactly once (before
the first plot, no CDN), and no widget may fall back to its Python repr (`VBox(children=…`).
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
from nbconvert import HTMLExporter

from ssog_lab.viz.render import PLOTLY_MIME

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
# plotly.js once (4.8 MB with plotly 7.1) + 2.2 MB for all other outputs. Before the static views an executed
# notebook held 5 MB of widget state per live figure (01: 15.6 MB, 03: 20.5 MB).
MAX_NOTEBOOK_BYTES = 7_000_000
PLOT_DIV = 'class="plotly-graph-div"'
PLOTLYJS_MARK = "window.Plotly = Plotly"  # the last statement of the inlined plotly.min.js
REMOTE_SCRIPT = re.compile(r'<script[^>]*\bsrc="(https?://[^"]*)"')
WIDGET_REPR = re.compile(r"\b(?:VBox|HBox|FigureWidget|[A-Z]\w*(?:Slider|Dropdown))\(")


def figure_outputs(nb: nbformat.NotebookNode) -> list[tuple[int, dict]]:
    """(cell index, data) of every output that shows a plotly figure or a live widget."""
    return [(index, out["data"]) for index, cell in enumerate(nb.cells) if cell.cell_type == "code"
            for out in cell.outputs if PLOTLY_MIME in out.get("data", {}) or WIDGET_MIME in out.get("data", {})]


def test_found_the_notebooks():
    assert len(NOTEBOOKS) >= 9, f"expected the course's notebooks in notebooks/, found {NOTEBOOKS}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_and_stays_small(path, executed):
    nb, _ = executed(path)
    size = len(nbformat.writes(nb).encode())
    assert size <= MAX_NOTEBOOK_BYTES, f"{path.name} executed is {size / 1e6:.1f} MB > {MAX_NOTEBOOK_BYTES / 1e6} MB"
    assert "widgets" not in nb.metadata, "executed without widget state, yet the notebook holds some"


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
    # nbconvert's own page loads require.js and MathJax from a CDN (for Markdown maths); nothing else may.
    template = HTMLExporter()
    remote = set(REMOTE_SCRIPT.findall(html)) - {template.require_js_url, template.mathjax_url}
    assert not remote, f"{path.name}: the page needs the network for {sorted(remote)}"


def test_static_views_carry_plotlyjs_once_and_the_figure_data(monkeypatch):
    import plotly.graph_objects as go

    from ssog_lab.viz import render

    monkeypatch.setattr(render, "_plotlyjs_sent", False)  # as in a fresh kernel
    figure = go.Figure(go.Scatter(x=[0, 1, 2], y=[3.0, 1.0, 2.0]))
    first, second = render.figure_bundle(figure), render.figure_bundle(figure, caption="<b>hi</b>")
    assert PLOTLYJS_MARK in first["text/html"] and PLOTLYJS_MARK not in second["text/html"]
    assert second["text/html"].startswith("<b>hi</b>") and PLOT_DIV in second["text/html"]
    assert first[PLOTLY_MIME]["data"][0]["y"] == [3.0, 1.0, 2.0]


def test_a_live_figure_displays_live_and_static_views(monkeypatch):
    import ipywidgets as widgets
    import plotly.graph_objects as go

    from ssog_lab.viz import LiveFigure, render

    monkeypatch.setattr(render, "_plotlyjs_sent", True)
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


def test_live_figures_open_their_comm_with_their_first_drawing(monkeypatch):
    """The anywidget front-end drops a figure's messages if plotly's bundle loads too slowly, and the view
    keeps the state the comm opened with: that state must be the drawn figure (plain go.FigureWidget: empty)."""
    import ipywidgets as widgets
    import plotly.graph_objects as go

    from ssog_lab import viz

    opened = []
    open_comm = widgets.Widget.open

    def record_opening_state(widget):
        if isinstance(widget, go.FigureWidget) and widget.comm is None:
            opened.append(([trace.get("z") for trace in widget._widget_data], widget._widget_layout.get("height")))
        open_comm(widget)

    monkeypatch.setattr(widgets.Widget, "open", record_opening_state)
    go.FigureWidget(go.Figure(go.Heatmap(z=[[1.0]]), layout={"height": 300}))
    assert opened == [([], None)], "plotly's own FigureWidget now opens with its state: LiveFigureWidget can go"
    opened.clear()
    kron, monitor = viz.kronecker_widget(grid=(5, 6)), viz.TrainingMonitor(["run"])
    (first_z, height), (monitor_z, monitor_height) = opened
    assert [np.shape(z) for z in first_z] == [(5, 5), (6, 6), (30, 30), (30, 30)] and height == 340
    np.testing.assert_array_equal(first_z[3], kron.figure.data[3].z)  # the drawing, not the zeros it started as
    assert len(monitor_z) == len(monitor.figure.data) and monitor_height == 420
    assert kron.figure.comm is not None and monitor.figure.comm is not None
