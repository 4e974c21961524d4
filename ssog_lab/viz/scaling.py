"""Widgets for notebook 07: benchmark rows (`ssog_lab.bench`) as scaling charts, with the paper's claims beside them.

Rows are those of `bench.run` / `bench.load_csv`: depth (the depth form), mixer,
mode, resolution, images_per_s, peak_mb, status, …  Ratios come from `results.benchmarks.with_ratios`: throughput
against the fastest SDPA mixer at the same depth, mode and resolution, and peak memory against sdpa-math (and sdpa).
The claims table in markdown is `results.benchmarks.claims_markdown`; here only the widget and its readout.
"""

from __future__ import annotations

import ipywidgets as widgets
import plotly.graph_objects as go

from ..models import DEPTHS, MIXERS
from ..results.benchmarks import PAPER_CLAIMS, largest_compared, with_ratios
from ..style import mixer_colour
from ._base import LiveFigure

VIEWS = {
    "throughput (images/s)": ("images_per_s", "images / s", "log"),
    "peak memory (MB)": ("peak_mb", "peak memory (MB)", "log"),
    "throughput vs fastest SDPA (×)": ("speed_vs_fastest_sdpa", "throughput ÷ fastest SDPA's", "linear"),
    "peak memory vs sdpa-math (×)": ("memory_vs_sdpa_math", "peak memory ÷ sdpa-math's", "linear"),
    "peak memory vs sdpa (×)": ("memory_vs_sdpa", "peak memory ÷ sdpa's (PyTorch's fused kernel)", "linear"),
}


def scaling_widget(sources: dict[str, list[dict]], claims: tuple[dict, ...] = PAPER_CLAIMS) -> LiveFigure:
    """Benchmark results against the token count N, one line per mixer, log-scaled axis (tokens, not pixels, so
    models with different patch sizes and the paper's 1024²/16 claims sit on one comparable axis).

    sources: name -> bench rows (e.g. "CPU, committed", "GPU, committed", "live, this notebook"); empty
    sources are left out. Controls: the source, the depth form, the mode (infer/train) and the view —
    raw throughput or memory, or their ratios to attention. In the ratio views the paper's claims for
    that depth form are drawn as stars (at 4,096 tokens) with a dotted line at 1 (parity with attention).
    """
    raw = {name: rows for name, rows in sources.items() if rows}
    sources = {name: rows for name, rows in ((n, with_ratios(r)) for n, r in raw.items()) if rows}
    if not sources:
        raise ValueError("sources must hold at least one set of benchmark rows with status 'ok'")
    first = next(iter(sources.values()))
    depths = [d for d in DEPTHS if any(r["depth"] == d for rows in sources.values() for r in rows)]
    modes = [m for m in ("infer", "train") if any(r["mode"] == m for rows in sources.values() for r in rows)]
    controls = {
        "source": widgets.Dropdown(options=list(sources), value=next(iter(sources)), description="results"),
        "depth": widgets.Dropdown(options=depths, value="ode" if any(r["depth"] == "ode" for r in first)
                                  else depths[0], description="depth"),
        "mode": widgets.Dropdown(options=modes, value=modes[0], description="mode"),
        "view": widgets.Dropdown(options=list(VIEWS), value="throughput vs fastest SDPA (×)", description="view",
                                 layout=widgets.Layout(width="340px")),
    }
    figure = go.Figure([go.Scatter(mode="lines+markers", name=mixer, line={"color": mixer_colour(mixer)})
                        for mixer in MIXERS])
    # An open star: a measured curve that ends at the paper's 4,096 tokens stays visible through it.
    figure.add_trace(go.Scatter(mode="markers+text", name="paper (arXiv:2611.08236)", textposition="top left",
                                marker={"symbol": "star-open", "size": 20, "color": "darkgoldenrod",
                                        "line": {"width": 2}}))
    figure.add_trace(go.Scatter(mode="lines", name="parity with attention", line={"color": "grey", "dash": "dot"}))
    figure.update_xaxes(type="log", tickvals=[4 ** k for k in range(1, 10)],  # 4, 16, … 4⁹: grids of side 2ᵏ
                        title_text="tokens N (log scale; the paper's 1024² with 16-pixel patches is 4,096)")
    figure.update_layout(height=480, width=900, margin={"t": 60}, legend={"orientation": "h", "y": -0.2})

    def redraw(fig: go.Figure, source: str, depth: str, mode: str, view: str) -> str:
        key, label, scale = VIEWS[view]
        rows = [r for r in sources[source] if r["depth"] == depth and r["mode"] == mode]
        resolutions = sorted({_tokens(r) for r in rows})
        for trace, mixer in zip(fig.data, MIXERS, strict=False):
            points = sorted((_tokens(r), r[key]) for r in rows
                            if r["mixer"] == mixer and r[key] is not None)
            trace.x, trace.y = [p[0] for p in points], [float(p[1]) for p in points]
        ratio = key.startswith(("speed_vs_", "memory_vs_"))
        wanted = "speed" if key.startswith("speed_vs_") else "memory"
        shown = [c for c in claims if ratio and c["depth"] == depth and c.get(wanted) is not None]
        fig.data[-2].x = [c["tokens"] for c in shown]
        fig.data[-2].y = [c[wanted] for c in shown]
        fig.data[-2].text = [f"paper: {c[wanted]:.2f}×" for c in shown]
        span = resolutions + [c["tokens"] for c in shown]
        fig.data[-1].x, fig.data[-1].y = ([min(span), max(span)], [1.0, 1.0]) if ratio and span else ([], [])
        fig.layout.yaxis.type, fig.layout.yaxis.title = scale, label
        fig.layout.title = f"{source}: {depth} depth, {mode}, {view}"
        return claim_summary(raw[source], depth, mode, claims)

    return LiveFigure(figure, controls, redraw)


def _tokens(row: dict) -> int:
    """A row's token count: its `tokens` column (every bench.csv has it), else (resolution / 16)²."""
    return int(row.get("tokens") or (int(row["resolution"]) // 16) ** 2)


def claim_summary(rows: list[dict], depth: str, mode: str = "infer",
                  claims: tuple[dict, ...] = PAPER_CLAIMS) -> str:
    """The widget's readout (HTML, one line): at the largest measured resolution (`largest_compared`), each SSoG
    mixer's throughput and memory ratio against attention, beside the paper's claim for the depth form (made at
    1024²)."""
    rows = largest_compared([r for r in with_ratios(rows) if r["depth"] == depth and r["mode"] == mode])
    claim = next((c for c in claims if c["depth"] == depth), None)
    said = f" — paper at {claim['resolution']}²: {claim['text']}" if claim else ""
    if not rows:
        return f"no SSoG measurement with an SDPA reference for {depth}/{mode}{said}"
    top = rows[0]["resolution"]
    parts = []
    for row in rows:
        baselines = (("memory_vs_sdpa_math", "sdpa-math"), ("memory_vs_sdpa", "sdpa"))
        memory = [f"{row[key]:.2f}× that of {name}" for key, name in baselines if row[key] is not None]
        parts.append(f"{row['mixer']} {row['speed_vs_fastest_sdpa']:.2f}× the throughput of {row['fastest_sdpa']}"
                     + (", peak memory " + " and ".join(memory) if memory else ""))
    return f"<b>measured at {top}²</b>: " + "; ".join(parts) + said
