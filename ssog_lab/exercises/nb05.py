"""Exercises of notebook 05 (registered with `@exercise`; see the package docstring)."""

from __future__ import annotations

import math
import statistics

import torch
import torch.nn.functional as F

from ._registry import close, exercise, same_set


@exercise("05.uniform_loss", judge=close(0.01), wrong=1.0,
          hint="the loss is −log of the probability given to the right class; which logarithm does "
               "cross-entropy use?",
          explain="−ln(1/10) = ln 10: the first logged losses of every run start near it.")
def uniform_loss() -> float:
    return float(F.cross_entropy(torch.zeros(1, 10), torch.tensor([0])))


@exercise("05.steps", judge=close(0.0), wrong=3 * math.ceil(4000 / 128),
          hint="fit drops the last, incomplete batch of every epoch: count the full batches of 128 in 4,000 images.",
          explain="3 epochs × ⌊4000 / 128⌋ = 3 × 31 full batches; compare with the 'step' of your run's last record.")
def steps() -> int:
    return 3 * (4000 // 128)


SEEDS = (86.8, 84.7, 87.5)  # three seeds of one configuration, test accuracy in %


@exercise("05.sample_std", judge=close(0.005), wrong=statistics.pstdev(SEEDS),
          hint="with n = 3 seeds, divide the sum of squared deviations by n − 1, not by n (the population formula "
               "underestimates the spread of a small sample).",
          explain="the sample standard deviation (n − 1) is what the results tables and the widget report.")
def sample_std() -> float:
    return statistics.stdev(SEEDS)


@exercise("05.fair", judge=same_set, wrong={"a", "b", "d"},
          hint="a fair comparison changes one thing (the mixer), keeps the test set unseen until the end, and "
               "never averages different models together.",
          explain="b and d; a pools different configurations, c tunes on the test set, e compares different "
                  "settings.")
def fair() -> set[str]:
    return {"b", "d"}
