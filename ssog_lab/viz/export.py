"""Notebooks as static HTML that works offline: every figure drawn, every equation typeset, no CDN needed.

Two nbconvert preprocessors: `StaticFigures` (figures from their static views, plotly.js inlined once) and
`StaticMaths` (the Markdown's TeX as MathML, which browsers typeset natively, instead of MathJax from a CDN).
The project's environment enables both for every HTML export (jupyter-config/jupyter_nbconvert_config.json,
copied into the environment's etc/jupyter by `make`), so the ordinary
`jupyter nbconvert --execute --to html NOTEBOOK` needs no option.
"""

from __future__ import annotations

import base64
import functools
import gzip
import re

from latex2mathml.converter import convert as latex_to_mathml
from nbconvert.preprocessors import Preprocessor
from plotly.offline import get_plotlyjs
from traitlets import Unicode

from .render import PLOT_DIV, WIDGET_MIME


@functools.cache
def plotlyjs_script() -> str:
    """plotly.js (the installed plotly package's) inline, gzipped and base64-encoded (1.9 MB instead of 4.8 MB),
    for a page that works offline. The browser unpacks it (DecompressionStream) and runs it; `window.plotlyLoaded`
    is the promise of that, on which every plot's script waits (`StaticFigures`)."""
    packed = base64.b64encode(gzip.compress(get_plotlyjs().encode(), mtime=0)).decode()
    return ("<script type=\"text/javascript\">window.PlotlyConfig = {MathJaxConfig: 'local'};\n"
            "window.plotlyLoaded = new Response(new Blob([Uint8Array.from(atob(\"" + packed + "\"),"
            " c => c.charCodeAt(0))])"
            ".stream().pipeThrough(new DecompressionStream('gzip'))).text().then(code => (0, eval)(code));</script>\n")


NO_SCRIPT = "data:text/javascript,"  # an empty script, for the template's CDN script tags
_PLOT_SCRIPT = re.compile(r"<script>(\s*window\.PLOTLYENV.*?)</script>", re.S)  # pio.to_html's script of one plot


class StaticFigures(Preprocessor):
    """Every output holding a figure loses its live widget view (which needs a kernel, or widget state and a
    CDN), so the page shows the static plot; the first such output gets plotly.js in front of its plot. The
    widget state goes too: it would only make the page fetch the widget front-end from a CDN.

    plotlyjs_url: load plotly.js from this (relative) URL instead of inlining it (a site of several pages
    shares one copy: `ssog_lab.book`).
    """

    plotlyjs_url = Unicode("", help="plotly.js to load by URL; empty: inline it").tag(config=True)

    def preprocess(self, nb, resources):
        nb.metadata.pop("widgets", None)
        first = True
        for cell in nb.cells:
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                if PLOT_DIV not in data.get("text/html", ""):
                    continue
                data.pop(WIDGET_MIME, None)
                data["text/html"] = _PLOT_SCRIPT.sub(r"<script>window.plotlyLoaded.then(() => {\1});</script>",
                                                     data["text/html"])
                if first:
                    script = (f'<script src="{self.plotlyjs_url}"></script>\n'
                              "<script>window.plotlyLoaded = Promise.resolve();</script>\n"
                              if self.plotlyjs_url else plotlyjs_script())
                    data["text/html"] = script + data["text/html"]
                    first = False
        resources["require_js_url"] = NO_SCRIPT  # the plots call window.Plotly: the page asks no CDN for require.js
        return nb, resources


# Code (fenced blocks, inline spans) keeps its dollars; outside it, $$display$$ and $inline$ maths (not \$). An inline
# span may wrap onto the next line, as in Markdown, but not across a blank line (a paragraph's end).
_CODE = re.compile(r"(```.*?```|`(?:[^`\n]|\n(?![ \t]*\n))*`)", re.S)
_MATHS = re.compile(r"\$\$(.+?)\$\$|(?<![\\$])\$(?!\s)([^$\n]+?)(?<!\s)\$", re.S)
_TEXT = re.compile(r">([^<]+)<")  # the text between two MathML tags
_MARKDOWN_PUNCTUATION = {c: f"&#{ord(c)};" for c in "*_`[]\\"}


def markdown_with_mathml(source: str) -> str:
    """`source` (Markdown) with each TeX formula replaced by MathML (display="block" for $$…$$). Markdown's own
    punctuation inside the MathML's text becomes entities, so emphasis or escapes never reach into a formula."""
    def mathml(match: re.Match) -> str:
        display = match.group(1) is not None
        element = latex_to_mathml((match.group(1) if display else match.group(2)).strip(),
                                  display="block" if display else "inline")
        return _TEXT.sub(lambda text: ">" + "".join(_MARKDOWN_PUNCTUATION.get(c, c) for c in text.group(1)) + "<",
                         element)

    return "".join(part if part.startswith("`") else _MATHS.sub(mathml, part) for part in _CODE.split(source))


class StaticMaths(Preprocessor):
    """Every Markdown cell's TeX becomes MathML (`markdown_with_mathml`): typeset offline, with no MathJax."""

    def preprocess(self, nb, resources):
        nb, resources = super().preprocess(nb, resources)
        resources["mathjax_url"] = NO_SCRIPT  # nothing left to typeset: the page asks no CDN for MathJax
        return nb, resources

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "markdown":
            cell.source = markdown_with_mathml(cell.source)
        return cell, resources
