"""Plotly figures and live ipywidgets for the notebooks.

Every widget is a `LiveFigure`: a plotly figure in a `FigureView`, a list of ipywidgets controls, and a plain
`update(**values)` method that recomputes the figure's data. The controls call `update` through
`observe`; tests call `update` directly, without a browser, and check that the data changed. Displayed,
every widget and every plain figure also carries static views of its plot (`render`), so an executed
notebook shows its figures without a kernel and in `jupyter nbconvert --to html`.
"""

from ._base import LiveFigure
from .atoms import (
    KERNEL_PRESETS,
    edge_response,
    gaussian_1d_widget,
    photo_widget,
    query_kernel_widget,
)
from .common import (
    apply_to_image,
    atoms_from_lists,
    fast_mode,
    image_row,
    photo_grid,
)
from .cost import cost_widget, kronecker_widget, timing_widget
from .depth import parameter_widget, solver_independence_widget, solver_widget, trajectory_widget
from .env import attention_row, environment_report, environment_table, patch_tokens, ssog_vs_attention_widget
from .kernel import KERNEL_PARTS, gpu_timing_figure, interpreter_widget, kernel_source, roofline_figure, show_source
from .learned import atom_change_figure, atom_change_markdown, atoms_widget, receptive_field_widget, steering_widget
from .lipschitz import nfe_widget, picard_problems, picard_widget, ray_widget, ssog_norm_widget, two_atom_head
from .render import FigureBox, FigureView, figure_bundle, use_static_renderer
from .scaling import claim_summary, scaling_widget
from .training import (
    TrainingMonitor,
    digits_figure,
    prediction_widget,
    results_widget,
)

__all__ = ["LiveFigure", "FigureBox", "FigureView", "figure_bundle", "use_static_renderer"]
__all__ += ["KERNEL_PRESETS", "edge_response", "gaussian_1d_widget", "photo_widget", "query_kernel_widget",
            "apply_to_image", "atoms_from_lists", "fast_mode", "image_row", "photo_grid"]
__all__ += ["cost_widget", "kronecker_widget", "timing_widget"]
__all__ += ["attention_row", "environment_report", "environment_table", "patch_tokens", "ssog_vs_attention_widget"]
__all__ += ["KERNEL_PARTS", "gpu_timing_figure", "interpreter_widget", "kernel_source", "roofline_figure",
            "show_source"]
__all__ += ["nfe_widget", "picard_problems", "picard_widget", "ray_widget", "ssog_norm_widget", "two_atom_head"]
__all__ += ["parameter_widget", "solver_independence_widget", "solver_widget", "trajectory_widget"]
__all__ += ["TrainingMonitor", "digits_figure", "prediction_widget", "results_widget"]
__all__ += ["atom_change_figure", "atom_change_markdown", "atoms_widget", "receptive_field_widget", "steering_widget"]
__all__ += ["claim_summary", "scaling_widget"]

use_static_renderer()  # plain figures, too, carry a static view when shown in a kernel
