"""The one widget pattern used by every notebook: figure + controls + a testable update method."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets
import plotly.graph_objects as go

from .render import FigureBox, LiveFigureWidget


class LiveFigure:
    """A plotly FigureWidget driven by ipywidgets controls.

    figure:   the figure; shown as a `LiveFigureWidget` (a plotly FigureWidget) in the notebook;
    controls: name -> ipywidget (sliders, dropdowns …) whose `.value` feeds `update`;
    redraw:   `redraw(figure, **values)` recomputes the figure's traces (and may return a readout string).

    `update(**values)` sets the given control values (or uses the current ones), redraws inside a
    `batch_update` so the browser receives one message, and returns the readout; a non-finite number is a
    ValueError naming its control, for every widget. Moving a control in
    the browser calls exactly the same method.
    """

    def __init__(self, figure: go.Figure, controls: dict[str, widgets.ValueWidget],
                 redraw: Callable[..., str | None]):
        self.figure = LiveFigureWidget(figure)
        self.controls = controls
        self.readout = widgets.HTML()
        self._redraw = redraw
        self._updating = False
        for control in controls.values():
            control.observe(self._on_change, names="value")
        self.update()
        self.figure.open_as_drawn()  # the browser's first view of the figure is this drawing

    def values(self) -> dict[str, Any]:
        return {name: control.value for name, control in self.controls.items()}

    def update(self, **values: Any) -> str | None:
        unknown = set(values) - set(self.controls)
        if unknown:
            raise ValueError(f"unknown control(s) {sorted(unknown)}; this widget has {sorted(self.controls)}")
        for name, value in values.items():  # a slider clamps a number to its range, but NaN passes through it
            if isinstance(value, numbers.Real) and not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value}")
        self._updating = True  # setting .value below must not trigger a second redraw
        try:
            for name, value in values.items():
                self.controls[name].value = value
        finally:
            self._updating = False
        with self.figure.batch_update():
            text = self._redraw(self.figure, **self.values())
        self.readout.value = text or ""
        return text

    def _on_change(self, change: dict) -> None:
        if not self._updating:
            self.update()

    @property
    def widget(self) -> FigureBox:
        """The box to display: controls on top, then the readout and the figure. Its display also carries
        static views of the figure, so an executed notebook shows the plot without a kernel (see `render`)."""
        controls = widgets.HBox(list(self.controls.values()), layout=widgets.Layout(flex_flow="row wrap"))
        return FigureBox([controls, self.readout, self.figure])

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)
