"""How the notebooks' figures reach the reader: live in JupyterLab, static in a saved or exported notebook.

A live figure is an `ipywidgets.Output` (`FigureView`) that holds the figure as one plotly output;
every redraw replaces that output, and JupyterLab draws it with its own plotly renderer (plotly's
JupyterLab extension, which loads plotly.js once per page). No figure depends on a widget front-end
loading a per-figure module in time, as plotly's `FigureWidget` does on anywidget (2 s, then it drops
the figure's updates for good).

Displayed, a live figure's box (`FigureBox`) also carries static views of its figure, and so does every
plain `go.Figure` (through the plotly renderer "ssog_lab", the default once `ssog_lab.viz` is imported in
a Jupyter kernel, unless PLOTLY_RENDERER chooses another):

    application/vnd.jupyter.widget-view+json   the live widget (JupyterLab with a running kernel)
    application/vnd.plotly.v1+json             the figure as data, drawn by JupyterLab's plotly
                                               renderer (a notebook opened without a kernel)
    text/html                                  a plotly.js <div>: the settings of the controls, the
                                               readout and the plot, for `jupyter nbconvert --to html`
    text/plain                                 one line naming the figure (not `VBox(children=(…`)

plotly.js itself (4.8 MB) is never in a notebook's outputs: `export.StaticFigures`, an nbconvert
preprocessor that the project's environment enables for every HTML export (jupyter-config/), inlines it
once into the page and drops the live widget views, so `jupyter nbconvert --execute --to html NOTEBOOK` with
default settings draws every figure offline.
"""

from __future__ import annotations

import html
import os
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets
import plotly.io as pio
from plotly.basedatatypes import BaseFigure
from plotly.io.base_renderers import MimetypeRenderer

PLOTLY_MIME = "application/vnd.plotly.v1+json"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
PLOT_DIV = 'class="plotly-graph-div"'
RENDERER = "ssog_lab"
CONTROLS_NOTE = "; run the notebook to use its controls>"  # ends the text/plain view of a live figure with controls


def figure_data(figure: BaseFigure | dict) -> dict[str, Any]:
    """The figure as plotly's JSON mime data ({"data", "layout", "config"}), ready for any front-end."""
    fig_dict = figure.to_dict() if isinstance(figure, BaseFigure) else figure
    return pio.renderers["plotly_mimetype"].to_mimebundle(dict(fig_dict))[PLOTLY_MIME]


def figure_title(data: dict[str, Any]) -> str:
    """The title text of a figure's JSON data, or "figure"."""
    return (data.get("layout", {}).get("title") or {}).get("text") or "figure"


def figure_bundle(figure: BaseFigure | dict, caption: str = "") -> dict[str, Any]:
    """The static views of `figure`: {PLOTLY_MIME: figure as JSON data, "text/html": caption + plot, "text/plain"}.

    The HTML plot calls the page's plotly.js (`StaticFigures` puts it there); `caption` is HTML shown above
    the plot in the HTML view only.
    """
    data = figure_data(figure)
    plot = pio.to_html(data, include_plotlyjs=False, include_mathjax=False, full_html=False,
                       default_width="100%", validate=False)
    return {PLOTLY_MIME: data, "text/html": caption + plot, "text/plain": f"<figure: {figure_title(data)}>"}


class FigureView(widgets.Output):
    """The live view of a figure: an Output widget whose one output is the figure, replaced on `show`.

    static: the figure as plotly JSON for views without a kernel (default: the figure as it is; a `LiveFigure`
    gives its figure with a built-in slider). The view keeps its height while plotly redraws (no jump of the
    page below it).
    """

    def __init__(self, figure: BaseFigure, static: Callable[[], dict] | None = None, **kwargs):
        height = figure.layout.height or 450
        super().__init__(layout=widgets.Layout(min_height=f"{height}px"), **kwargs)
        self.figure = figure
        self.static = static or (lambda: figure_data(self.figure))
        self.show()

    def show(self) -> None:
        """Replace the view's output with the figure as it is now (one comm message to the browser)."""
        data = figure_data(self.figure)
        self.outputs = ({"output_type": "display_data", "metadata": {},
                         "data": {PLOTLY_MIME: data, "text/plain": f"<figure: {figure_title(data)}>"}},)


def _describe(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


class FigureBox(widgets.VBox):
    """A VBox whose display also carries static views of the figure of the first `FigureView` among its children.

    Controls (widgets with a `description` and a `value`) become a "name = value" line and HTML
    readouts are copied above the static plot, so the HTML view says which setting it shows. The static
    views are taken when the box is displayed; `refresh()` retakes them where it is shown (for a figure
    that later cells fill, such as a training monitor).
    """

    _shown = None  # the display handle of the last place this box was shown

    def _repr_mimebundle_(self, **kwargs) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(**kwargs)
        children = list(_leaves(self))
        views = [child for child in children if isinstance(child, FigureView)]
        if not views:
            return bundle
        settings = ", ".join(f"{html.escape(child.description)} = {html.escape(_describe(child.value))}"
                             for child in children
                             if isinstance(child, widgets.ValueWidget) and getattr(child, "description", ""))
        readouts = [child.value for child in children if isinstance(child, widgets.HTML) and child.value]
        caption = "".join(f"<div>{text}</div>" for text in ([f"<i>{settings}</i>"] if settings else []) + readouts)
        bundle.update(figure_bundle(views[0].static(), caption))
        title = views[0].figure.layout.title.text or "figure"
        bundle["text/plain"] = f"<live figure: {title}{CONTROLS_NOTE if settings else '>'}"
        return bundle

    def _ipython_display_(self) -> None:
        from IPython.display import display

        self._shown = display(self._repr_mimebundle_(), raw=True, display_id=True)

    def refresh(self) -> None:
        """Retake the static views in the output where this box was last displayed (no-op if never shown)."""
        if self._shown is not None:
            self._shown.update(self._repr_mimebundle_(), raw=True)


def _leaves(box: widgets.Box):
    """The non-box widgets inside `box`, depth first, in display order."""
    for child in box.children:
        if isinstance(child, widgets.Box):
            yield from _leaves(child)
        else:
            yield child


class StaticRenderer(MimetypeRenderer):
    """The plotly renderer that gives a plain figure both static views (see `figure_bundle`)."""

    def to_mimebundle(self, fig_dict: dict) -> dict[str, Any]:
        return figure_bundle(fig_dict)


def use_static_renderer() -> None:
    """Register the "ssog_lab" renderer; make it the default where plotly chose its Jupyter kernel default."""
    pio.renderers[RENDERER] = StaticRenderer()
    if pio.renderers.default == "plotly_mimetype" and not os.environ.get("PLOTLY_RENDERER"):
        pio.renderers.default = RENDERER
