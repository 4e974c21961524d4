"""Command line: python -m ssog_lab {train,bench,params,ledger,book} [--help]."""

from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "train": ("ssog_lab.train.cli", "train a model (any preset, depth, mixer, data set)"),
    "bench": ("ssog_lab.bench.cli", "throughput and peak memory against resolution, mixers side by side"),
    "params": ("ssog_lab.bench.params", "parameter table: presets × mixers, saving against SDPA"),
    "ledger": ("ssog_lab.results.pages", "rewrite the claims ledger and README.md's results table"),
    "book": ("ssog_lab.book", "the nine notebooks as a static site that works offline, sliders included"),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print("usage: python -m ssog_lab {" + ",".join(COMMANDS) + "} [--help]\n")
        for name, (_, text) in COMMANDS.items():
            print(f"  {name:<8}{text}")
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    module = importlib.import_module(COMMANDS[argv[0]][0])
    return int(module.main(argv[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())
