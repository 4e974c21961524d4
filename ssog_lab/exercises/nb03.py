"""Exercises of notebook 03 (registered with `@exercise`; see the package docstring)."""

import torch

from .. import lipschitz, ops
from ..layers import SSoGMixer
from ..lipschitz import picard_bound
from ..ops import reference
from ._registry import close, exercise, same_function, same_set

NORM_GRID = (12, 12)  # the notebook's full-mode grid; the exercise uses it in both modes


def example_head() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Head 0 of `SSoGMixer(dim=32, heads=4, atoms=4)` built right after torch.manual_seed(0), float64:
    mu, sigma (1, M, 2), amp (1, M). The learner's global random state is left untouched."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        mixer = SSoGMixer(dim=32, heads=4, atoms=4).double()
    mu, sigma, amp = (p.detach()[:1] for p in mixer.atom_parameters())
    return mu, sigma, amp


@exercise("03.scaled", wrong=-3.0, judge=close(1e-3),
          hint="a norm is never negative; how does ‖cA‖₂ depend on c? Compute ‖K‖₂ of the head first.",
          explain="‖cK‖₂ = |c|·‖K‖₂: the sign of the amplitudes does not matter, their size does.")
def scaled() -> float:
    mu, sigma, amp = example_head()
    return float(lipschitz.ssog_spectral_norm(mu, sigma, -3 * amp, NORM_GRID)[0])


def _inputs() -> tuple:
    """Two heads of three atoms with signed amplitudes on a 6×7 grid (float64): the bound is not tight."""
    generator = torch.Generator().manual_seed(3)
    mu, sigma, amp = ops.random_atoms(2, 3, (6, 7), generator=generator, dtype=torch.float64)
    return mu, sigma, amp, (6, 7)


def _frobenius_bound(mu, sigma, amp, grid):
    """A plausible slip: the Frobenius norm (every entry) in place of the spectral norm."""
    norms = []
    for axis, length in enumerate(grid):
        positions = torch.arange(length, dtype=mu.dtype)  # (length,): query positions
        g = ops.axis_weights(positions, mu[..., None, axis], sigma[..., None, axis], length)  # (heads, M, len, len)
        norms.append(torch.linalg.matrix_norm(g, ord="fro"))  # (heads, M)
    return (amp.abs() * norms[0] * norms[1]).sum(-1)


@exercise("03.bound", wrong=_frobenius_bound, judge=same_function(_inputs, forbid=(lipschitz.ssog_lipschitz_bound,)),
          hint="for every head and atom build G_row (H×H) and G_col (W×W) as in notebook 01, take their largest "
               "singular values (torch.linalg.matrix_norm(…, ord=2)), and sum |α|·‖G_row‖₂·‖G_col‖₂ over atoms.",
          explain="H×H and W×W matrices only: the bound costs nothing next to the N×N kernel.")
def bound():
    return lipschitz.ssog_lipschitz_bound


def _loose_exact(mu, sigma, amp, grid):
    """A plausible slip: the triangle inequality's bound taken for the norm itself."""
    return lipschitz.ssog_lipschitz_bound(mu, sigma, amp, grid)


@exercise("03.exact", wrong=_loose_exact, judge=same_function(
          _inputs, rtol=1e-6, forbid=(lipschitz.ssog_spectral_norm, lipschitz.ssog_dense_spectral_norm,
                                      ops.dense_kernel, reference.dense_kernel_reference)),
          hint="build each head's N×N kernel K = Σ_m α_m G_row,m ⊗ G_col,m (torch.kron) and take its largest "
               "singular value; with signed amplitudes it lies below the bound.",
          explain="on a small grid the dense kernel is the reference; `lipschitz.ssog_spectral_norm` finds the "
                  "same value matrix-free, from the products V ↦ KV and U ↦ KᵀU only.")
def exact():
    return lambda mu, sigma, amp, grid: lipschitz.ssog_spectral_norm(mu, sigma, amp, grid)


@exercise("03.iterates", wrong=10, judge=close(0.0),
          hint="evaluate the tail 1/(k+1)! + 1/(k+2)! + … for a few k (lipschitz.picard_bound(1, 1, 1, k) does it); "
               "mind that the sum starts after k.",
          explain="the tail after k = 9 is about 3·10⁻⁷, after k = 8 about 3·10⁻⁶: nine iterates suffice.")
def iterates() -> int:
    return next(k for k in range(50) if picard_bound(1.0, 1.0, 1.0, k) < 1e-6)


def _picard_inputs() -> tuple:
    """x′ = −x + sin(t) in two components from (1, −2) on a grid of 41 times in [0, 2]; the 4th iterate."""
    t = torch.linspace(0.0, 2.0, 41, dtype=torch.float64)
    return (lambda s, x: -x + torch.sin(s)), torch.tensor([1.0, -2.0], dtype=torch.float64), t, 4


def _riemann_iterate(func, x0, t, k):
    """A plausible slip: a left Riemann sum in place of the trapezoid rule (first-order quadrature)."""
    current = x0.expand(len(t), *x0.shape).clone()  # (T, n)
    for _ in range(k):
        slopes = torch.stack([func(s, x) for s, x in zip(t, current, strict=True)])  # (T, n)
        steps = (t[1:] - t[:-1])[:, None] * slopes[:-1]  # (T − 1, n)
        current = torch.cat([x0[None], x0 + steps.cumsum(0)])
    return current


@exercise("03.picard", wrong=_riemann_iterate,
          judge=same_function(_picard_inputs, rtol=1e-9, atol=1e-12, forbid=(lipschitz.picard,)),
          hint="Picard's map takes a whole trajectory to a new one: x0 plus the running integral of f along the old "
               "trajectory. Which iterate do you start from, and what is the running integral at t₀?",
          explain="the library's `lipschitz.picard` does exactly this and returns every iterate.")
def picard():
    return lambda func, x0, t, k: lipschitz.picard(func, x0, t, k)[k]


@exercise("03.which", wrong={"a", "c", "e"}, judge=same_set,
          hint="for each option ask whether the Jacobian's norm is bounded over all inputs, and remember what a "
               "LayerNorm with ε > 0 does to whatever comes after it.",
          explain="sin, fixed SSoG, tanh(Wx) and pre-LN attention are globally Lipschitz (the last with a constant "
                  "that depends on the weights and on ε); x² and bare attention are not.")
def which() -> set[str]:
    """|sin′| ≤ 1; K is linear; ‖∂ tanh(Wx)‖₂ ≤ ‖W‖₂; LN (ε > 0) is Lipschitz with a bounded image, on which
    attention is smooth (docs/DESIGN.md §2). x² and bare attention have unbounded derivatives."""
    return {"a", "c", "e", "f"}
