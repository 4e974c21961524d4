"""Widgets for notebook 05: a live loss/accuracy plot fed by the training loop, predictions, stored results.

    monitor = TrainingMonitor(["sdpa", "ssog-steered"])
    fit(model, train_set, test_set, config, on_log=monitor.callback("sdpa"))   # the plot grows as it trains
"""

from __future__ import annotations

import math
from collections.abc import Callable

import ipywidgets as widgets
import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from torch import nn

from ..results.stats import mean_std
from ..style import MIXER_COLOURS, series_colour
from ._base import LiveFigure
from .common import as_array, heatmap, image_axes
from .render import FigureBox, FigureView


def _colour(name: str, index: int) -> str:
    """A mixer's colour (`style`), or the index-th series colour for a run not named after a mixer."""
    return MIXER_COLOURS.get(name, series_colour(index))

# (panel row, record kind, record key, trace label suffix, dash, marker) for each trace a run draws.
_SERIES = (
    (1, "step", "loss", "batch loss", "solid", False),
    (1, "epoch", "test_loss", "test loss", "dash", True),
    (2, "step", "accuracy", "batch accuracy", "solid", False),
    (2, "epoch", "test_accuracy", "test accuracy", "dash", True),
)


class TrainingMonitor:
    """A loss/accuracy figure that grows while `ssog_lab.train.fit` runs.

    runs: the names of the runs to draw (one colour each). `log(record, run)` appends one record of
    fit's history ({"kind": "step", "epoch", "loss", "accuracy", ...} or {"kind": "epoch", "epoch",
    "test_loss", "test_accuracy", ...}); `callback(run)` returns the function to pass as fit's on_log.
    x axis: epochs (fractional for step records). The readout shows each run's latest numbers.
    """

    def __init__(self, runs: list[str] | tuple[str, ...], title: str = "training on the fly"):
        if not runs or len(set(runs)) != len(runs):
            raise ValueError(f"runs must be a non-empty list of distinct names, got {runs!r}")
        self.runs = list(runs)
        figure = make_subplots(rows=1, cols=2, subplot_titles=("cross-entropy loss", "accuracy"),
                               horizontal_spacing=0.1)
        self._trace = {}
        for r, run in enumerate(self.runs):
            colour = _colour(run, r)
            for col, kind, key, label, dash, markers in _SERIES:
                self._trace[(run, kind, key)] = len(figure.data)
                figure.add_trace(go.Scatter(x=[], y=[], name=f"{run}: {label}", legendgroup=run,
                                            mode="lines+markers" if markers else "lines",
                                            line={"color": colour, "dash": dash, "width": 3 if markers else 1.5},
                                            opacity=1.0 if markers else 0.6), row=1, col=col)
        figure.update_xaxes(title_text="epoch")
        figure.update_yaxes(type="log", row=1, col=1)
        figure.update_yaxes(range=[0, 1.02], row=1, col=2)
        figure.update_layout(height=420, width=980, title=title, margin={"t": 70},
                             legend={"orientation": "h", "y": -0.2})
        self.figure = figure
        self.view = FigureView(figure)
        self.readout = widgets.HTML()
        self.widget = FigureBox([self.readout, self.view])
        self.latest: dict[str, dict] = {}

    def log(self, record: dict, run: str | None = None) -> None:
        """Append one history record of `run` (default: the first run) to the plot and the readout."""
        run = self.runs[0] if run is None else run
        if run not in self.runs:
            raise ValueError(f"run must be one of {self.runs}, got {run!r}")
        kind = record.get("kind")
        if kind not in ("step", "epoch"):
            raise ValueError(f"record['kind'] must be 'step' or 'epoch', got {kind!r}")
        for _, series_kind, key, _, _, _ in _SERIES:
            value = record.get(key)
            if series_kind != kind or value is None:
                continue
            trace = self.figure.data[self._trace[(run, kind, key)]]
            trace.x = (*(trace.x or ()), float(record["epoch"]))
            trace.y = (*(trace.y or ()), float(value))
        self.view.show()
        self.latest.setdefault(run, {}).update({k: v for k, v in record.items() if v is not None})
        self.readout.value = "<br>".join(self._summary(name) for name in self.runs if name in self.latest)
        if kind == "epoch":  # the static views, shown without a kernel, follow the curves epoch by epoch
            self.widget.refresh()

    def _summary(self, run: str) -> str:
        last = self.latest[run]
        parts = [f"epoch {last['epoch']:.2f}", f"step {last.get('step', 0)}"]
        if "loss" in last:
            parts.append(f"batch loss {last['loss']:.3f}")
        if "test_accuracy" in last:
            parts.append(f"test accuracy {100 * last['test_accuracy']:.1f}%")
        if "images_per_s" in last:
            parts.append(f"{last['images_per_s']:.0f} images/s")
        return f"<b>{run}</b>: " + ", ".join(parts)

    def callback(self, run: str) -> Callable[[dict], None]:
        """The on_log function for fit that logs into `run`."""
        if run not in self.runs:
            raise ValueError(f"run must be one of {self.runs}, got {run!r}")
        return lambda record: self.log(record, run)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)


def digits_figure(dataset, indices: list[int], columns: int = 8) -> go.Figure:
    """A grid of (grey, 1-channel) images `dataset[i]` with their labels as titles."""
    rows = math.ceil(len(indices) / columns)
    classes = getattr(dataset, "classes", None)
    titles = []
    for i in indices:
        label = int(dataset[i][1])
        titles.append(classes[label] if classes else str(label))
    figure = make_subplots(rows=rows, cols=columns, subplot_titles=titles, horizontal_spacing=0.01,
                           vertical_spacing=0.08)
    for k, i in enumerate(indices):
        figure.add_trace(heatmap(dataset[i][0][0], showscale=False), row=k // columns + 1, col=k % columns + 1)
    image_axes(figure)
    figure.update_layout(height=110 * rows + 40, width=90 * columns + 40, margin={"t": 30, "b": 5, "l": 5, "r": 5})
    return figure


def prediction_widget(models: dict[str, nn.Module], dataset, index: int = 0) -> LiveFigure:
    """One test image and every model's class probabilities (softmax of its logits) side by side.

    models: name -> trained model (images (B, C, H, W) -> logits). Control: the image index.
    """
    if not models:
        raise ValueError("models must name at least one model")
    classes = getattr(dataset, "classes", None) or [str(c) for c in range(dataset.num_classes)]
    controls = {"index": widgets.IntSlider(value=index, min=0, max=len(dataset) - 1, description="image",
                                           continuous_update=False, layout=widgets.Layout(width="420px"))}
    figure = make_subplots(rows=1, cols=2, column_widths=[0.3, 0.7], subplot_titles=("input", "p(class | image)"))
    figure.add_trace(heatmap(np.zeros((2, 2)), showscale=False), row=1, col=1)
    for m, name in enumerate(models):
        figure.add_trace(go.Bar(x=classes, name=name, marker_color=_colour(name, m)), row=1, col=2)
    figure.update_yaxes(range=[0, 1], row=1, col=2)
    figure.update_layout(height=360, width=860, barmode="group", margin={"t": 40})
    image_axes(figure, subplots=[1])

    def redraw(fig: go.Figure, index: int) -> str:
        image, label = dataset[index]
        fig.data[0].z = as_array(image[0])
        verdicts = []
        for m, (name, model) in enumerate(models.items()):
            with torch.no_grad():
                probabilities = model(image[None].to(next(model.parameters()).dtype)).softmax(-1)[0]  # (classes,)
            fig.data[1 + m].y = as_array(probabilities)
            guess = int(probabilities.argmax())
            mark = "right" if guess == int(label) else "wrong"
            verdicts.append(f"{name}: {classes[guess]} ({100 * probabilities[guess]:.0f}%, {mark})")
        return f"image {index}, true label <b>{classes[int(label)]}</b> · " + " · ".join(verdicts)

    return LiveFigure(figure, controls, redraw)


def results_widget(results: list[dict]) -> LiveFigure:
    """Stored accuracy results as dots with error bars: one dot per configuration and mixer, mean ± sample std
    (n − 1) over its seeds.

    results: configuration rows of `results.accuracy.accuracy_results` ({source, group, depth, mixer, label,
    values, current, …}); each row is one configuration, so runs of different configurations are never
    averaged together. A dropdown picks one table (file · group), opening on the current table with the most
    runs; each dot's hover text and the readout give its mean and n, the number of seeds, and a table measured
    before the current code says so in its title and readout. The accuracy axis spans the table's values, not
    0–100 %: dots, unlike bars, do not claim a length from zero.
    """
    if not results:
        raise ValueError("results must hold at least one configuration row (results.accuracy.accuracy_results)")
    tables = list(dict.fromkeys(_table(r) for r in results))
    runs = {table: (all(r["current"] for r in results if _table(r) == table),
                    sum(len(r["values"]) for r in results if _table(r) == table)) for table in tables}
    controls = {"table": widgets.Dropdown(options=tables, value=max(tables, key=runs.get), description="results",
                                          layout=widgets.Layout(width="520px"))}
    mixers = list(dict.fromkeys(r["mixer"] for r in results))
    # The value and n of each dot show on hover and in the readout: labels beside grouped dots would overlap.
    figure = go.Figure([go.Scatter(name=mixer, mode="markers", marker={"color": _colour(mixer, i), "size": 11},
                                   hovertemplate=f"{mixer}, %{{x}}: %{{text}}<extra></extra>")
                        for i, mixer in enumerate(mixers)])
    figure.update_layout(scattermode="group", height=440, width=900, margin={"t": 70}, xaxis_title="configuration",
                         yaxis_title="test accuracy (%)", title_font_size=14)

    def redraw(fig: go.Figure, table: str) -> str:
        rows = [r for r in results if _table(r) == table]
        slots = list(dict.fromkeys(_slot(r) for r in rows))
        lines, shown = [], []
        for trace, mixer in zip(fig.data, mixers, strict=True):
            cells = {_slot(r): r for r in rows if r["mixer"] == mixer}
            stats = {slot: mean_std(cells[slot]["values"]) for slot in cells}
            errors = [100 * stats[s][1] if s in stats and math.isfinite(stats[s][1]) else 0.0 for s in slots]
            trace.x = slots
            trace.y = [100 * stats[s][0] if s in stats else None for s in slots]
            trace.error_y = {"type": "data", "visible": True, "array": errors}
            shown += [y + sign * e for y, e in zip(trace.y, errors, strict=True) if y is not None for sign in (-1, 1)]
            trace.text = [f"{100 * stats[s][0]:.1f} (n={len(cells[s]['values'])})" if s in stats else ""
                          for s in slots]
            trace.showlegend = bool(stats)  # no legend entry for a mixer this table lacks
            for slot in slots:
                if slot in stats:
                    mean, std = stats[slot]
                    spread = f" ± {100 * std:.2f}" if math.isfinite(std) else ""
                    lines.append(f"{slot} / {mixer}: {100 * mean:.2f}{spread}% (n = {len(cells[slot]['values'])})")
        pad = max(1.0, 0.15 * (max(shown) - min(shown)))  # percentage points of room around the dots
        fig.layout.yaxis.range = [max(0.0, min(shown) - pad), min(100.0, max(shown) + pad)]
        current = all(r["current"] for r in rows)
        state = "" if current else " — SUPERSEDED: measured before the current code"
        fig.layout.title = f"{table}<br><sup>test accuracy, mean ± sample std over seeds{state}</sup>"
        head = "" if current else ("<b>Not measured at the current code</b>: this table was made with models the "
                                   "code no longer builds (a parameter count differs). Read it as history.<br>")
        return head + "<br>".join(lines)

    return LiveFigure(figure, controls, redraw)


def _table(row: dict) -> str:
    return f"{row['source']} · {row['group']}" + ("" if row["current"] else " (superseded)")


def _slot(row: dict) -> str:
    return row["depth"] + (f" · {row['label']}" if row.get("label") else "")
