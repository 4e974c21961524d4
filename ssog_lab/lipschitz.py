"""Lipschitz tools: how much can a mixer stretch its input, and what that means for the ODE.

* `ssog_spectral_norm`        exact ‖·‖₂ of fixed SSoG, per head: the map V ↦ Y is linear, so power
                              iteration (Lanczos-accelerated) on the map itself and its transpose finds its
                              largest singular value without building the N×N kernel;
* `ssog_dense_spectral_norm`  the same from the N×N kernel (reference, small grids);
* `ssog_lipschitz_bound`      the closed-form bound Σ_m |α_m| ‖G_row,m‖₂ ‖G_col,m‖₂ (docs/DESIGN.md);
* `branch_lipschitz_bound`    a certified global constant of a whole fixed-SSoG residual branch
                              f(x) = mixer(LN(x)) + MLP(LN(x)), the ODE's right-hand side, factor by factor;
* `jacobian_spectral_norm`    ‖∂f/∂x‖₂ at a point for any function (a mixer, a whole residual branch),
                              by the same iteration with forward- and reverse-mode products (torch.func);
* `ray_sweep`                 that norm along a ray s·x (`jacobian_norm_along_ray`: at one s, to a figure's
                              precision): constant for fixed SSoG (a linear map has the same Jacobian
                              everywhere); for dense attention without LayerNorm it depends on the ray: it
                              saturates on a generic one (the softmax turns one-hot) and grows like s² where
                              the scores stay tied, the inputs behind its unbounded supremum;
* `ray_mixers`, `ray_point`   the bare mixers (SDPA, axial, fixed SSoG; no LayerNorm) and the rays x those
                              sweeps take: random tokens (generic) or the tied-score point, built so that the
                              zero tokens' scores stay tied for every s (notebook 03);
* `picard`                    successive approximations x_{k+1}(t) = x0 + ∫_0^t f(s, x_k(s)) ds on a grid,
                              every iterate returned (Picard–Lindelöf made visible), and `picard_bound`, the
                              a-priori error of the k-th iterate under a global Lipschitz constant.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from . import ops
from .layers import AxialSDPAMixer, SDPAMixer, SSoGMixer

__all__ = ["ssog_spectral_norm", "ssog_dense_spectral_norm", "ssog_lipschitz_bound", "branch_lipschitz_bound",
           "jacobian_spectral_norm", "ray_sweep", "jacobian_norm_along_ray", "ray_mixers", "ray_point", "picard",
           "picard_bound"]

# max_x GELU'(x) = Φ(x) + x·φ(x): GELU'' = φ(x)(2 − x²) vanishes at x = √2, where Φ(√2) = (1 + erf(1))/2 and
# √2·φ(√2) = e⁻¹/√π. About 1.129.
GELU_MAX_SLOPE = (1 + math.erf(1)) / 2 + math.exp(-1) / math.sqrt(math.pi)


def _largest_singular_value(apply: Callable[[Tensor], Tensor], apply_t: Callable[[Tensor], Tensor],
                             start: Tensor, dims: tuple[int, ...], steps: int, tol: float) -> Tensor:
    """Largest singular value of a linear map A, given the products A·v and Aᵀ·u.

    Power iteration on AᵀA, accelerated by keeping every iterate: Golub–Kahan–Lanczos bidiagonalization
    (full reorthogonalization) builds orthonormal bases U, V of the Krylov spaces of the power iterates
    with Uᵀ A V = B upper bidiagonal, and σ_max(B) rises to σ_max(A) (never above it) far faster than
    the plain power iterate does when the top singular values are close. Inner products run over `dims`
    separately for every index of the other dimensions, so a block-diagonal map (SSoG's heads) gets one
    value per block: the result has the shape of `start` reduced over `dims`. Stops when σ_max(B)
    changes by at most tol (relative) or after `steps` iterations (each one product A·v and one Aᵀ·u).
    """
    if steps < 1:
        raise ValueError(f"steps must be ≥ 1, got {steps}")
    tiny = torch.finfo(start.dtype).tiny
    dot = lambda a, b: (a * b).sum(dim=dims, keepdim=True)
    unit = lambda a: (a / dot(a, a).sqrt().clamp_min(tiny), dot(a, a).sqrt())
    steps = min(steps, math.prod(start.shape[d] for d in dims))
    v, _ = unit(start)
    us, vs, alphas, betas = [], [v], [], []
    estimate = None
    for k in range(steps):
        u = apply(vs[-1]) - (betas[-1] * us[-1] if us else 0)
        for w in us:  # full reorthogonalization keeps the bases orthonormal in floating point
            u = u - dot(u, w) * w
        u, alpha = unit(u)
        v = apply_t(u) - alpha * vs[-1]
        for w in vs:
            v = v - dot(v, w) * w
        v, beta = unit(v)
        us, vs, alphas, betas = us + [u], vs + [v], alphas + [alpha], betas + [beta]
        diagonal = torch.stack([a.flatten() for a in alphas], dim=-1)  # (blocks, k + 1)
        upper = torch.stack([b.flatten() for b in betas[:-1]], dim=-1) if k else diagonal[:, :0]
        bidiagonal = torch.diag_embed(diagonal) + torch.diag_embed(upper, offset=1)  # (blocks, k + 1, k + 1)
        new = torch.linalg.matrix_norm(bidiagonal, ord=2)  # (blocks,)
        if estimate is not None and bool(((new - estimate).abs() <= tol * new).all()):
            estimate = new
            break
        estimate = new
    return estimate.reshape([n for i, n in enumerate(start.shape) if i not in dims])


def _start(shape: Sequence[int], like: Tensor, seed: int) -> Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(tuple(shape), generator=generator, dtype=like.dtype).to(like.device)


def ssog_spectral_norm(mu: Tensor, sigma: Tensor, amp: Tensor, grid: tuple[int, int], steps: int = 100,
                       tol: float = 1e-10, seed: int = 0) -> Tensor:
    """‖V ↦ ssog(V)‖₂ per head for fixed parameters (mu, sigma (heads, M, 2); amp (heads, M)): (heads,).

    The operator acts as K_h ⊗ I_d on each head's values, so d = 1 suffices.
    """
    if mu.dim() != 3:
        raise ValueError(f"mu must be fixed parameters (heads, M, 2), got shape {tuple(mu.shape)}")
    heads, n = mu.shape[0], grid[0] * grid[1]
    with torch.no_grad():
        apply = lambda v: ops.ssog(v, mu, sigma, amp, grid)  # (1, heads, N, 1) -> (1, heads, N, 1)
        _, transpose = torch.func.vjp(apply, torch.zeros(1, heads, n, 1, dtype=mu.dtype, device=mu.device))
        start = _start((1, heads, n, 1), mu, seed)
        return _largest_singular_value(apply, lambda y: transpose(y)[0], start, (2, 3), steps, tol)[0]


def ssog_dense_spectral_norm(mu: Tensor, sigma: Tensor, amp: Tensor, grid: tuple[int, int]) -> Tensor:
    """Reference: matrix 2-norm of each head's N×N kernel (‖K ⊗ I_d‖₂ = ‖K‖₂): (heads,)."""
    return torch.linalg.matrix_norm(ops.dense_kernel(mu, sigma, amp, grid), ord=2)


def ssog_lipschitz_bound(mu: Tensor, sigma: Tensor, amp: Tensor, grid: tuple[int, int]) -> Tensor:
    """Σ_m |α_m| ‖G_row,m‖₂ ‖G_col,m‖₂ per head (triangle inequality and ‖A ⊗ B‖₂ = ‖A‖₂‖B‖₂): (heads,)."""
    if mu.dim() != 3:
        raise ValueError(f"mu must be fixed parameters (heads, M, 2), got shape {tuple(mu.shape)}")
    norms = []
    for axis, length in enumerate(grid):
        positions = torch.arange(length, dtype=mu.dtype, device=mu.device)[:, None]  # (L, 1): query i
        g = ops.axis_weights(positions, mu[..., None, None, axis], sigma[..., None, None, axis], length)
        norms.append(torch.linalg.matrix_norm(g[..., 0, :], ord=2))  # (heads, M) from (heads, M, L, L)
    return (amp.abs() * norms[0] * norms[1]).sum(dim=-1)


def branch_lipschitz_bound(branch: nn.Module, grid: tuple[int, int]) -> dict[str, float]:
    """A certified global Lipschitz constant of a fixed-SSoG residual branch (`models.Branch`),
    f(x) = mixer(LN(x)) + MLP(LN(x)) on x (N, C), in the Frobenius norm (all of x as one vector).

    f = (mixer + MLP) ∘ LN, so L_f ≤ L_LN · (L_mixer + L_MLP), each factor in closed form:
        LN     ‖diag(γ)·(I − 11ᵀ/C)‖₂ / √ε  (≤ max|γ|/√ε): LN's Jacobian at a token is
               diag(γ)·(I − 11ᵀ/C − var/(var + ε)·ûûᵀ) / √(var + ε), û its unit centred direction, whose
               norm is at most this value and reaches it at a constant token (var = 0). LN acts token by token,
               so the (N, C) map's Jacobian is block-diagonal and has the same norm;
        mixer  ‖W_O‖₂ · max_h ‖K_h‖₂ · ‖W_V‖₂   (proj ∘ (⊕_h K_h ⊗ I_d) ∘ value; ‖K_h‖₂ by the closed-form
               bound of `ssog_lipschitz_bound`);
        MLP    ‖W_2‖₂ · GELU_MAX_SLOPE · ‖W_1‖₂.
    It depends on the weights (γ, W_V, W_O, W_1, W_2) and the atoms, never on the input: no W_Q, W_K or input
    radius enters, which is what sets fixed SSoG apart. Steered SSoG and attention read LN(x), which is bounded,
    so they are globally Lipschitz too, but with no such closed form: they raise ValueError.
    Returns every factor and "total" (floats).
    """
    mixer = getattr(branch, "mixer", None)
    if not isinstance(mixer, SSoGMixer) or mixer.steered:
        raise ValueError(f"branch must be a residual branch with a fixed SSoG mixer, got mixer "
                         f"{type(mixer).__name__}{' (steered)' if getattr(mixer, 'steered', False) else ''}")
    fc1, fc2 = branch.mlp[0], branch.mlp[2]
    with torch.no_grad():
        norm2 = lambda w: torch.linalg.matrix_norm(w.double(), ord=2).item()  # noqa: E731
        mu, sigma, amp = (t.double() for t in mixer.atom_parameters())
        gamma = branch.norm.weight.double()
        centring = torch.eye(len(gamma), dtype=gamma.dtype, device=gamma.device) - 1 / len(gamma)  # I − 11ᵀ/C
        parts = dict(layernorm=norm2(gamma[:, None] * centring) / math.sqrt(branch.norm.eps),
                     value=norm2(mixer.value.weight), kernel=ssog_lipschitz_bound(mu, sigma, amp, grid).max().item(),
                     proj=norm2(mixer.proj.weight), mlp_in=norm2(fc1.weight), gelu=GELU_MAX_SLOPE,
                     mlp_out=norm2(fc2.weight))
    parts["mixer"] = parts["proj"] * parts["kernel"] * parts["value"]
    parts["mlp"] = parts["mlp_out"] * parts["gelu"] * parts["mlp_in"]
    parts["total"] = parts["layernorm"] * (parts["mixer"] + parts["mlp"])
    return parts


def jacobian_spectral_norm(func: Callable[[Tensor], Tensor], x: Tensor, steps: int = 100, tol: float = 1e-10,
                           seed: int = 0) -> Tensor:
    """‖∂func/∂x‖₂ at x (largest singular value of the Jacobian, all of x's entries as one vector): scalar.

    Jacobian-vector products use forward mode (torch.func.jvp), transposed products reverse mode.
    Attention runs with the "math" SDPA backend here, the one that supports forward mode (same function).
    """
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH):
        _, pullback = torch.func.vjp(func, x)
        apply = lambda u: torch.func.jvp(func, (x,), (u,))[1]
        dims = tuple(range(x.dim()))
        return _largest_singular_value(apply, lambda y: pullback(y)[0], _start(x.shape, x, seed), dims, steps, tol)


def ray_sweep(func: Callable[[Tensor], Tensor], x: Tensor, scales: Sequence[float] | Tensor, steps: int = 100,
              tol: float = 1e-10, seed: int = 0) -> Tensor:
    """Jacobian spectral norm of func at s·x for every s in scales: (len(scales),)."""
    return torch.stack([jacobian_spectral_norm(func, float(s) * x, steps, tol, seed) for s in scales])


def jacobian_norm_along_ray(func: Callable[[Tensor], Tensor], x: Tensor, s: float) -> float:
    """‖∂func/∂x‖₂ at s·x (Lanczos to 1e-4 relative, at most 20 iterations: plenty for a figure)."""
    return float(jacobian_spectral_norm(func, s * x, steps=20, tol=1e-4))


def _ray_modules(dim: int, heads: int, seed: int) -> dict[str, nn.Module]:
    """Freshly initialized bare mixers (float64, eval mode), the same for the same seed. They are built under a
    forked RNG seeded with `seed`, so the caller's global RNG state is left as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        modules: dict[str, nn.Module] = {"SDPA (dense attention)": SDPAMixer(dim, heads),
                                         "axial attention": AxialSDPAMixer(dim, heads),
                                         "fixed SSoG": SSoGMixer(dim, heads)}
    return {name: module.double().eval() for name, module in modules.items()}


def ray_mixers(grid: tuple[int, int] = (4, 4), dim: int = 16, heads: int = 2,
               seed: int = 0) -> dict[str, Callable[[Tensor], Tensor]]:
    """Freshly initialized bare mixers (float64, no LayerNorm in front) as functions x (B, N, C) -> (B, N, C) on
    the token grid `grid`; the global RNG state is left untouched."""
    return {name: (lambda x, m=module: m(x, grid)) for name, module in _ray_modules(dim, heads, seed).items()}


def ray_point(grid: tuple[int, int] = (4, 4), dim: int = 16, heads: int = 2, seed: int = 0, *,
              tied: bool = False) -> Tensor:
    """A direction x for the ray s·x, (1, N, C) float64, each non-zero token of unit RMS; the same arguments
    (grid, dim, heads, seed) as `ray_mixers`, and the global RNG state is left untouched.

    tied=False: random tokens (a generic ray; every softmax row saturates as s grows).
    tied=True: one random token (at index 1), all others zero, with the token chosen so that the zero tokens'
    scores stay tied for every s: a zero token's query is the bias b_Q, so its score against the one token is
    b_Q,h · (s W_K,h x + b_K,h), and x is projected onto the vectors with b_Q,h · W_K,h x = 0 for every head h
    of the attention mixers of `ray_mixers(grid, dim, heads, seed)`. Those rows keep a uniform softmax whose
    derivative does not decay, while the one token's key and value grow like s: their Jacobian grows like s².
    """
    generator = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(1, grid[0] * grid[1], dim, generator=generator, dtype=torch.float64)  # (1, N, C)
    if tied:
        rows = []  # one linear condition per attention mixer and head
        for module in _ray_modules(dim, heads, seed).values():
            if not isinstance(module, (SDPAMixer, AxialSDPAMixer)):
                continue
            w_k = module.qkv.weight.detach().chunk(3, dim=0)[1]  # (C, C): rows are key features
            b_q = module.qkv.bias.detach().chunk(3)[0]  # (C,)
            for h in range(heads):
                part = slice(h * (dim // heads), (h + 1) * (dim // heads))  # head h's features
                rows.append(w_k[part].T @ b_q[part])  # (C,): b_Q,h · W_K,h x = rows[i] · x
        basis, _ = torch.linalg.qr(torch.stack(rows).T)  # (C, conditions): orthonormal basis of the conditions
        token = x[0, 1] - basis @ (basis.T @ x[0, 1])  # (C,): the conditions hold
        x = torch.zeros_like(x)
        x[0, 1] = token
    return x / x.pow(2).mean(-1, keepdim=True).sqrt().clamp_min(torch.finfo(x.dtype).tiny)


def picard(func: Callable[[Tensor, Tensor], Tensor], x0: Tensor, t: Tensor, iterations: int = 8) -> Tensor:
    """Picard iterates of dx/dt = func(t, x), x(t[0]) = x0, on the grid t: (iterations + 1, len(t), *x0.shape).

    Iterate 0 is the constant x0; iterate k+1 is x0 + ∫_{t0}^{t} func(s, x_k(s)) ds by the cumulative
    trapezoid rule on t (so iterates converge to the ODE solution up to the O(Δt²) quadrature error).
    """
    t = torch.as_tensor(t, dtype=x0.dtype, device=x0.device)
    if t.dim() != 1 or len(t) < 2:
        raise ValueError(f"t must be a 1-D grid of at least 2 times, got shape {tuple(t.shape)}")
    if iterations < 0:
        raise ValueError(f"iterations must be ≥ 0, got {iterations}")
    current = x0.expand(len(t), *x0.shape).clone()  # (T, *x0.shape)
    iterates = [current]
    for _ in range(iterations):
        slopes = torch.stack([func(ti, xi) for ti, xi in zip(t, current, strict=True)])  # (T, *x0.shape)
        integral = torch.cumulative_trapezoid(slopes, x=t, dim=0)  # (T − 1, *x0.shape)
        current = torch.cat([x0[None], x0 + integral])  # (T, *x0.shape)
        iterates.append(current)
    return torch.stack(iterates)


def picard_bound(lipschitz_constant: float, slope_at_start: float, end_time: float, k: int) -> float:
    """A-priori error of the k-th Picard iterate on [0, T]: (F₀/Λ) Σ_{j>k} (ΛT)^j / j!, with Λ the global
    Lipschitz constant and F₀ = max_t ‖f(t, x0)‖ (`slope_at_start`); at Λ = 0 its limit, F₀T for k = 0 and 0
    after (f does not depend on x, so the first iterate is exact)."""
    for name, value in (("lipschitz_constant", lipschitz_constant), ("slope_at_start", slope_at_start),
                        ("end_time", end_time), ("k", k)):
        if not value >= 0:
            raise ValueError(f"{name} must be ≥ 0, got {value!r}")
    if lipschitz_constant == 0:
        return slope_at_start * end_time if k == 0 else 0.0
    lt = lipschitz_constant * end_time
    # The tail summed term by term: exp(ΛT) minus the first k + 1 terms would cancel to noise when ΛT is small.
    term = math.prod(lt / j for j in range(1, k + 2))  # (ΛT)^(k+1) / (k+1)!
    tail, j = 0.0, k + 1
    while term > 0 and (j <= lt or term > 1e-17 * tail):
        tail += term
        j += 1
        term *= lt / j
    return slope_at_start / lipschitz_constant * tail
