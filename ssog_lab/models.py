"""One Vision Transformer family with three depth forms and five token mixers.

    build_model("nano", depth="ode", mixer="ssog", in_chans=1, num_classes=10)(images) -> logits

Residual branch (one form for all three depths, the *parallel* pre-norm form of docs/DESIGN.md):

    f(x) = mixer(LN(x)) + MLP(LN(x))

so the layer is a single function of x: the discrete and looped update is x ← x + f(x) and the ODE is
dx/dt = f(x). f ignores t (an autonomous ODE), so Euler with step 1 on [0, L] is exactly the looped model.

Depth forms:
    discrete  x_{l+1} = x_l + f_l(x_l), L blocks with their own weights;
    looped    x_{l+1} = x_l + f(x_l),   one block applied L times;
    ode       dx/dt = f(x) on [0, T] (T = L by default), one block, solved by torchdiffeq or by the
              library's own fixed-grid solvers (`ode_solver`); `model.nfe` counts f evaluations of the
              last forward pass.

Positional embedding: a learned table at the build grid (image_size / patch_size), resized bilinearly
to the grid of the actual input, so a model built at 224² evaluates at 1024² (any multiple of the patch).
"""

from __future__ import annotations

import dataclasses
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import ode
from .checks import check_fields
from .layers import INIT_AMPLITUDES, AxialSDPAMixer, SDPAMixer, SSoGMixer

DEPTHS = ("discrete", "looped", "ode")
MIXERS = ("sdpa", "sdpa-math", "axial", "ssog", "ssog-steered")
ODE_METHODS = ("euler", "midpoint", "rk4", "dopri5")
ODE_SOLVERS = ("torchdiffeq", "ssog_lab")
# ViTConfig's rules (ssog_lab.checks): the allowed strings, and each number's interval (sizes and counts ≥ 1;
# ode_T, ssog_heads, ssog_init_spread: None is allowed and means the default).
CONFIG_CHOICES = {"depth": DEPTHS, "mixer": MIXERS, "ode_method": ODE_METHODS, "ode_solver": ODE_SOLVERS,
                  "ssog_init_amplitudes": INIT_AMPLITUDES}
CONFIG_RANGES = {**{name: dict(low=1) for name in ("image_size", "patch_size", "in_chans", "num_classes", "dim",
                                                    "layers", "heads", "ssog_heads", "atoms")},
                 "ssog_init_spread": dict(low=0), "mlp_ratio": dict(low=0, low_open=True),
                 "ode_step_size": dict(low=0, low_open=True), "ode_T": dict(low=0, low_open=True),
                 "ode_rtol": dict(low=0, high=1, low_open=True), "ode_atol": dict(low=0)}


def rk4_residual(end_time: float) -> dict:
    """ViTConfig fields of the matched-cost wiring: one RK4 step over the whole [0, T], so a model of T = L costs
    4 evaluations of f, as L = 4 discrete blocks do. What such a model learns is a residual network with RK4's
    wiring, not a solution of its ODE: solved accurately, its answers change (docs/results/ode_solutions.md).

        build_model("nano", depth="ode", mixer="ssog", **rk4_residual(4.0))
    """
    return dict(ode_method="rk4", ode_step_size=float(end_time))


RK4_RESIDUAL_LABEL = "1 RK4 step"  # how results name an `rk4_residual` model's depth form beside "ode"


def is_rk4_residual(config: ViTConfig) -> bool:
    """Whether `config` is an ODE model solved by one fixed RK4 step over its whole interval (`rk4_residual`)."""
    return config.depth == "ode" and config.ode_method == "rk4" and config.ode_step_size >= config.end_time


def default_ssog_heads(dim: int, mixer: str) -> int:
    """ssog: dim // 8 (heads are nearly free for fixed atoms); ssog-steered: max(2, dim // 48) (each steered
    head costs per-token weight work; docs/DESIGN.md §3 and docs/results/operator_cpu.md). Other mixers: dim // 8,
    unused."""
    return max(2, dim // 48) if mixer == "ssog-steered" else max(1, dim // 8)


@dataclass
class ViTConfig:
    """Everything that defines a model. Sizes are in pixels (image_size, patch_size) or features (dim).

    heads      attention heads (sdpa, sdpa-math, axial).
    ssog_heads SSoG heads; None resolves per variant (see default_ssog_heads):
               ssog          dim // 8  (nano 8, tiny 24, small 48, base 96). A fixed SSoG head costs atoms × 5
                             parameters and nothing in mixing time (docs/DESIGN.md §3), so fixed SSoG gets many
                             more heads than attention.
               ssog-steered  max(2, dim // 48)  (nano 2, tiny 4, small 8, base 16). "Heads are nearly free" holds
                             for fixed atoms only: a steered head evaluates M·(H+W) weights per token, so the
                             weight work grows with the head count while the contraction does not
                             (docs/DESIGN.md §3; docs/results/operator_cpu.md times it).
    atoms      Gaussians per head, 4 for both variants.
    ssog_init_spread  how far the atoms start, in tokens: offsets uniform in ±spread, widths geometric from half a
               token to spread. None (the default) resolves to half the build grid's side (image_size /
               patch_size / 2), so the atoms start covering the whole grid: training moves an atom only a few
               tokens (docs/DESIGN.md §3).
    ssog_init_amplitudes  "centre-surround" (amplitudes +1, −1, +1, … from the narrowest atom: every head starts as a
               difference of Gaussians) or "blur" (1/M each: a low-pass filter). See SSoGMixer.
    The defaults of these fields and of TrainConfig were chosen on validation splits and are checked on test
    splits of several data sets in docs/results/defaults/accuracy.md.
    ode_*      continuous depth only: method, step_size (fixed-grid methods; in units of t), T (end time,
               None = layers), rtol/atol (dopri5), adjoint (torchdiffeq's odeint_adjoint), solver
               ("torchdiffeq", or "ssog_lab" for the library's own fixed-grid solvers in ssog_lab.ode).
               The default, RK4 at step 0.5, is the cheapest grid tried whose trained models are solutions of
               their ODE for every mixer (docs/results/ode_solutions.md); rk4_residual(T) is the matched-cost
               wiring, one step over [0, T].
    """

    image_size: int = 224
    patch_size: int = 16
    in_chans: int = 3
    num_classes: int = 100
    dim: int = 192
    layers: int = 12
    heads: int = 3
    ssog_heads: int | None = None
    atoms: int = 4
    ssog_init_spread: float | None = None
    ssog_init_amplitudes: str = "centre-surround"
    mlp_ratio: float = 4.0
    depth: str = "discrete"
    mixer: str = "sdpa"
    ode_method: str = "rk4"
    ode_step_size: float = 0.5
    ode_T: float | None = None
    ode_rtol: float = 1e-3
    ode_atol: float = 1e-4
    ode_adjoint: bool = False
    ode_solver: str = "torchdiffeq"

    def __post_init__(self):
        check_fields(self, CONFIG_RANGES, CONFIG_CHOICES)
        if self.ssog_heads is None:
            self.ssog_heads = default_ssog_heads(self.dim, self.mixer)
        if self.ssog_init_spread is None:
            self.ssog_init_spread = self.image_size / self.patch_size / 2
        if int(self.dim * self.mlp_ratio) < 1:
            raise ValueError(f"mlp_ratio={self.mlp_ratio} leaves the MLP no hidden feature at dim={self.dim}")
        if self.image_size % self.patch_size:
            raise ValueError(f"image_size={self.image_size} must be a multiple of patch_size={self.patch_size}")
        if self.dim % self.mixer_heads:
            raise ValueError(f"dim={self.dim} must be a multiple of the mixer's heads={self.mixer_heads}")
        if self.ode_solver == "ssog_lab" and (self.ode_method == "dopri5" or self.ode_adjoint):
            raise ValueError("ode_method='dopri5' and ode_adjoint=True need ode_solver='torchdiffeq' "
                             "(the library's own solvers are fixed-grid, without adjoint)")

    @property
    def mixer_heads(self) -> int:
        return self.ssog_heads if self.mixer.startswith("ssog") else self.heads

    @property
    def end_time(self) -> float:
        return float(self.layers if self.ode_T is None else self.ode_T)


def defining_fields(config: dict) -> dict:
    """The fields of a ViTConfig (as a dict, e.g. a stored run's) that define its model: a discrete or looped
    model has no ODE solver, so its ode_* fields are left out."""
    return {k: v for k, v in config.items() if config["depth"] == "ode" or not k.startswith("ode_")}


PRESETS: dict[str, dict] = {
    "nano": dict(image_size=32, patch_size=4, dim=64, layers=4, heads=2),
    "tiny": dict(image_size=224, patch_size=16, dim=192, layers=12, heads=3),
    "small": dict(image_size=224, patch_size=16, dim=384, layers=12, heads=6),
    "base": dict(image_size=224, patch_size=16, dim=768, layers=12, heads=12),
}


def make_mixer(config: ViTConfig) -> nn.Module:
    """The token mixer named by config.mixer, forward(x (B, N, C), grid) -> (B, N, C)."""
    if config.mixer in ("ssog", "ssog-steered"):
        return SSoGMixer(config.dim, config.ssog_heads, atoms=config.atoms, steered=config.mixer == "ssog-steered",
                         init_spread=config.ssog_init_spread, init_amplitudes=config.ssog_init_amplitudes)
    if config.mixer == "axial":
        return AxialSDPAMixer(config.dim, config.heads)
    return SDPAMixer(config.dim, config.heads, backend="math" if config.mixer == "sdpa-math" else "auto")


class Branch(nn.Module):
    """The residual branch f(x) = mixer(LN(x)) + MLP(LN(x)), x (B, N, C) -> (B, N, C)."""

    def __init__(self, config: ViTConfig):
        super().__init__()
        hidden = int(config.dim * config.mlp_ratio)
        self.norm = nn.LayerNorm(config.dim)
        self.mixer = make_mixer(config)
        self.mlp = nn.Sequential(nn.Linear(config.dim, hidden), nn.GELU(), nn.Linear(hidden, config.dim))

    def forward(self, x: Tensor, grid: tuple[int, int]) -> Tensor:
        h = self.norm(x)
        return self.mixer(h, grid) + self.mlp(h)


class Dynamics(nn.Module):
    """The ODE right-hand side dx/dt = f(x) (autonomous: t is ignored), counting its evaluations."""

    def __init__(self, branch: Branch, grid: tuple[int, int]):
        super().__init__()
        self.branch, self.grid, self.nfe = branch, grid, 0

    def forward(self, t: Tensor, x: Tensor) -> Tensor:
        self.nfe += 1
        return self.branch(x, self.grid)


class ViT(nn.Module):
    """images (B, in_chans, H, W) -> logits (B, num_classes); H and W any multiples of the patch size."""

    def __init__(self, config: ViTConfig):
        super().__init__()
        self.config = config
        p, g = config.patch_size, config.image_size // config.patch_size
        self.patch_embed = nn.Conv2d(config.in_chans, config.dim, kernel_size=p, stride=p)
        self.pos_embed = nn.Parameter(torch.randn(1, config.dim, g, g) * 0.02)  # (1, C, g, g) at the build grid
        count = config.layers if config.depth == "discrete" else 1
        self.blocks = nn.ModuleList(Branch(config) for _ in range(count))
        self.norm = nn.LayerNorm(config.dim)
        self.head = nn.Linear(config.dim, config.num_classes)
        self.nfe = 0

    def embed(self, images: Tensor) -> tuple[Tensor, tuple[int, int]]:
        """Patch tokens plus positional embedding: (B, N, C) and the token grid (H/p, W/p)."""
        c, p = self.config, self.config.patch_size
        if images.dim() != 4 or images.shape[1] != c.in_chans:
            raise ValueError(f"images must have shape (B, {c.in_chans}, H, W), got {tuple(images.shape)}")
        if images.shape[2] % p or images.shape[3] % p:
            raise ValueError(f"images height and width must be multiples of patch_size={p}, "
                             f"got {images.shape[2]}×{images.shape[3]}")
        x = self.patch_embed(images)  # (B, C, H/p, W/p)
        grid = (x.shape[2], x.shape[3])
        pos = self.pos_embed
        if grid != tuple(pos.shape[2:]):
            pos = F.interpolate(pos, size=grid, mode="bilinear", align_corners=False)  # (1, C, H/p, W/p)
        # contiguous: every LayerNorm downstream would otherwise copy the transposed view.
        return (x + pos).flatten(2).transpose(1, 2).contiguous(), grid  # (B, N, C)

    def states(self, images: Tensor, times: Tensor | None = None) -> Tensor:
        """Token states along depth: (S, B, N, C). Discrete/looped: S = L + 1 (input and after each layer);
        ode: the solution at `times` (default L + 1 equally spaced points on [0, T])."""
        c = self.config
        if times is not None and c.depth != "ode":
            raise ValueError(f"times applies to depth='ode' only, this model has depth={c.depth!r}")
        x, grid = self.embed(images)
        if c.depth != "ode":
            out = [x]
            for layer in range(c.layers):
                out.append(out[-1] + self.block(layer)(out[-1], grid))
            return torch.stack(out)
        if times is None:
            times = torch.linspace(0.0, c.end_time, c.layers + 1)
        return self._solve(x, grid, times.to(x))

    def solved_with(self, **fields) -> AbstractContextManager[ViT]:
        """A context in which the ODE is solved with these ViTConfig ode_* fields instead of the model's own (e.g.
        ode_method="dopri5", ode_rtol=1e-6), each checked by ViTConfig's rules here (ValueError); the model's config
        is restored after, also on an error. The weights are untouched: the same trained f, solved another way."""
        wrong = sorted(name for name in fields if not name.startswith("ode_"))
        if wrong:
            raise ValueError(f"solved_with takes only ode_* fields, got {wrong}")
        return self._configured(dataclasses.replace(self.config, **fields))

    @contextmanager
    def _configured(self, config: ViTConfig):
        trained, self.config = self.config, config
        try:
            yield self
        finally:
            self.config = trained

    def block(self, layer: int) -> Branch:
        """The residual branch used at layer `layer` (the shared one for looped and ode)."""
        return self.blocks[layer if self.config.depth == "discrete" else 0]

    def _solve(self, x: Tensor, grid: tuple[int, int], times: Tensor) -> Tensor:
        c = self.config
        dynamics = Dynamics(self.blocks[0], grid)
        states = ode.solve(dynamics, x, times, method=c.ode_method, step_size=c.ode_step_size, rtol=c.ode_rtol,
                           atol=c.ode_atol, adjoint=c.ode_adjoint, solver=c.ode_solver)
        self.nfe = dynamics.nfe
        return states  # (S, B, N, C)

    def forward(self, images: Tensor) -> Tensor:
        x, grid = self.embed(images)  # (B, N, C)
        if self.config.depth == "ode":
            x = self._solve(x, grid, torch.tensor([0.0, self.config.end_time]).to(x))[-1]
        else:
            for layer in range(self.config.layers):
                x = x + self.block(layer)(x, grid)
        return self.head(self.norm(x).mean(dim=1))  # (B, num_classes)


def preset_config(preset: str = "nano", depth: str = "discrete", mixer: str = "sdpa", **overrides) -> ViTConfig:
    """The ViTConfig of a preset ("nano", "tiny", "small", "base") with ViTConfig fields as overrides,
    every field checked (ValueError naming it); builds nothing, so a caller can check before any work."""
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {tuple(PRESETS)}, got {preset!r}")
    fields = {f.name for f in dataclasses.fields(ViTConfig)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValueError(f"unknown ViTConfig field(s) {unknown}; valid fields: {sorted(fields)}")
    return ViTConfig(**{**PRESETS[preset], "depth": depth, "mixer": mixer, **overrides})


def build_model(preset: str = "nano", depth: str = "discrete", mixer: str = "sdpa", **overrides) -> ViT:
    """A ViT from a preset ("nano", "tiny", "small", "base") with ViTConfig fields as overrides."""
    return ViT(preset_config(preset, depth, mixer, **overrides))


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def parameter_table(presets: tuple[str, ...] = ("tiny", "small", "base"), mixers: tuple[str, ...] = MIXERS,
                    depth: str = "discrete", **overrides) -> list[dict]:
    """Rows {preset, mixer, depth, params, saving_vs_sdpa (fraction)}; models are built on the meta device."""
    rows = []
    for preset in presets:
        with torch.device("meta"):
            base = count_parameters(build_model(preset, depth=depth, mixer="sdpa", **overrides))
            counts = {m: count_parameters(build_model(preset, depth=depth, mixer=m, **overrides)) for m in mixers}
        rows += [dict(preset=preset, mixer=m, depth=depth, params=n, saving_vs_sdpa=1 - n / base)
                 for m, n in counts.items()]
    return rows
