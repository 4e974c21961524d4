"""Timers and the helpers of side-by-side measures.

The benchmarks and the experiments' inference rates time a call with `cpu_time` (wall clock) or `cuda_time`.
The side-by-side speed measures (scripts/train_speed.py, `experiments.ode_solutions cost`) time whole steps in
CPU time themselves, rotate the contenders' order each round (`rotated`) and pair the ratios by round
(`paired_speed`). Training runs record their elapsed time with time.perf_counter.

`cpu_time` and `cuda_time` time `fn()` after `warmup` untimed calls, repeat it until at least `repeats` calls
and `min_seconds` of timed work (at most `max_repeats` calls), and report the median and the best call. The
median is the figure reported; the best is the one least disturbed by other work on a shared machine.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Timing:
    """Seconds per call: median and best of `calls` timed calls."""

    median_s: float
    best_s: float
    calls: int

    @property
    def median_ms(self) -> float:
        return 1e3 * self.median_s

    @property
    def best_ms(self) -> float:
        return 1e3 * self.best_s


def _repeat(timed_call: Callable[[], float], repeats: int, min_seconds: float, max_repeats: int | None) -> Timing:
    if repeats < 1:
        raise ValueError(f"repeats must be ≥ 1, got {repeats}")
    times: list[float] = []
    while (len(times) < repeats or sum(times) < min_seconds) and (max_repeats is None or len(times) < max_repeats):
        times.append(timed_call())
    return Timing(statistics.median(times), min(times), len(times))


def cpu_time(fn: Callable[[], object], *, warmup: int = 1, repeats: int = 3, min_seconds: float = 0.0,
             max_repeats: int | None = None) -> Timing:
    """Wall-clock time of fn() (time.perf_counter). For work on a GPU use `cuda_time`."""
    for _ in range(warmup):
        fn()

    def call() -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    return _repeat(call, repeats, min_seconds, max_repeats)


def cuda_time(fn: Callable[[], object], *, warmup: int = 2, repeats: int = 10, min_seconds: float = 0.2,
              max_repeats: int | None = 200) -> Timing:
    """GPU time of fn(), between two CUDA events on the current stream (host overhead between kernels
    counts, host work before the first launch does not)."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()

    def call() -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 1e3

    return _repeat(call, repeats, min_seconds, max_repeats)


def cuda_time_ms(fn: Callable[[], object], min_repeats: int = 10, min_seconds: float = 0.2, warmup: int = 2) -> float:
    """Median milliseconds of `cuda_time` (the GPU script's and notebook 08's call)."""
    return cuda_time(fn, warmup=warmup, repeats=min_repeats, min_seconds=min_seconds).median_ms


def time_ms(fn: Callable[[], object], repeats: int = 5, budget_s: float = 0.3) -> float:
    """Best milliseconds of `cpu_time` after one warm-up call: calls until `budget_s` has been
    timed, at most `repeats` (the best is the least disturbed by other work on a shared machine)."""
    return cpu_time(fn, warmup=1, repeats=1, min_seconds=budget_s, max_repeats=repeats).best_ms


def rotated(items: Sequence[T], round_index: int) -> list[T]:
    """The order of one round of a side-by-side measurement: `items` starting at round_index (mod their count), so
    that over len(items) rounds each goes first once and none always runs after the same neighbour."""
    start = round_index % len(items)
    return [*items[start:], *items[:start]]


def paired_speed(base: Sequence[float], times: Sequence[float]) -> float:
    """Speed against a baseline timed beside it: the median over paired times of base ÷ time (≥ 1: faster), which
    a shared machine disturbs less than a ratio of medians (a slow moment slows both of a pair)."""
    if not base or len(base) != len(times):
        raise ValueError(f"base and times must be paired, non-empty lists, got {len(base)} and {len(times)} times")
    return statistics.median(b / t for b, t in zip(base, times, strict=True))
