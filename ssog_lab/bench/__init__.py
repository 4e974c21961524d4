"""Benchmarks: the model (throughput and peak memory against resolution, mixers side by side) and the
operator alone, with the suite's timers, tables and CSV files.

    rows = run(grid(preset="nano", resolutions=(32, 64)), out_dir="results")   # list of dicts, CSV written
    rows = load_csv("results/bench.csv")
    figure(rows)                          # plotly: throughput and memory against resolution, log-log
    ratio_table(rows), ratio_markdown(rows)   # each mixer against the fastest SDPA / peak memory baselines

Files: config (BenchConfig, the configurations of a run, CSV columns), timing (the timers and the side-by-side
helpers), measure (one configuration in this process), runner (one process per configuration, CSV), operator (the
operator alone, timed and by formula), gpu (the GPU check: Triton kernels, SDPA flash and ViT-Tiny on CUDA;
imported on its own), subnormals (where activations hold subnormal floats; imported on its own), notebook_times
(each notebook's running time; imported on its own), report (markdown and CSV writers, ratio tables), figure
(plotly), params and cli (commands; __main__ for python -m ssog_lab.bench).
"""

from ..models import DEPTHS, MIXERS
from .cli import main
from .config import (
                     COLUMNS,
                     MEMORY_BASELINES,
                     RESOLUTIONS,
                     SDPA_MIXERS,
                     BenchConfig,
                     configurations,
)
from .figure import figure, save_figure
from .measure import machine, run_one
from .operator import OPERATORS, flop_counts, operator_rows, operator_timings
from .report import markdown_table, operator_markdown, ratio_markdown, ratio_table, results_markdown
from .runner import KILLED, load_csv, run, run_in_subprocess, write_csv
from .timing import Timing, cpu_time, cuda_time, cuda_time_ms, time_ms

__all__ = ["COLUMNS", "DEPTHS", "KILLED", "MEMORY_BASELINES", "MIXERS", "OPERATORS", "RESOLUTIONS",
           "SDPA_MIXERS", "BenchConfig", "Timing", "configurations", "cpu_time", "cuda_time", "cuda_time_ms",
           "figure", "flop_counts", "load_csv", "machine", "main", "markdown_table", "operator_markdown",
           "operator_rows", "operator_timings", "ratio_markdown", "ratio_table", "results_markdown", "run",
           "run_in_subprocess", "run_one", "save_figure", "time_ms", "write_csv"]
