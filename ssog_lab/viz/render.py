"""Static views of the notebooks' figures, so an executed notebook shows its plots without a kernel.

A live widget is displayed as one output holding several views of the same figure; the reader picks
the best one it can show:

    application/vnd.jupyter.widget-view+json   the live widget (JupyterLab with a running kernel)
    application/vnd.plotly.v1+json             the figure as data, drawn by JupyterLab's own plotly
                                               renderer (a notebook opened without a kernel, or untrusted)
    text/html                                  a plotly.js <div> for `jupyter nbconvert --to html`: the
                                               settings of the controls, the readout and the plot
    text/plain                                 one line naming the figure (not `VBox(children=(…`)

Plain `go.Figure`s get the same static views through the plotly renderer "ssog_lab", which becomes the
default when `ssog_lab.viz` is imported in a Jupyter kernel (unless PLOTLY_RENDERER chooses another).

plotly.js (~4.8 MB) travels inline in the first figure a kernel displays and never again, so an
executed notebook holds it once and needs no network; every later figure's script calls it. The live
widgets' own state (plotly's 5 MB anywidget bundle per figure) is not needed by any of these views:
execute with `store_widget_state=False`, e.g.

    jupyter nbconvert --execute --ExecutePreprocessor.store_widget_state=False --to html NOTEBOOK

(a notebook executed with widget state makes nbconvert prefer the live view, which needs a CDN).
"""

from __future__ import annotations

import html
import os
from copy import deepcopy
from typing import Any

import ipywidgets as widgets
import plotly.graph_objects as go
import plotly.io as pio
from plotly.basedatatypes import BaseFigure
from plotly.io.base_renderers import MimetypeRenderer

PLOTLY_MIME = "application/vnd.plotly.v1+json"
RENDERER = "ssog_lab"
_plotlyjs_sent = False  # has this process already put plotly.js into an output?


def figure_bundle(figure: BaseFigure | dict, caption: str = "", include_plotlyjs: bool | None = None
                  ) -> dict[str, Any]:
    """The static views of `figure`: {PLOTLY_MIME: figure as JSON data, "text/html": caption + plot}.

    include_plotlyjs: inline plotly.js into the HTML; None = only if no earlier call in this process did
    (later plots rely on it being on the page). `caption` is HTML shown above the plot in the HTML view only.
    """
    global _plotlyjs_sent
    fig_dict = figure.to_dict() if isinstance(figure, BaseFigure) else figure  # Figure or FigureWidget
    bundle = pio.renderers["plotly_mimetype"].to_mimebundle(dict(fig_dict))
    inline = not _plotlyjs_sent if include_plotlyjs is None else include_plotlyjs
    plot = pio.to_html(fig_dict, include_plotlyjs=inline, include_mathjax=False, full_html=False,
                       default_width="100%", validate=False)
    _plotlyjs_sent = True
    bundle["text/html"] = caption + plot
    return bundle


def _describe(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


class FigureBox(widgets.VBox):
    """A VBox whose display also carries static views of the first plotly FigureWidget among its children.

    Controls (widgets with a `description` and a `value`) become a "name = value" line and HTML
    readouts are copied above the static plot, so the HTML view says which setting it shows. The static
    views are taken when the box is displayed; `refresh()` retakes them where it is shown (for a figure
    that later cells fill, such as a training monitor).
    """

    _shown = None  # the display handle of the last place this box was shown
    _with_plotlyjs = False  # did that display carry plotly.js? (then its refreshes must, too)

    def _repr_mimebundle_(self, **kwargs) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(**kwargs)
        children = list(_leaves(self))
        figures = [child for child in children if isinstance(child, go.FigureWidget)]
        if not figures:
            return bundle
        settings = ", ".join(f"{html.escape(child.description)} = {html.escape(_describe(child.value))}"
                             for child in children
                             if isinstance(child, widgets.ValueWidget) and getattr(child, "description", ""))
        readouts = [child.value for child in children if isinstance(child, widgets.HTML) and child.value]
        caption = "".join(f"<div>{text}</div>" for text in ([f"<i>{settings}</i>"] if settings else []) + readouts)
        self._with_plotlyjs |= not _plotlyjs_sent
        bundle.update(figure_bundle(figures[0], caption, include_plotlyjs=self._with_plotlyjs))
        title = figures[0].layout.title.text or "figure"
        bundle["text/plain"] = f"<live figure: {title}; run the notebook to use its controls>"
        return bundle

    def _ipython_display_(self) -> None:
        from IPython.display import display

        self._shown = display(self._repr_mimebundle_(), raw=True, display_id=True)

    def refresh(self) -> None:
        """Retake the static views in the output where this box was last displayed (no-op if never shown)."""
        if self._shown is not None:
            self._shown.update(self._repr_mimebundle_(), raw=True)


class LiveFigureWidget(go.FigureWidget):
    """A plotly FigureWidget whose comm opens on `open_as_drawn()`, with the figure as it is then.

    `go.FigureWidget` opens its comm inside its constructor, before plotly fills in the synced traces and
    layout; they, and every later edit, follow as messages. The anywidget front-end applies a figure's
    messages only once plotly's 5 MB bundle has loaded in the browser, and drops all of them for good if
    that takes over 2 s (anywidget 0.11 on a busy machine): the view keeps its opening state, an empty plot
    that no control redraws. Opening after the first drawing (`LiveFigure` does) puts that drawing into
    the opening state, so even then the reader sees the right figure; re-running the cell brings the
    controls back.
    """

    _drawn = False  # ipywidgets' own `open()` from the constructor opens nothing until `open_as_drawn`

    def open(self) -> None:
        if self._drawn:
            super().open()

    def open_as_drawn(self) -> None:
        """Open the comm with the current traces and layout as its opening state (as plotly's own
        `_repr_mimebundle_` refreshes them before a FigureWidget is displayed)."""
        self._widget_data = deepcopy(self._data)
        self._widget_layout = deepcopy(self._layout_obj._props)
        self._drawn = True
        self.open()


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
