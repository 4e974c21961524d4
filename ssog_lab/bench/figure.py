"""The benchmark's plotly figure: throughput and peak memory against resolution (colours from `style`)."""

from __future__ import annotations

from pathlib import Path

from ..models import DEPTHS, MIXERS
from ..style import mixer_colour


def figure(rows: list[dict]):
    """Throughput (top) and peak memory (bottom) against resolution, log-log, one column per depth form,
    one line per mixer (inference rows; training rows dashed). Failed configurations are gaps."""
    from plotly.subplots import make_subplots

    ok = [r for r in rows if r.get("status") == "ok"]
    depths = [d for d in DEPTHS if any(r["depth"] == d for r in rows)]
    mixers = list(dict.fromkeys([*MIXERS, *(r["mixer"] for r in ok)]))
    fig = make_subplots(rows=2, cols=max(1, len(depths)), shared_xaxes=True, column_titles=depths,
                        vertical_spacing=0.08, horizontal_spacing=0.05)
    for col, depth in enumerate(depths, start=1):
        for mode in ("infer", "train"):
            for mixer in mixers:
                points = sorted((r["resolution"], r) for r in ok
                                if r["depth"] == depth and r["mixer"] == mixer and r["mode"] == mode)
                if not points:
                    continue
                x = [p[0] for p in points]
                for plot_row, key in ((1, "images_per_s"), (2, "peak_mb")):
                    fig.add_scatter(x=x, y=[float(p[1][key]) for p in points], row=plot_row, col=col,
                                    mode="lines+markers", name=f"{mixer} ({mode})", legendgroup=f"{mixer}{mode}",
                                    showlegend=col == 1 and plot_row == 1,
                                    line=dict(color=mixer_colour(mixer), dash="dash" if mode == "train" else "solid"))
    fig.update_xaxes(type="log", title_text="resolution (pixels)", row=2)
    fig.update_xaxes(type="log")
    fig.update_yaxes(type="log")
    fig.update_yaxes(title_text="images / s", row=1, col=1)
    fig.update_yaxes(title_text="peak memory (MB)", row=2, col=1)
    device = next((r["device"] for r in ok), "")
    fig.update_layout(title=f"Throughput and peak memory against resolution, {device}", height=650,
                      legend_title_text="mixer (mode)")
    return fig


def save_figure(rows: list[dict], path: str | Path, include_plotlyjs: str | bool = "cdn") -> Path:
    """Write figure(rows) as HTML. "cdn" keeps the file small (plotly.js loads from the CDN when opened);
    True inlines plotly.js (~4.5 MB) for offline viewing."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure(rows).write_html(path, include_plotlyjs=include_plotlyjs)
    return path
