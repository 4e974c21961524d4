"""Exercises of notebook 01 (registered with `@exercise`; see the package docstring)."""

import torch

from ... import ops
from ._registry import close, exercise, same_function


def _weights(i: float, mu: float, sigma: float, length: int) -> torch.Tensor:
    """g(i → j; μ, σ) for j = 0 … length−1 (float64), from the library."""
    as_tensor = lambda x: torch.tensor(x, dtype=torch.float64)
    return ops.axis_weights(as_tensor(i), as_tensor(mu), as_tensor(sigma), length)


@exercise("01.peak", wrong=7, judge=close(0.0),
          hint="the weight goes to the grid position nearest the centre i + μ (a position is an integer; "
               "the centre need not be).",
          explain="5 + 2.6 = 7.6 lies nearer 8 than 7: as σ → 0 every other logit falls infinitely far below.")
def peak() -> int:
    return int(_weights(5.0, 2.6, 0.05, 16).argmax())


@exercise("01.tie", wrong=1.0, judge=close(1e-6),
          hint="locate i + μ among the grid positions: which are nearest to it, and how far is each?",
          explain="positions 7 and 8 have equal logits, so the softmax splits the weight 50/50 however small σ is.")
def tie() -> float:
    return float(_weights(5.0, 2.5, 0.05, 16)[7])


@exercise("01.clamp", wrong=20, judge=close(0.0),
          hint="the weights live on the positions that exist, 0 up to W − 1; which of them is nearest i + μ?",
          explain="a centre past the end of the axis puts its weight on the last token: the Gaussian is "
                  "renormalized on the grid, never padded.")
def clamp() -> int:
    return int(_weights(12.0, 8.0, 0.05, 16).argmax())


# Cases for the learner's G matrix: a centred atom, an offset one, and one whose centre lies 1000 tokens
# off the axis (where exp(ℓ) underflows for every j and only a log-space softmax survives).
_MATRIX_CASES = ((0.0, 1.5, 12), (2.5, 0.7, 9), (1000.0, 0.5, 8))


def _matrix_judge(answer, expected) -> bool:
    """The learner's `gaussian_matrix(mu, sigma, length)` against the library's on every case."""
    return all(same_function(lambda c=case: tuple(torch.tensor(x, dtype=torch.float64) if isinstance(x, float)
                                                  else x for x in c), rtol=1e-6, atol=1e-9,
                             forbid=(ops.axis_weights,))(answer, expected)
               for case in _MATRIX_CASES)


def _naive_matrix(mu, sigma, length):
    """The formula typed in directly: exp / sum, which gives 0/0 = NaN for a centre far off the axis."""
    j = torch.arange(length, dtype=torch.float64)
    e = torch.exp(-(j[None, :] - j[:, None] - mu) ** 2 / (2 * sigma**2))  # (W, W)
    return e / e.sum(dim=1, keepdim=True)


@exercise("01.matrix", wrong=_naive_matrix, judge=_matrix_judge,
          hint="G[i, j] = g(i → j): build the (W, W) logits with broadcasting (queries i along dim 0, "
               "positions j along dim 1) and take a softmax over j. Does it survive μ = 1000?",
          explain="the whole matrix in two lines; a softmax over the logits subtracts their maximum, so no centre "
                  "and no width can give 0/0. `ops.axis_weights` also sets tails below 2⁻⁵⁰ to exact zeros.")
def matrix():
    def gaussian_matrix(mu, sigma, length):
        positions = torch.arange(length, dtype=torch.float64)  # (W,): every query position i
        return ops.axis_weights(positions, mu, sigma, length)  # (W, W)
    return gaussian_matrix
