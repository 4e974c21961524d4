"""One palette for every figure: a mixer (or the operator behind it) has the same colour in every notebook.

Convention: dense attention (sdpa) blue, its math backend light blue, axial attention orange, fixed SSoG green,
steered SSoG red. Notebooks 02–03 compare operators rather than mixers; they reuse the mixer colours
(`OPERATOR_COLOURS`), so "attention" and "SSoG" look the same there as in the benchmark charts.
"""

MIXER_COLOURS = {"sdpa": "#1f77b4", "sdpa-math": "#aec7e8", "axial": "#ff7f0e", "ssog": "#2ca02c",
                 "ssog-steered": "#d62728"}
# Operators drawn in notebooks 02–03, keyed by the label they carry there.
OPERATOR_COLOURS = {"SDPA (dense attention)": MIXER_COLOURS["sdpa"], "axial attention": MIXER_COLOURS["axial"],
                    "SSoG separable": MIXER_COLOURS["ssog"], "fixed SSoG": MIXER_COLOURS["ssog"],
                    "SSoG via the N×N kernel": "#9467bd"}
# Anything drawn as one of several series that are not mixers (atoms, depth forms, runs), cycled in order.
SERIES_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
_UNKNOWN = "#7f7f7f"


def mixer_colour(mixer: str) -> str:
    """The colour of a mixer; grey for a name without one (a new mixer draws instead of failing)."""
    return MIXER_COLOURS.get(mixer, _UNKNOWN)


def series_colour(index: int) -> str:
    """The colour of the index-th series (cycled)."""
    return SERIES_COLOURS[index % len(SERIES_COLOURS)]
