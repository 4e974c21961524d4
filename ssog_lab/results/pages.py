"""The claims ledger as the docs show it, generated between markers by `python -m ssog_lab ledger`: the whole
ledger with its verdict legend and variant summary in the results index (docs/results/README.md), and a short
table (one line per claim: fixed SSoG, steered SSoG, each verdict with its number and host) in the README.
Notebooks 05 and 07 show `claims_ledger_markdown` live."""

from __future__ import annotations

import sys
from pathlib import Path

from .. import repository
from .ledger import RESULTS_DIR, VARIANTS, VERDICT_NOTES, claims_ledger, variant_summary


def claims_ledger_markdown(results_dir: str | Path = RESULTS_DIR) -> str:
    """The ledger as a markdown table (for the results index and the notebooks), then the variant summary."""
    ledger = claims_ledger(results_dir)
    lines = ["| paper claim (arXiv:2611.08236) | SSoG variant | this suite measures | verdict | from |",
             "|---|---|---|---|---|"]
    lines += [f"| {r['claim']} | {r['variant']} | {r['measured']} | **{r['verdict']}** | `{r['source']}` |"
              for r in ledger]
    legend = "Verdicts: " + "; ".join(f"**{word}**: {note}" for word, note in VERDICT_NOTES.items()) + "."
    return "\n".join(lines) + "\n\n" + legend + "\n\n" + variant_summary(ledger)


def results_table(results_dir: str | Path = RESULTS_DIR) -> str:
    """The README's short table: one line per claim, each variant's verdict with its number in a few words (speed
    and memory name the host), then one line saying what the verdicts mean and where the whole ledger is."""
    ledger = claims_ledger(results_dir)
    topics = list(dict.fromkeys(r["topic"] for r in ledger))
    cell = {(r["topic"], r["variant"]): f"**{r['verdict']}**" + (f": {r['value']}" if r["value"] else "")
            for r in ledger}
    lines = ["| claim (arXiv:2611.08236) | " + " | ".join(f"{v} SSoG" for v in VARIANTS.values()) + " |",
             "|---|" + "---|" * len(VARIANTS)]
    lines += [f"| {topic} | " + " | ".join(cell.get((topic, v), "") for v in VARIANTS.values()) + " |"
              for topic in topics]
    legend = ("**met** / **missed**: the measurement reaches the paper's number, or falls short of it beyond its "
              "noise; **level**: inside the noise; **proxy**: measured on another data set or resolution (not "
              "CIFAR-100 at 224²), shown but not scored; **not measured**: no current measurement. Speed and memory: "
              "ViT-Tiny at 1024², batch 1, on each CPU named (the paper measured GPUs), met only if met on every one. "
              "Each number with its file "
              "and the verdicts' exact rules: [docs/results/README.md](docs/results/README.md).")
    return "\n".join(lines) + "\n\n" + legend


# The full ledger lives in the results index; the README shows the short table.
LEDGER_PAGES = (repository.RESULTS_DIR / "README.md", repository.ROOT / "README.md")
LEDGER_BEGIN = "<!-- claims-ledger:begin (generated: python -m ssog_lab ledger; do not edit by hand) -->"
LEDGER_END = "<!-- claims-ledger:end -->"
TABLE_BEGIN = "<!-- results-table:begin (generated: python -m ssog_lab ledger; do not edit by hand) -->"
TABLE_END = "<!-- results-table:end -->"


def with_ledger(page: str | Path, results_dir: str | Path = RESULTS_DIR) -> str:
    """The page's text with each generated block replaced: between `LEDGER_BEGIN` and `LEDGER_END` the whole
    ledger (`claims_ledger_markdown`), between `TABLE_BEGIN` and `TABLE_END` the short table (`results_table`).
    A page holds each pair at most once and at least one pair. tests/test_results.py checks the pages."""
    text = Path(page).read_text()
    blocks = {(LEDGER_BEGIN, LEDGER_END): lambda: claims_ledger_markdown(results_dir),
              (TABLE_BEGIN, TABLE_END): lambda: results_table(results_dir)}
    found = [pair for pair in blocks if text.count(pair[0]) == 1 and text.count(pair[1]) == 1]
    if not found or any(text.count(mark) > 1 for pair in blocks for mark in pair):
        raise ValueError(f"{page} must hold a ledger or table marker pair, each marker once: "
                         f"{LEDGER_BEGIN!r} … {LEDGER_END!r} or {TABLE_BEGIN!r} … {TABLE_END!r}")
    for begin, end in found:
        head, rest = text.split(begin)
        _, tail = rest.split(end)
        text = f"{head}{begin}\n\n{blocks[begin, end]()}\n\n{end}{tail}"
    return text


def main(argv: list[str] | None = None) -> int:
    """`python -m ssog_lab ledger [PAGE ...]`: rewrite the generated blocks of each page (default: the results
    index's ledger and the README's table) from the committed results."""
    args = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in args):
        print(main.__doc__.split("\n")[0].strip("`").replace("`:", ":"))
        return 0
    for path in [Path(a) for a in args] or LEDGER_PAGES:
        new = with_ledger(path)
        changed = new != path.read_text()
        if changed:
            path.write_text(new)
        print(f"{path}: the claims ledger {'rewritten' if changed else 'already current'}")
    return 0
