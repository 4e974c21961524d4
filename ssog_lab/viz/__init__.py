"""Plotly figures and live ipywidgets for the notebooks.

Every widget is a `LiveFigure`: a plotly `FigureWidget`, a list of ipywidgets controls, and a plain
`update(**values)` method that recomputes the figure's data. The controls call `update` through
`observe`; tests call `update` directly, without a browser, and check that the data changed.
"""

from ._base import LiveFigure

__all__ = ["LiveFigure"]
