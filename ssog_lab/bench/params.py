"""`python -m ssog_lab params`: the parameter table (presets × mixers, saving against SDPA) as markdown."""

from __future__ import annotations

import argparse
import datetime
import sys

import torch

from ..models import DEPTHS, MIXERS, PRESETS, ViTConfig, parameter_table
from .report import markdown_table


def params_markdown(rows: list[dict]) -> str:
    """Rows of `models.parameter_table` as a markdown table."""
    return markdown_table(rows, {"preset": "preset", "depth": "depth", "mixer": "mixer",
                                 "parameters": lambda r: f"{r['params']:,}",
                                 "saving vs sdpa": lambda r: f"{100 * r['saving_vs_sdpa']:.1f}%"}, align="lllrr")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ssog_lab params", description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["tiny", "small", "base"], choices=list(PRESETS))
    parser.add_argument("--mixers", nargs="+", default=list(MIXERS), choices=list(MIXERS))
    parser.add_argument("--depth", nargs="+", default=["discrete"], choices=list(DEPTHS))
    parser.add_argument("--num-classes", type=int, default=ViTConfig.num_classes)
    parser.add_argument("--ssog-heads", type=int, default=None,
                        help="SSoG heads (default: dim // 8 fixed, max(2, dim // 48) steered)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Print the table; a bad value exits with status 2 and a message naming the flag."""
    parser = _parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.num_classes < 1:
        parser.error(f"--num-classes must be ≥ 1, got {args.num_classes}")
    overrides = dict(num_classes=args.num_classes, ssog_heads=args.ssog_heads)
    try:
        rows = [r for d in args.depth for r in parameter_table(tuple(args.presets), tuple(args.mixers), d,
                                                               **overrides)]
    except ValueError as error:  # e.g. --ssog-heads that does not divide a preset's width
        parser.error(f"{error} (from --ssog-heads {args.ssog_heads})" if args.ssog_heads else str(error))
    heads = "dim // 8 fixed, max(2, dim // 48) steered" if args.ssog_heads is None else args.ssog_heads
    print(f"Parameters, num_classes={args.num_classes}, ssog_heads={heads} (torch {torch.__version__}, "
          f"{datetime.date.today().isoformat()})\n")
    print(params_markdown(rows))
    return 0
