"""Research experiments built on the library: each module plans its runs, runs them (resumable, one
single-thread process per core), and writes its results file under docs/results/ with the command inside.

    python -m ssog_lab.experiments.defaults run --jobs 2       # the defaults table (docs/results/defaults/accuracy.md)
    python -m ssog_lab.experiments.ode_solutions run --jobs 2  # ODE solutions (docs/results/ode_solutions.md)
    python -m ssog_lab.experiments.ode_solutions run --grid 14 --jobs 2  # the same at 14×14 tokens, default solver
"""
