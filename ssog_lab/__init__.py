"""ssog_lab: a teaching and research suite for SSoG, the separable sum-of-Gaussians token mixer.

Modules: `ops` (the operator), `layers` (mixers), `models` (ViTs: discrete, looped, ODE), `ode` (solvers),
`ode_cost` (what a solve costs: evaluations, convergence), `lipschitz`, `data`, `train`, `bench` (benchmarks,
timers, tables), `experiments` (research runs), `results` (run records and the claims ledger), `exercises` (the
notebooks' self-checked exercises), `style` (the palette), `viz` (plotly figures and widgets), `book` (the
published course). Design: docs/DESIGN.md.
"""

__version__ = "0.1.0"
