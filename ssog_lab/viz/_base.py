"""The one widget pattern used by every notebook: figure + controls + a testable update method."""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets
import numpy as np
import plotly.graph_objects as go

from .render import FigureBox, FigureView, figure_data

BUILT_IN_STEPS = 9  # positions of a live figure's main control precomputed for its kernel-free view
SLIDER_HEIGHT = 90  # pixels added below a figure for its built-in slider
# The built-in slider's steps of one figure hold at most about this much JSON (a saved notebook holds each figure's
# steps twice, as plotly JSON and in its HTML view), unless 3 steps alone exceed it.
STEPS_BUDGET_BYTES = 400_000


class LiveFigure:
    """A plotly figure driven by ipywidgets controls.

    figure:   the figure (a plain `go.Figure`); shown in the notebook through a `FigureView`;
    controls: name -> ipywidget (sliders, dropdowns …) whose `.value` feeds `update`;
    redraw:   `redraw(figure, **values)` recomputes the figure's traces (and may return a readout string).

    `update(**values)` sets the given control values (or uses the current ones), redraws, sends the new
    figure to the view in one message, and returns the readout; a non-finite number is a ValueError naming
    its control, for every widget. Moving a control in the browser calls exactly the same method.
    """

    def __init__(self, figure: go.Figure, controls: dict[str, widgets.ValueWidget],
                 redraw: Callable[..., str | None]):
        self.figure = figure
        self.view = FigureView(figure, static=self.stepped_figure)
        self.controls = controls
        self.readout = widgets.HTML()
        self._redraw = redraw
        self._updating = False
        for control in controls.values():
            control.observe(self._on_change, names="value")
        self.update()

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
        text = self._redraw(self.figure, **self.values())
        self.readout.value = text or ""
        self.view.show()
        return text

    def main_control(self, steps: int = BUILT_IN_STEPS) -> tuple[str, list[tuple[str, Any]]] | None:
        """The control a reader moves first, and up to `steps` of its positions as (label, value): the first
        slider (evenly spaced over its range, log-spaced for a log slider), else the first dropdown with a
        choice (evenly chosen options), else the first checkbox (off, on). None if there is no such control.
        The current value is always one of the positions."""
        def spread(items: list) -> list:
            if len(items) <= steps:
                return items
            return [items[round(k)] for k in np.linspace(0, len(items) - 1, steps)]

        def with_current(name: str, control, positions: list) -> tuple[str, list]:
            if all(value != control.value for _, value in positions):
                nearest = min(range(len(positions)), key=lambda k: abs(positions[k][1] - control.value))
                positions[nearest] = (_label(control.value), control.value)
            return name, positions

        kinds = ((widgets.FloatLogSlider, widgets.IntSlider, widgets.FloatSlider, widgets.SelectionSlider),
                 (widgets.Dropdown,), (widgets.Checkbox,))
        for kind in kinds:
            for name, control in self.controls.items():
                if not isinstance(control, kind):
                    continue
                if isinstance(control, widgets.FloatLogSlider):
                    values = control.base ** np.linspace(control.min, control.max, steps)
                    return with_current(name, control, [(_label(float(v)), float(v)) for v in values])
                if isinstance(control, (widgets.IntSlider, widgets.FloatSlider)):
                    values = np.linspace(control.min, control.max, steps)
                    values = np.unique(np.round((values - control.min) / control.step) * control.step + control.min)
                    cast = int if isinstance(control, widgets.IntSlider) else float
                    return with_current(name, control, [(_label(cast(v)), cast(v)) for v in values])
                if isinstance(control, widgets.Checkbox):
                    return name, [("off", False), ("on", True)]
                options = list(zip(control._options_labels, control._options_values, strict=True))
                if len(options) > 1:
                    chosen = spread(options)
                    if control.value not in [value for _, value in chosen]:
                        chosen[0] = next(option for option in options if option[1] == control.value)
                    return name, chosen
        return None

    def stepped_figure(self, steps: int = BUILT_IN_STEPS) -> dict[str, Any]:
        """The figure as plotly JSON with plotly's own slider over `steps` positions of the main control
        (`main_control`), each redrawn here in advance: in a page without a kernel the slider still moves the
        figure. Each step restyles only the trace attributes and relayouts only the layout keys that differ
        between steps; steps too large for `STEPS_BUDGET_BYTES` are thinned (the ends and the current value
        stay). The controls and the readout are left alone; the figure is redrawn at their values."""
        choice = self.main_control(steps)
        if choice is None:
            return figure_data(self.figure)
        name, positions = choice
        frames = []
        try:
            for _, value in positions:
                self._redraw(self.figure, **{**self.values(), name: value})
                frames.append(figure_data(self.figure))
        finally:
            self._redraw(self.figure, **self.values())  # the drawing of the current values, as it was
        base = figure_data(self.figure)
        traces = [frame["data"] for frame in frames]
        trace_keys = sorted({key for data in traces for trace in data for key in trace} - {"type"})
        changed = [key for key in trace_keys if len({json.dumps([t.get(key) for t in data]) for data in traces}) > 1]
        layout_keys = sorted({key for frame in frames for key in frame["layout"]} - {"sliders"})
        relaid = [key for key in layout_keys if len({json.dumps(f["layout"].get(key)) for f in frames}) > 1]
        control = self.controls[name]
        active = next(k for k, (_, value) in enumerate(positions) if value == control.value)
        steps_args = [[{key: [trace.get(key) for trace in frame["data"]] for key in changed},
                       {key: frame["layout"].get(key) for key in relaid}] for frame in frames]
        # A figure whose steps are large (a photograph per step) keeps fewer of them, ends and current included.
        step_bytes = sum(len(json.dumps(args)) for args in steps_args) / len(steps_args)
        keep = max(3, int(STEPS_BUDGET_BYTES // step_bytes))
        if keep < len(positions):
            kept = sorted({round(k) for k in np.linspace(0, len(positions) - 1, keep)} | {active})
            active = kept.index(active)
            positions, steps_args = [positions[k] for k in kept], [steps_args[k] for k in kept]
        layout = base["layout"]  # room at the bottom of the figure, below any legend or axis title, for the slider
        margin = layout.setdefault("margin", {})
        plot_height = (layout.get("height") or 450) - margin.get("b", 80) - margin.get("t", 100)  # px, kept
        below = max(margin.get("b", 80), _legend_bottom(base, plot_height))  # px under the plot area in use
        margin["b"] = below + SLIDER_HEIGHT
        layout["height"] = plot_height + margin.get("t", 100) + margin["b"]
        layout["sliders"] = [{
            "active": active, "pad": {"t": 0, "b": 10}, "len": 0.9, "x": 0.05,
            "y": -margin["b"] / plot_height, "yanchor": "bottom",
            "currentvalue": {"prefix": f"{control.description or name} = ", "font": {"size": 13, "color": "#2a3f5f"}},
            # Labels longer than a step's width would overlap under the rail: then only the current value shows.
            **({"font": {"color": "rgba(0, 0, 0, 0)"}} if max(len(label) for label, _ in positions) > 12 else {}),
            "steps": [{"label": label, "method": "update", "args": args}
                      for (label, _), args in zip(positions, steps_args, strict=True)],
        }]
        return base

    def _on_change(self, change: dict) -> None:
        if not self._updating:
            self.update()

    @property
    def widget(self) -> FigureBox:
        """The box to display: controls on top, then the readout and the figure. Its display also carries
        static views of the figure, so an executed notebook shows the plot without a kernel (see `render`)."""
        controls = widgets.HBox(list(self.controls.values()), layout=widgets.Layout(flex_flow="row wrap"))
        return FigureBox([controls, self.readout, self.view])

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)


def _legend_bottom(figure: dict[str, Any], plot_height: float) -> float:
    """How far (px) below the plot area a horizontal legend placed under it reaches, estimated from its entries
    (plotly wraps them into rows; about 40 px of symbol and gaps plus 7 px a character each); 0 for none."""
    layout = figure["layout"]
    legend = layout.get("legend", {})
    if layout.get("showlegend") is False or legend.get("orientation") != "h" or legend.get("y", 1.0) >= 0:
        return 0.0
    names = [trace.get("name") or "" for trace in figure["data"]
             if trace.get("showlegend") is not False and trace.get("type") not in ("heatmap", "image")]
    margin = layout.get("margin", {})
    room = (layout.get("width") or 700) - margin.get("l", 80) - margin.get("r", 80)
    rows, used = 1, 0.0
    for name in names:
        width = 40 + 7 * len(name)
        rows, used = (rows + 1, width) if used and used + width > room else (rows, used + width)
    return -legend["y"] * plot_height + 22 * rows + 24


def _label(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)
