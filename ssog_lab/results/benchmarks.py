"""The committed benchmark runs (docs/results/scaling_cpu*/, gpu/): where they are, which host made them, and the
ratios to attention the claims ledger and notebook 07 read; with the paper's scaling claims they are read against,
and the table that sets each measured ratio beside its claim (`claims_markdown`).

Rows are those of `bench.load_csv`; ratios come from `bench.ratio_table`: throughput against the fastest SDPA mixer
at the same depth, mode and resolution, and peak memory against sdpa-math (and sdpa).
"""

from __future__ import annotations

from pathlib import Path

from .. import bench
from ..bench.report import markdown_table

# The inference-scaling claims of arXiv:2611.08236 (abstract), SSoG against dense attention at 1024² and
# matched batch size: speed = throughput ratio, memory = peak-memory ratio; "at least" claims are lower bounds.
PAPER_CLAIMS = (  # ViT at 1024² with 16-pixel patches: 4,096 tokens
    dict(depth="ode", resolution=1024, tokens=4096, speed=2.54, memory=0.40,
         text="ODE: up to +154% throughput, over 60% less peak memory"),
    dict(depth="discrete", resolution=1024, tokens=4096, speed=1.30, memory=None,
         text="discrete: over +30% throughput"),
    dict(depth="looped", resolution=1024, tokens=4096, speed=1.30, memory=None, text="looped: over +30% throughput"),
)


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
        for row in with_ratios(stored):
            if row["mixer"] == mixer and row["depth"] == depth and row["mode"] == "infer" and \
                    int(row.get("tokens") or 0) == tokens and row[key] is not None:
                found.append((source, row, row[key]))
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


def with_ratios(rows: list[dict]) -> list[dict]:
    """The rows with status ok, each with its ratios from `bench.ratio_table` added (speed_vs_fastest_sdpa,
    fastest_sdpa, memory_vs_sdpa_math, memory_vs_sdpa: None where the reference is missing)."""
    ratios = bench.ratio_table(rows)
    return [{**row, **ratio} for row, ratio in zip(rows, ratios, strict=True) if row.get("status") == "ok"]


def largest_compared(rows: list[dict]) -> list[dict]:
    """Of rows with ratios (`with_ratios`), the SSoG rows at the largest resolution where an SSoG mixer has an
    SDPA reference; [] where none has."""
    compared = [r for r in rows if r["mixer"].startswith("ssog") and r["speed_vs_fastest_sdpa"] is not None]
    if not compared:
        return []
    top = max(int(r["resolution"]) for r in compared)
    return [r for r in compared if int(r["resolution"]) == top]


def _times(key: str):
    """A table cell: the ratio `key` as "1.23×", or "–" where there is none."""
    return lambda r: "–" if r[key] is None else f"{r[key]:.2f}×"


def claims_markdown(sources: dict[str, list[dict]], mode: str = "infer", claims: tuple[dict, ...] = PAPER_CLAIMS
                    ) -> str:
    """Markdown: per source (name -> bench rows) and depth form, the measured SSoG/attention ratios at the largest
    resolution measured (`largest_compared`), beside the paper's claim."""
    lines = []
    for name, rows in sources.items():
        measured = [r for r in with_ratios(rows) if r["mode"] == mode] if rows else []
        for claim in claims:
            lines += [dict(r, source=name, paper=claim["text"])
                      for r in largest_compared([r for r in measured if r["depth"] == claim["depth"]])]
    return markdown_table(lines, {"results": "source", "depth": "depth", "resolution": lambda r: f"{r['resolution']}²",
                                  "mixer": "mixer", "throughput vs fastest SDPA": _times("speed_vs_fastest_sdpa"),
                                  "memory vs sdpa-math": _times("memory_vs_sdpa_math"),
                                  "paper (1024²)": "paper"}, align="llrlrrl")
