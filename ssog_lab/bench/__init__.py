"""Scaling benchmark (see ssog_lab/bench/measure.py)."""

from .measure import (COLUMNS, DEPTHS, MIXERS, RESOLUTIONS, BenchConfig, cuda_time_ms, figure, grid, load_csv,
                      main, operator_markdown, operator_rows, ratio_markdown, ratio_table, results_markdown, run,
                      run_in_subprocess, run_one, save_figure, write_csv)

__all__ = ["COLUMNS", "DEPTHS", "MIXERS", "RESOLUTIONS", "BenchConfig", "cuda_time_ms", "figure", "grid", "load_csv",
           "main", "operator_markdown", "operator_rows", "ratio_markdown", "ratio_table", "results_markdown", "run",
           "run_in_subprocess", "run_one", "save_figure", "write_csv"]
