"""`LiveFigure`'s kernel-free view: the main control it picks, and plotly's own slider over precomputed steps.

A step of the built-in slider must put the figure exactly where `update` puts it for that value (checked by
applying the step's restyle/relayout arguments to the base figure, as plotly.js does), and building the steps
must leave the live figure as it was.
"""

from __future__ import annotations

import json

import ipywidgets as widgets
import numpy as np
import plotly.graph_objects as go
import pytest
from plotly_json import typed_array

from ssog_lab import viz
from ssog_lab.viz._base import SLIDER_HEIGHT, STEPS_BUDGET_BYTES, LiveFigure
from ssog_lab.viz.render import figure_data


def line_figure(**controls: widgets.ValueWidget) -> LiveFigure:
    """y = a·x + (1 if shift), title naming a; the checkbox and dropdown feed the same curve."""
    figure = go.Figure([go.Scatter(x=[0, 1, 2], name="line"), go.Scatter(x=[0, 2], y=[0, 0], name="axis")])
    figure.update_layout(height=300, width=600, legend={"orientation": "h", "y": -0.3})

    def redraw(fig: go.Figure, a: float = 1.0, shift: bool = False, kind: str = "up") -> str:
        sign = 1 if kind == "up" else -1
        fig.data[0].y = [sign * a * x + shift for x in (0, 1, 2)]
        fig.layout.title = f"a = {a:g}"
        return f"a = {a}"

    return LiveFigure(figure, controls, redraw)


def apply_step(base: dict, step: dict) -> dict:
    """What plotly.js draws after a slider step with method "update": restyle each trace, relayout the layout."""
    restyle, relayout = step["args"]
    drawn = json.loads(json.dumps(base))
    for key, values in restyle.items():
        for trace, value in zip(drawn["data"], values, strict=True):
            trace[key] = value
    drawn["layout"].update(relayout)
    return drawn


def test_main_control_prefers_a_slider_spreads_it_and_keeps_the_current_value():
    live = line_figure(kind=widgets.Dropdown(options=["up", "down"], value="up"),
                       a=widgets.FloatSlider(value=0.35, min=0.0, max=4.0, step=0.05))
    name, positions = live.main_control(steps=5)
    assert name == "a"
    values = [value for _, value in positions]
    assert values == pytest.approx([0.35, 1.0, 2.0, 3.0, 4.0])  # 0…4 evenly; the current value replaces 0
    log = line_figure(a=widgets.FloatLogSlider(value=10.0, base=10, min=-2, max=2))
    assert [v for _, v in log.main_control(steps=5)[1]] == pytest.approx([0.01, 0.1, 1.0, 10.0, 100.0])


def test_main_control_falls_back_to_a_dropdown_then_a_checkbox_then_none():
    live = line_figure(kind=widgets.Dropdown(options=["up"], value="up"),  # no choice: skipped
                       a=widgets.Dropdown(options=list(range(1, 21)), value=17),
                       shift=widgets.Checkbox(value=True))
    name, positions = live.main_control(steps=9)
    assert name == "a" and len(positions) == 9 and 17 in [value for _, value in positions]
    assert line_figure(shift=widgets.Checkbox(value=True)).main_control() == ("shift", [("off", False),
                                                                                        ("on", True)])
    assert line_figure().main_control() is None


@pytest.mark.parametrize("control", [
    widgets.FloatSlider(value=1.0, min=-2.0, max=2.0, step=0.5),
    widgets.Dropdown(options=[0.5, 1.0, 3.0], value=1.0),
])
def test_each_built_in_step_draws_what_update_draws(control):
    live = line_figure(a=control, kind=widgets.Dropdown(options=["up", "down"], value="down"))
    before = figure_data(live.figure)
    stepped = live.stepped_figure()
    assert figure_data(live.figure) == before  # the live figure is drawn at its controls' values again
    slider = stepped["layout"]["sliders"][0]
    name, positions = live.main_control()
    assert [step["label"] for step in slider["steps"]] == [label for label, _ in positions]
    assert positions[slider["active"]][1] == control.value
    for step, (_, value) in zip(slider["steps"], positions, strict=True):
        drawn = apply_step(stepped, step)
        live.update(a=value)
        expected = figure_data(live.figure)
        assert drawn["data"] == expected["data"]
        assert drawn["layout"]["title"] == expected["layout"]["title"]


def test_the_built_in_slider_sits_below_the_legend_and_keeps_the_plot_height():
    live = line_figure(a=widgets.FloatSlider(value=1.0, min=0.0, max=2.0))
    layout = live.stepped_figure()["layout"]
    margin_t = layout["margin"].get("t", 100)
    plot_height = layout["height"] - layout["margin"]["b"] - margin_t
    assert plot_height == 300 - 80 - 100  # the plot area is not squeezed
    slider = layout["sliders"][0]
    assert slider["yanchor"] == "bottom" and slider["y"] * plot_height == pytest.approx(-layout["margin"]["b"])
    legend_bottom = 0.3 * plot_height + 22 + 24  # one row of legend under the plot (px below it)
    assert layout["margin"]["b"] - SLIDER_HEIGHT >= legend_bottom


def test_a_figure_without_controls_has_no_built_in_slider():
    live = line_figure()
    assert "sliders" not in live.stepped_figure()["layout"]


def test_a_notebook_widget_has_a_built_in_slider_over_its_main_control():
    live = viz.gaussian_1d_widget()
    stepped = live.stepped_figure()
    name, positions = live.main_control()
    steps = stepped["layout"]["sliders"][0]["steps"]
    assert len(steps) == len(positions) > 2
    restyled = [typed_array(apply_step(stepped, step)["data"][0]["y"]) for step in steps[:2]]
    assert not np.allclose(*restyled)  # the first two positions draw different curves


def test_large_steps_are_thinned_to_the_budget_keeping_the_ends_and_the_current_value():
    figure = go.Figure([go.Heatmap(z=np.zeros((120, 120), dtype=np.float32))])

    def redraw(fig: go.Figure, level: float) -> None:
        fig.data[0].z = np.random.default_rng(int(level * 100)).random((120, 120), dtype=np.float32) * level

    live = LiveFigure(figure, {"level": widgets.FloatSlider(value=0.75, min=0.0, max=2.0, step=0.25)}, redraw)
    slider = live.stepped_figure()["layout"]["sliders"][0]
    labels = [step["label"] for step in slider["steps"]]
    assert 3 <= len(labels) < 9 and labels[0] == "0" and labels[-1] == "2"
    assert labels[slider["active"]] == "0.75"
    step_bytes = len(json.dumps(slider["steps"][0]))
    assert STEPS_BUDGET_BYTES < 9 * step_bytes  # the full 9 steps would exceed the budget
    assert len(json.dumps(slider["steps"])) <= STEPS_BUDGET_BYTES + step_bytes  # the current value may add one


def test_exported_maths_skips_code_spans_even_when_they_wrap_a_line():
    """TeX outside code becomes MathML; a code span keeps its dollars, also when it wraps onto the next line (as in
    Markdown), and an unpaired backtick does not reach past a blank line."""
    from ssog_lab.viz.export import markdown_with_mathml

    wrapped = markdown_with_mathml("see `git show\nabc:file.py` where $x^2$ and `$not maths$`")
    assert "<math" in wrapped and "$x^2$" not in wrapped and "`$not maths$`" in wrapped
    assert "<math" in markdown_with_mathml("a lone ` backtick\n\nthen $y$")
