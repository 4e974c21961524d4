"""Exercises of notebook 01 (registered with `@exercise`; see the package docstring) and `check_edge_detector`, the
open check of its centre–surround exercise (any pair of atoms that detects edges passes)."""

import torch

from .. import ops
from ..viz.common import apply_to_image, atoms_from_lists
from ._registry import close, exercise, same_function
from .verdict import Check, unanswered


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


# A difference of Gaussians models a centre–surround cell when the surround is clearly wider than the centre
# (Marr & Hildreth's 1.6 is the classic ratio) and reaches past the neighbouring tokens.
SURROUND_RATIO, MIN_SURROUND = 1.5, 1.5


def check_edge_detector(mu, sigma, amp) -> Check:
    """Self-check for the centre–surround exercise: two atoms, a positive centre and a negative surround at
    least SURROUND_RATIO times wider and MIN_SURROUND tokens wide, whose response is ~0 on flat regions
    and clearly non-zero at an edge, and small far from it. None = not answered yet."""
    if mu is None or sigma is None or amp is None:
        return unanswered("two atoms at μ = 0, a narrow one with α > 0 and a wide one with α < 0; "
                          "what must Σα be for a flat image to give 0?")
    try:
        mu_t, sigma_t, amp_t = atoms_from_lists(mu, sigma, amp)
    except (ValueError, TypeError, RuntimeError) as error:
        return Check("wrong", f"could not read your atoms: {error}")
    if len(amp_t) != 2:
        return Check("wrong", f"use exactly two atoms, you gave {len(amp_t)}")
    if bool((sigma_t <= 0).any()):
        return Check("wrong", "every σ must be > 0")
    positive, negative = int(amp_t.argmax()), int(amp_t.argmin())
    if not (amp_t[positive] > 0 > amp_t[negative]):
        return Check("wrong", f"one amplitude must be positive and one negative, got {amp_t.tolist()}")
    centre, surround = sigma_t[positive], sigma_t[negative]  # (2,) each: (row, col) widths
    if not bool((surround >= SURROUND_RATIO * centre).all()):
        return Check("wrong", "the negative atom (surround) must be clearly wider than the positive one (centre) on "
                     f"both axes: at least {SURROUND_RATIO:g}× its σ")
    if not bool((surround >= MIN_SURROUND).all()):
        return Check("wrong", f"a surround of σ < {MIN_SURROUND:g} tokens barely reaches past the neighbouring tokens: "
                     "the two atoms then differ by a token or so, not a centre and its surround")
    side = 32
    flat = apply_to_image(torch.full((side, side), 0.7, dtype=torch.float64), mu_t, sigma_t, amp_t)
    if flat.abs().max() > 1e-6:
        return Check("wrong", f"on a flat image the response is {flat.abs().max():.3g}, not 0: each atom's weights "
                     f"sum to 1, so a flat image gives Σα × grey level (your Σα = {amp_t.sum():.3g})")
    step = torch.zeros(side, side, dtype=torch.float64)
    step[:, side // 2:] = 1.0  # a vertical edge between columns 15 and 16
    response = apply_to_image(step, mu_t, sigma_t, amp_t)[side // 2]  # (side,): the middle row
    at_edge = response[side // 2 - 2: side // 2 + 2].abs().max()
    far = torch.cat([response[2:6], response[-6:-2]]).abs().max()
    if at_edge < 0.05 or far > 0.2 * at_edge:
        return Check("wrong", f"on a step edge the response is {at_edge:.3g} at the edge and {far:.3g} far from it; "
                     "make the surround wider than the centre, but not wider than a few tokens")
    return Check("correct", f"flat regions give {flat.abs().max():.1e}, the edge gives {at_edge:.3f} "
                 f"(far from it {far:.1e}): a difference-of-Gaussians edge detector")
