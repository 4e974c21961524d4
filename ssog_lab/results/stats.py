"""The suite's statistics, each written once:

* `mean_std` and `difference_std`: per-seed values summarized as mean and sample standard deviation, and the spread
  of a difference of two such means; for the accuracy results files and the claims ledger
  (experiments.defaults, experiments.ode_solutions, experiments.fashion.report, results.ledger) and notebook 05's
  results figure (viz.training);
* `beyond_noise`: whether two such means differ by more than the larger standard deviation (the NFE comparisons of
  experiments.ode_solutions and the ledger's NFE verdict); `spread_text`, "mean ± std" as they write it;
* `loglog_slope`: the exponent of a power law fitted on log–log axes; for notebook 02's FLOP and timing figures
  (viz.cost), not for a results file.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (n − 1) of per-seed values, in their own units; std NaN for one value
    (one seed measures no spread)."""
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else math.nan


def difference_std(std: float, n: int, base_std: float, base_n: int) -> float:
    """The standard deviation of a difference of two independent means (std over n seeds each): √(s²/n + s₀²/n₀).
    NaN while either side has one seed: the other side's spread alone would understate it."""
    return math.sqrt(std ** 2 / n + base_std ** 2 / base_n)


def beyond_noise(mean: float, std: float, base_mean: float, base_std: float) -> int:
    """−1 when `mean` is below `base_mean` by more than the larger of the two standard deviations, +1 when above by
    more, 0 (level) otherwise. Both stds must be measured (two seeds or more: `mean_std` gives NaN for one)."""
    if math.isnan(std) or math.isnan(base_std):
        raise ValueError("beyond_noise needs a measured std on both sides (NaN: one seed measures no spread)")
    noise = max(std, base_std)
    return -1 if mean < base_mean - noise else 1 if mean > base_mean + noise else 0


def spread_text(mean: float, std: float, n: int) -> str:
    """"mean ± sample std" over n seeds, or "mean (1 seed)" where no spread is measured."""
    return f"{mean:.1f} ± {std:.1f}" if n > 1 else f"{mean:.1f} (1 seed)"


def loglog_slope(x: Sequence[float], y: Sequence[float]) -> float:
    """Least-squares slope of log y against log x: the exponent p of a power law y ∝ x^p. x and y are positive, of
    one length, with at least two distinct x (else ValueError or statistics.StatisticsError)."""
    return statistics.linear_regression([math.log(v) for v in x], [math.log(v) for v in y]).slope
