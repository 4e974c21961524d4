"""Tables and files of measured rows: the markdown-table writer of the results files and the benchmarks' CSV
writer (whole tables, or row by row as rows are measured: `RowWriter`), and the benchmark's ratio tables built on
them. The experiments' CSVs, rewritten whole and atomically after each run, go through `experiments._jobs`."""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from pathlib import Path

from ..models import MIXERS
from .config import MEMORY_BASELINES, SDPA_MIXERS

Cell = str | Callable[[dict], object]


def markdown_table(rows: Sequence[dict], columns: dict[str, Cell], align: str = "") -> str:
    """A markdown table, one line per row. columns: header → a row key or a function of the row; None
    prints as an empty cell. align: one letter per column, "l" (default) or "r" (numbers)."""
    return "\n".join([markdown_header(columns, align), *(markdown_row(row, columns) for row in rows)])


def markdown_header(columns: Sequence[str] | dict[str, Cell], align: str = "") -> str:
    """The header line and the rule of a markdown table (see `markdown_table`), for tables written row by row."""
    rule = ["---:" if align[i:i + 1] == "r" else "---" for i in range(len(columns))]
    return "| " + " | ".join(columns) + " |\n|" + "|".join(rule) + "|"


def markdown_row(row: dict, columns: Sequence[str] | dict[str, Cell]) -> str:
    """One line of a markdown table: columns a list of row keys, or header → key or function (`markdown_table`)."""
    cells = columns.values() if isinstance(columns, dict) else columns
    return "| " + " | ".join(_text(cell(row) if callable(cell) else row.get(cell)) for cell in cells) + " |"


def _text(value) -> str:
    return "" if value is None else str(value)


def write_csv(rows: Sequence[dict], path: str | Path, columns: Sequence[str] | None = None, *,
              append: bool = False) -> Path:
    """Write rows as CSV (parent folders created). columns: the header (keys not in it are left out, missing
    ones are empty cells); None: every key, in the order first seen. append=True adds the rows to the end of
    an existing file, writing the header only where the file is new or empty (for results written the moment
    each row is measured)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = list(columns) if columns is not None else list(dict.fromkeys(k for r in rows for k in r))
    new = not append or not path.exists() or path.stat().st_size == 0
    with open(path, "a" if append else "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=header, extrasaction="ignore", restval="")
        if new:
            writer.writeheader()
        writer.writerows(rows)
    return path


class RowWriter:
    """Tables written row by row, each row on disk the moment it exists: OUT/<name>.csv (header: `columns[name]`)
    and a section "## <name>" of one markdown report holding every table. Each table's CSV starts afresh with
    its first row of this writer; the report is only ever appended to (`note` adds free text)."""

    def __init__(self, out: str | Path, columns: dict[str, Sequence[str]], report: str = "report.md"):
        self.out, self.columns, self.started = Path(out), columns, set()
        self.report = self.out / report

    def note(self, text: str) -> None:
        """Append a line (or lines) of markdown to the report."""
        self.out.mkdir(parents=True, exist_ok=True)
        with open(self.report, "a") as f:
            f.write(text + "\n")

    def row(self, name: str, row: dict) -> None:
        """Append row to table `name`: its CSV line and its markdown line (keys outside the columns are left out)."""
        columns = self.columns[name]
        if name not in self.started:  # this run's first row: a new CSV and a new section
            self.started.add(name)
            write_csv([], self.out / f"{name}.csv", columns)
            self.note(f"\n## {name}\n\n{markdown_header(columns)}")
        write_csv([row], self.out / f"{name}.csv", columns, append=True)
        self.note(markdown_row(row, columns))


# ----------------------------------------------------------------------------- benchmark rows

def _ratio(row: dict | None, reference: dict | None, key: str) -> float | None:
    """row[key] / reference[key]; None when either is missing or failed or the reference is not positive."""
    if row is None or reference is None or row.get("status") != "ok" or reference.get("status") != "ok":
        return None
    denominator = float(reference[key] or 0.0)
    return float(row[key]) / denominator if denominator > 0 else None


def ratio_table(rows: list[dict]) -> list[dict]:
    """Per (depth, mode, resolution, mixer): throughput relative to the fastest SDPA mixer (sdpa or sdpa-math,
    whichever measured faster), and peak memory relative to each of `MEMORY_BASELINES` (sdpa-math, which
    stores the N×N scores, and sdpa, PyTorch's fused choice). None where a reference or the row failed."""
    index = {(r["depth"], r["mode"], int(r["resolution"]), r["mixer"]): r for r in rows if r.get("status") == "ok"}
    out = []
    for row in rows:
        key = (row["depth"], row["mode"], int(row["resolution"]))
        sdpa = [index[(*key, m)] for m in SDPA_MIXERS if (*key, m) in index]
        fastest = max(sdpa, key=lambda r: float(r["images_per_s"]), default=None)
        good = row.get("status") == "ok"
        ratio = dict(depth=key[0], mode=key[1], resolution=key[2], mixer=row["mixer"],
                     status=row.get("status"), images_per_s=float(row["images_per_s"]) if good else None,
                     fastest_sdpa=fastest["mixer"] if fastest else None,
                     speed_vs_fastest_sdpa=_ratio(row, fastest, "images_per_s"))
        for baseline in MEMORY_BASELINES:
            ratio[_memory_key(baseline)] = _ratio(row, index.get((*key, baseline)), "peak_mb")
        out.append(ratio)
    return out


def _memory_key(baseline: str) -> str:
    return "memory_vs_" + baseline.replace("-", "_")


def _ratio_cell(r: dict | None) -> str:
    if r is None or r["status"] != "ok":
        return r["status"] if r else ""
    memory = [f"{100 * m:.0f}%" if (m := r[_memory_key(b)]) is not None else "–" for b in MEMORY_BASELINES]
    speed = f"{r['speed_vs_fastest_sdpa']:.2f}×" if r["speed_vs_fastest_sdpa"] is not None else "–"
    return " / ".join([speed, *memory])


RATIO_LEGEND = ("cells: throughput ÷ fastest SDPA's / peak memory as a share of "
                + " / of ".join(f"{b}'s" for b in MEMORY_BASELINES))


def ratio_markdown(rows: list[dict], mode: str = "infer") -> str:
    """Markdown: one line per (depth, resolution), one column per mixer; cells as in `RATIO_LEGEND`."""
    ratios = [r for r in ratio_table(rows) if r["mode"] == mode]
    present = {r["mixer"] for r in ratios}
    mixers = [m for m in dict.fromkeys([*MIXERS, *present]) if m in present]  # the models' order first
    cells = {(r["depth"], r["resolution"], r["mixer"]): r for r in ratios}
    lines = [dict(depth=d, resolution=f"{res}²", **{m: _ratio_cell(cells.get((d, res, m))) for m in mixers})
             for d, res in dict.fromkeys((r["depth"], r["resolution"]) for r in ratios)]
    return markdown_table(lines, {"depth": "depth", "resolution": "resolution", **{m: m for m in mixers}},
                          align="lr" + "r" * len(mixers))


def _if_ok(text: Callable[[dict], str]) -> Callable[[dict], str]:
    return lambda r: text(r) if r.get("status") == "ok" else ""


def results_markdown(rows: list[dict]) -> str:
    """Markdown table of the raw rows: images/s and peak MB per configuration."""
    return markdown_table(rows, {
        "depth": "depth", "mode": "mode", "resolution": lambda r: f"{r['resolution']}²",
        "tokens": _if_ok(lambda r: r.get("tokens") or ""), "mixer": "mixer",
        "backend": _if_ok(lambda r: r.get("backend") or ""),
        "images/s": _if_ok(lambda r: f"{float(r['images_per_s']):.3g}"),
        "peak MB": _if_ok(lambda r: f"{float(r['peak_mb']):.0f}"), "status": "status"}, align="llrrllrrl")


def operator_markdown(rows: list[dict], key: str = "forward_ms") -> str:
    """Markdown: one line per grid, one column per operator, cells in milliseconds (`key`)."""
    ops = list(dict.fromkeys(r["op"] for r in rows))
    cells = {(r["grid"], r["op"]): r[key] for r in rows}
    lines = [dict(grid=g, tokens=n, **{op: f"{cells[(g, op)]:.2f}" if (g, op) in cells else "–" for op in ops})
             for g, n in dict.fromkeys((r["grid"], r["tokens"]) for r in rows)]
    return markdown_table(lines, {"grid": "grid", "tokens": "tokens", **{op: op for op in ops}},
                          align="lr" + "r" * len(ops))
