"""The course as a static site that works offline: `python -m ssog_lab book --out site` (or `make book`).

Each notebook of notebooks/ is executed the ordinary way (`jupyter nbconvert --to notebook --execute`, in
notebooks/) and rendered to one HTML page by nbconvert with `viz.export`'s preprocessors: every figure drawn,
every live figure with plotly's own slider over precomputed positions of its main control (moves without a
kernel), every formula as MathML. The pages share one copy of plotly.js; `index.html` is the course map, with
each notebook's running time on the machine that built the site. The executed notebooks sit beside the
pages (notebooks/) for download.

    python -m ssog_lab book --out site            # full mode (what the course shows)
    python -m ssog_lab book --out site --fast     # SSOG_LAB_FAST=1: seconds per notebook, for tests
"""

from __future__ import annotations

import argparse
import datetime
import html
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from .bench.measure import git_commit, machine
from .repository import ROOT

MARKER = ".ssog_lab_book"  # a folder holding this file was made by this command and may be rebuilt
PLOTLYJS = "plotly.min.js"


def notebook_title(path: Path) -> tuple[str, str]:
    """(title, first paragraph) of a notebook: its first Markdown heading and the paragraph after it, as text."""
    cells = json.loads(path.read_text())["cells"]
    text = "\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown")
    heading = re.search(r"^#\s+(.+)$", text, re.M)
    title = heading[1].strip() if heading else path.stem
    rest = text[heading.end():] if heading else text
    paragraph = next((p.strip() for p in rest.split("\n\n") if p.strip() and not p.lstrip().startswith("#")), "")
    plain = re.sub(r"\*\*|`|\$", "", paragraph)  # the index shows plain text
    return title, plain


def execute(path: Path, out: Path, fast: bool) -> float:
    """Execute the notebook into `out` with plain `jupyter nbconvert --execute`; returns wall seconds."""
    env = {**os.environ, "SSOG_LAB_FAST": "1" if fast else "0"}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
                           "--output-dir", str(out), str(path)], env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{path.name} failed to execute:\n{done.stderr[-4000:]}")
    return time.perf_counter() - start


def render(executed: Path, names: list[str]) -> str:
    """The executed notebook as one HTML page that loads ./plotly.min.js; links to sibling notebooks go to pages."""
    from nbconvert import HTMLExporter
    from traitlets.config import Config

    from .viz.export import StaticFigures, StaticMaths

    config = Config()
    config.HTMLExporter.preprocessors = [StaticFigures, StaticMaths]
    config.StaticFigures.plotlyjs_url = PLOTLYJS
    body, _ = HTMLExporter(config=config, template_name="lab").from_filename(str(executed))
    for name in names:
        body = body.replace(f'href="{name}.ipynb', f'href="{name}.html')
    return body


def _running_time(seconds: float | None) -> str:
    return "" if seconds is None else f"({seconds:.0f} s)"


def index_page(rows: list[dict], fast: bool) -> str:
    """The course map: one entry per notebook with its first paragraph and running time here, and the build's host."""
    host = machine()
    items = "\n".join(
        f'<li><a href="{row["name"]}.html"><b>{html.escape(row["title"])}</b></a> '
        f'<span class="time">{_running_time(row["seconds"])}</span><br>{html.escape(row["summary"])}</li>'
        for row in rows)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    mode = "fast mode (SSOG_LAB_FAST=1)" if fast else "full mode"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>ssog_lab: the course</title>
<style>body {{ font-family: sans-serif; max-width: 56em; margin: 2em auto; line-height: 1.45; padding: 0 1em }}
li {{ margin-bottom: 1em }} .time, footer {{ color: #666 }}</style></head>
<body>
<h1>ssog_lab: the course</h1>
<p>SSoG replaces a Vision Transformer's dense self-attention with a separable sum of Gaussians: O(N·√N·d)
instead of O(N²·d). Nine notebooks build it from one Gaussian to a continuous-depth model and a fused kernel.
Every figure below was computed when this site was built; each live figure's slider moves it without a kernel
(over precomputed positions). Run the notebooks (<code>make lab</code>) for every control.</p>
<ol start="0">
{items}
</ol>
<footer>Built by <code>python -m ssog_lab book</code> in {mode} at commit {git_commit() or "unknown"}, {stamp},
on {html.escape(host["cpu_model"])} ({html.escape(host["cpu_flags"]) or "no AVX-512"}, {os.cpu_count()} cores);
the times in brackets are each notebook's execution there. The executed notebooks:
<a href="notebooks/">notebooks/</a>.</footer>
</body></html>
"""


def build(out: Path, fast: bool = False, notebooks: Path = ROOT / "notebooks") -> list[dict]:
    """Execute every notebook of `notebooks` into out/notebooks, then `publish` the site into `out` (created; an
    existing folder only if an earlier build made it). Returns one row per notebook: {name, title, summary,
    seconds}."""
    check_out(out)
    paths = sorted(notebooks.glob("[0-9][0-9]_*.ipynb"))
    if not paths:
        raise FileNotFoundError(f"no notebooks (NN_name.ipynb) in {notebooks}")
    (out / "notebooks").mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("made by python -m ssog_lab book\n")
    seconds = {}
    for path in paths:
        seconds[path.stem] = execute(path, out / "notebooks", fast)
        print(f"{path.stem}: executed in {seconds[path.stem]:.0f} s", flush=True)
    return publish(out, seconds, fast)


def check_out(out: Path) -> None:
    """Refuse a non-empty folder that this command did not make (never overwrite a reader's files)."""
    if out.exists() and any(out.iterdir()) and not (out / MARKER).exists():
        raise FileExistsError(f"--out {out} exists and was not made by this command; choose a new or empty folder")


def publish(out: Path, seconds: dict[str, float | None], fast: bool) -> list[dict]:
    """Render the executed notebooks out/notebooks/NAME.ipynb (NAME in `seconds`, with its execution time or
    None) to out/NAME.html, write one plotly.js and the index. Returns the index rows. `out` is the caller's:
    `build` checks it; a test publishes into a fresh folder."""
    from plotly.offline import get_plotlyjs

    (out / PLOTLYJS).write_text(get_plotlyjs())
    names = sorted(seconds)
    rows = []
    for name in names:
        page = out / f"{name}.html"
        page.write_text(render(out / "notebooks" / f"{name}.ipynb", names))
        title, summary = notebook_title(out / "notebooks" / f"{name}.ipynb")
        rows.append({"name": name, "title": title, "summary": summary, "seconds": seconds[name]})
        print(f"{name}: page {page.stat().st_size / 1e6:.1f} MB", flush=True)
    (out / "index.html").write_text(index_page(rows, fast))
    return rows


def site_bytes(out: Path) -> int:
    return sum(file.stat().st_size for file in out.rglob("*") if file.is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ssog_lab book", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "site", help="the site's folder (default: site/)")
    parser.add_argument("--fast", action="store_true", help="execute in fast mode (SSOG_LAB_FAST=1)")
    args = parser.parse_args(argv)
    build(args.out, fast=args.fast)
    print(f"site: {args.out / 'index.html'} ({site_bytes(args.out) / 1e6:.1f} MB with the executed notebooks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
