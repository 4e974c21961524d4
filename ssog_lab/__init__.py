"""ssog_lab: a teaching and research suite for SSoG, the separable sum-of-Gaussians token mixer.

Modules: `ops` (the operator), `layers` (mixers), `models` (ViTs: discrete, looped, ODE),
`ode` (solvers), `lipschitz`, `data`, `train`, `bench` (benchmarks, timers, tables), `style` (the palette),
`viz` (plotly figures and widgets). Design: docs/DESIGN.md.
"""

__version__ = "0.1.0"
