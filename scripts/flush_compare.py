"""Operator times with denormal flushing off against on: the evidence that the operator holds no subnormal floats
(with subnormal operands, Intel's MKL matrix products slow down many-fold and flushing would speed them up).

Reads pairs of `bench --operator` folders, the second of each pair measured with `--flush-denormal`, and prints
markdown: the largest grids of each pair side by side, then the range of on ÷ off over every row.

    R=docs/results/operator_cpu
    python scripts/flush_compare.py $R/heads24_dim8 $R/heads24_dim8_flush $R/heads4_dim48 $R/heads4_dim48_flush
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from ssog_lab.bench.report import markdown_table
from ssog_lab.bench.runner import load_csv

TIMES = ("forward_ms", "forward_backward_ms")
SHOWN_OPS = ("sdpa", "ssog fixed separable", "ssog steered separable")
SSOG_MIN_TOKENS = 1024  # the SSoG range is also given from 32×32 up, where a median is many milliseconds


def paired_rows(off_dir: Path, on_dir: Path) -> list[dict]:
    """One dict per (grid, operator) measured in both folders: shape, grid, tokens, op, and the off/on times."""
    def index(folder: Path, flushed: bool) -> dict:
        rows = load_csv(folder / "operator.csv")
        recorded = {str(r["flush_denormal"]) for r in rows}
        if recorded != {str(flushed)}:
            sys.exit(f"{folder}: flush_denormal is {sorted(recorded)}, expected {flushed} in every row")
        return {(r["grid"], r["op"]): r for r in rows}

    off, on = index(off_dir, False), index(on_dir, True)
    return [{"shape": f"{row['heads']} heads × {row['head_dim']}", "grid": grid, "tokens": int(row["tokens"]),
             "op": op, **{f"{t}_off": float(row[t]) for t in TIMES},
             **{f"{t}_on": float(on[grid, op][t]) for t in TIMES}}
            for (grid, op), row in off.items() if (grid, op) in on]


def report(pairs: list[tuple[Path, Path]]) -> str:
    rows = [r for off, on in pairs for r in paired_rows(off, on)]
    if not rows:
        sys.exit("no operator measured in both folders of a pair")
    largest = sorted({r["tokens"] for r in rows})[-2:]
    shown = [r for r in rows if r["tokens"] in largest and r["op"] in SHOWN_OPS]
    table = markdown_table(shown, {
        "shape": "shape", "grid": "grid", "operator": "op",
        **{f"{label} ms, flush off / on": (lambda t: lambda r: f"{r[t + '_off']:.1f} / {r[t + '_on']:.1f}")(t)
           for label, t in zip(("forward", "forward + backward"), TIMES, strict=True)}}, align="lllrr")

    def spread(subset: list[dict]) -> str:
        ratios = [r[f"{t}_on"] / r[f"{t}_off"] for r in subset for t in TIMES]
        return f"{min(ratios):.2f} to {max(ratios):.2f} (median {statistics.median(ratios):.2f})"

    ssog = [r for r in rows if r["op"].startswith("ssog") and r["tokens"] >= SSOG_MIN_TOKENS]
    return "\n".join([table, "",
                      f"on ÷ off over all {2 * len(rows)} times (every operator, grid and pass): {spread(rows)}; "
                      f"SSoG operators at ≥ {SSOG_MIN_TOKENS} tokens: {spread(ssog)}."])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path, help="pairs: OFF_DIR ON_DIR [OFF_DIR ON_DIR ...]")
    args = parser.parse_args(argv)
    if len(args.folders) % 2:
        parser.error("folders: expected pairs (flush off, flush on), got an odd count")
    print(report(list(zip(args.folders[::2], args.folders[1::2], strict=True))))


if __name__ == "__main__":
    main()
