"""Widgets for notebook 07: benchmark rows (`ssog_lab.bench`) as scaling charts, with the paper's claims beside them.

Rows are those of `bench.run` / `bench.load_csv`: depth (the depth form), mixer,
mode, resolution, images_per_s, peak_mb, status, …  Ratios come from `bench.ratio_table`: throughput against
the fastest SDPA mixer at the same depth, mode and resolution, and peak memory against sdpa-math (and sdpa).
"""

from __future__ import annotations

from pathlib import Path

import ipywidgets as widgets
import plotly.graph_objects as go

from .. import bench
from ..bench.report import markdown_table
from ..models import DEPTHS, MIXERS
from ..style import mixer_colour
from ._base import LiveFigure

# The inference-scaling claims of arXiv:2611.08236 (abstract), SSoG against dense attention at 1024² and
# matched batch size: speed = throughput ratio, memory = peak-memory ratio; "at least" claims are lower bounds.
PAPER_CLAIMS = (  # ViT at 1024² with 16-pixel patches: 4,096 tokens
    dict(depth="ode", resolution=1024, tokens=4096, speed=2.54, memory=0.40,
         text="ODE: up to +154% throughput, over 60% less peak memory"),
    dict(depth="discrete", resolution=1024, tokens=4096, speed=1.30, memory=None,
         text="discrete: over +30% throughput"),
    dict(depth="looped", resolution=1024, tokens=4096, speed=1.30, memory=None, text="looped: over +30% throughput"),
)
VIEWS = {
    "throughput (images/s)": ("images_per_s", "images / s", "log"),
    "peak memory (MB)": ("peak_mb", "peak memory (MB)", "log"),
    "throughput vs fastest SDPA (×)": ("speed_vs_fastest_sdpa", "throughput ÷ fastest SDPA's", "linear"),
    "peak memory vs sdpa-math (×)": ("memory_vs_sdpa_math", "peak memory ÷ sdpa-math's", "linear"),
    "peak memory vs sdpa (×)": ("memory_vs_sdpa", "peak memory ÷ sdpa's (PyTorch's fused kernel)", "linear"),
}


def cpu_result_folders(results_dir: Path) -> list[str]:
    """The committed CPU runs of the scaling sweep, one folder per host (`scaling_cpu`, `scaling_cpu_<host>` under
    docs/results/, each with its bench.csv), sorted by name; a run's repeat inside its folder is not a host."""
    return sorted(p.parent.name for p in Path(results_dir).glob("scaling_cpu*/bench.csv"))


def host_label(rows: list[dict]) -> str:
    """The machine a set of bench rows ran on, as the rows record it: the GPU (`device`) for CUDA rows, else the
    CPU model (`cpu_model`); several names joined when the rows disagree."""
    names = {(r.get("device") if str(r.get("device", "")).startswith("cuda") else r.get("cpu_model"))
             or r.get("device") or "unknown machine" for r in rows}
    return ", ".join(sorted(names))


def committed_runs(results_dir: Path) -> list[tuple[str, list[dict]]]:
    """(path from the repository root, rows) of the committed benchmark runs: the GPU runs, then each CPU host
    (`cpu_result_folders`)."""
    files = sorted(p for p in results_dir.glob("gpu/**/bench.csv") if "repeat" not in p.parts)  # a repeat: no host
    files += [results_dir / f / "bench.csv" for f in cpu_result_folders(results_dir)]
    return [(str(f.relative_to(results_dir.parent.parent)), bench.load_csv(f)) for f in files]


def stored_ratios(files: list[tuple[str, list[dict]]], mixer: str, depth: str, key: str, tokens: int
                  ) -> list[tuple[str, dict, float]]:
    """(source, row, ratio) of every stored run (one per file, i.e. per host) that measured `mixer` in `depth`
    at `tokens` tokens, inference, status ok."""
    found = []
    for source, stored in files:
        for row, ratio in zip(stored, bench.ratio_table(stored), strict=True):
            if row.get("status") == "ok" and ratio["mixer"] == mixer and ratio["depth"] == depth and \
                    ratio["mode"] == "infer" and int(row.get("tokens") or 0) == tokens and ratio[key] is not None:
                found.append((source, row, ratio[key]))
                break
    return found


def stored_sources(results_dir: str | Path, folders: tuple[str, ...] | None = None) -> dict[str, list[dict]]:
    """The committed benchmark runs, name -> rows: each of `folders` under `results_dir` that holds a bench.csv
    (default: the CPU hosts, `cpu_result_folders`), then every docs/results/gpu/**/bench.csv. A name is the host
    the rows record (`host_label`) and the folder, e.g. "Intel(R) Xeon(R) Processor (stored, scaling_cpu)"."""
    results_dir = Path(results_dir)
    folders = cpu_result_folders(results_dir) if folders is None else folders
    files = [results_dir / f / "bench.csv" for f in folders] + sorted(results_dir.glob("gpu/**/bench.csv"))
    sources = {}
    for path in files:
        if path.is_file() and (rows := bench.load_csv(path)):
            sources[f"{host_label(rows)} (stored, {path.parent.relative_to(results_dir)})"] = rows
    return sources


def _with_ratios(rows: list[dict]) -> list[dict]:
    """Successful rows, each with its ratios from `bench.ratio_table` added."""
    ratios = bench.ratio_table(rows)
    return [{**row, **ratio} for row, ratio in zip(rows, ratios, strict=True) if row.get("status") == "ok"]


def scaling_widget(sources: dict[str, list[dict]], claims: tuple[dict, ...] = PAPER_CLAIMS) -> LiveFigure:
    """Benchmark results against the token count N, one line per mixer, log-scaled axis (tokens, not pixels, so
    models with different patch sizes and the paper's 1024²/16 claims sit on one comparable axis).

    sources: name -> bench rows (e.g. "CPU, committed", "GPU, committed", "live, this notebook"); empty
    sources are left out. Controls: the source, the depth form, the mode (infer/train) and the view —
    raw throughput or memory, or their ratios to attention. In the ratio views the paper's claims for
    that depth form are drawn as stars (at 4,096 tokens) with a dotted line at 1 (parity with attention).
    """
    raw = {name: rows for name, rows in sources.items() if rows}
    sources = {name: rows for name, rows in ((n, _with_ratios(r)) for n, r in raw.items()) if rows}
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
    """One line: at the largest measured resolution, each SSoG mixer's throughput and memory ratio
    against attention, beside the paper's claim for the depth form (which is made at 1024²)."""
    rows = _compared([r for r in _with_ratios(rows) if r["depth"] == depth and r["mode"] == mode])
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


def _times(key: str):
    """A table cell: the ratio `key` as "1.23×", or "–" where there is none."""
    return lambda r: "–" if r[key] is None else f"{r[key]:.2f}×"


def _compared(rows: list[dict]) -> list[dict]:
    """The SSoG rows (with ratios) at the largest resolution where an SSoG mixer has an SDPA reference."""
    compared = [r for r in rows if r["mixer"].startswith("ssog") and r["speed_vs_fastest_sdpa"] is not None]
    if not compared:
        return []
    top = max(int(r["resolution"]) for r in compared)
    return [r for r in compared if int(r["resolution"]) == top]


def claims_markdown(sources: dict[str, list[dict]], mode: str = "infer", claims: tuple[dict, ...] = PAPER_CLAIMS
                    ) -> str:
    """Markdown: per source and depth form, the measured SSoG/attention ratios at the largest resolution
    measured, beside the paper's claim."""
    lines = []
    for name, rows in sources.items():
        measured = [r for r in _with_ratios(rows) if r["mode"] == mode] if rows else []
        for claim in claims:
            lines += [dict(r, source=name, paper=claim["text"])
                      for r in _compared([r for r in measured if r["depth"] == claim["depth"]])]
    return markdown_table(lines, {"results": "source", "depth": "depth", "resolution": lambda r: f"{r['resolution']}²",
                                  "mixer": "mixer", "throughput vs fastest SDPA": _times("speed_vs_fastest_sdpa"),
                                  "memory vs sdpa-math": _times("memory_vs_sdpa_math"),
                                  "paper (1024²)": "paper"}, align="llrlrrl")
