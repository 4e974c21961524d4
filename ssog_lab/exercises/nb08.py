"""Exercises of notebook 08, the Triton appendix (registered with `@exercise`; see the package docstring)."""

import torch

from .. import ops
from ._registry import close, exercise


@exercise("08.mode", wrong=3, judge=close(0.0),
          hint="the logit is a parabola in j whose vertex is at the centre i + μ; the kernel's mode is the grid "
               "position nearest it, clamped to the line's positions 0 … P − 1.",
          explain="i + μ = 3.6 lies nearer 4 than 3, inside the line, so no clamping: j* = 4.")
def mode() -> int:
    line, query, offset = 7, 2.0, 1.6
    return int(ops.axis_weights(torch.tensor(query), torch.tensor(offset), torch.tensor(1.0), line).argmax())


@exercise("08.saving", wrong=4, judge=close(0.0),
          hint="count, per (token, atom), what each kernel writes: a whole line of weights, or one normalizer.",
          explain="P = 64: for every (token, atom) a naive kernel stores a line of 64 weights, this one a single "
                  "number.")
def saving() -> float:
    tokens, line, atoms = 64 * 64, 64, 4
    return (tokens * line * atoms) / (tokens * atoms)
