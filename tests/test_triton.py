"""Triton SSoG kernels against the torch reference: forward and all four gradients; GPU compilation and its cost.

On a machine without CUDA the kernels run in Triton's CPU interpreter (conftest sets TRITON_INTERPRET=1 before triton
is imported); shapes are tiny and float32 because the interpreter executes every program instance in Python. The
sm_90 tests compile for a Hopper GPU without one, in a process without the interpreter.
"""

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ssog_lab import ops
from ssog_lab.bench import gpu as gpu_check
from ssog_lab.bench.subnormals import count_subnormal
from ssog_lab.ops import roofline as rf
from ssog_lab.ops import triton_available, triton_host
from ssog_lab.ops import triton_kernel as tk
from ssog_lab.ops.reference import ssog_reference

pytestmark = pytest.mark.triton

ROOT = Path(__file__).resolve().parents[1]
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
needs_triton = pytest.mark.skipif(not triton_available(DEVICE),
                                  reason="triton cannot run here (no CUDA and no TRITON_INTERPRET=1)")


def make_inputs(batch, heads, grid, d, atoms, steered, *, mu_scale=1.5, mu_shift=0.0, sigma_scale=1.0,
                tiny_sigma=False, token_major=False, dtype=torch.float32, seed=0):
    """Random (v, mu, sigma, amp) on DEVICE. tiny_sigma gives every other atom σ ≈ 1e-3; sigma_scale multiplies
    all widths (1e3: nearly flat weights); token_major makes v the (B, N, heads, d) layout seen as (B, heads, N, d),
    as a mixer passes it (not contiguous)."""
    gen = torch.Generator().manual_seed(seed)
    n = grid[0] * grid[1]
    shape = (batch, heads, n, atoms) if steered else (heads, atoms)
    v = torch.randn(batch, n, heads, d, generator=gen).transpose(1, 2) if token_major else \
        torch.randn(batch, heads, n, d, generator=gen)
    mu = torch.randn(*shape, 2, generator=gen) * mu_scale + mu_shift
    sigma = (torch.rand(*shape, 2, generator=gen) * 1.5 + 0.4) * sigma_scale
    if tiny_sigma:
        sigma[..., ::2, :] = 1e-3 * (1 + torch.rand(sigma[..., ::2, :].shape, generator=gen))
    amp = torch.randn(*shape, generator=gen)
    return [t.to(DEVICE, dtype) for t in (v, mu, sigma, amp)]


def run_both(inputs, grid, seed=1):
    """Output and (dv, dmu, dsigma, damp) of the Triton path and of the float64 torch reference."""
    results, dy = [], None
    for path in ("triton", "reference"):
        leaves = [(t.detach() if path == "triton" else t.detach().double()).requires_grad_() for t in inputs]
        y = ops.ssog(*leaves, grid, backend="triton") if path == "triton" else \
            ssog_reference(*leaves, grid, dense=False)
        if dy is None:
            dy = torch.randn(y.shape, generator=torch.Generator().manual_seed(seed)).to(y.device)
        (y * dy.to(y.dtype)).sum().backward()
        results.append((y.detach(), [t.grad for t in leaves]))
    return results


def assert_close_scaled(actual, expected, rel, name):
    """Elementwise |a − e| ≤ rel·(|e| + max|e|): relative to each value, with the tensor's scale as the floor."""
    expected = expected.to(actual.dtype)
    scale = expected.abs().max().item()
    torch.testing.assert_close(actual, expected, rtol=rel, atol=rel * max(scale, 1e-30), msg=lambda m: f"{name}: {m}")


def check(inputs, grid, rel=1e-4):
    (y, grads), (y_ref, grads_ref) = run_both(inputs, grid)
    assert_close_scaled(y.float(), y_ref, rel, "forward")
    for name, g, g_ref in zip(("dv", "dmu", "dsigma", "damp"), grads, grads_ref, strict=True):
        assert g is not None and g.shape == g_ref.shape, name
        assert_close_scaled(g.float(), g_ref, rel, name)


CASES = {
    # name: (batch, heads, grid, d, atoms, steered, extra)
    "fixed-1x1": (2, 1, (1, 1), 3, 2, False, {}),
    "steered-1x1": (1, 2, (1, 1), 4, 1, True, {}),
    "steered-one-row-1xW": (2, 1, (1, 9), 5, 2, True, {}),
    "fixed-one-column-Hx1": (1, 2, (6, 1), 8, 1, False, {}),
    "fixed-nonsquare-offgrid": (2, 2, (5, 7), 8, 3, False, {"mu_scale": 4.0}),
    "steered-two-query-blocks-M5": (1, 1, (3, 20), 20, 5, True, {}),
    "fixed-two-query-blocks-token-major": (1, 2, (20, 3), 8, 2, False, {"mu_scale": 6.0, "token_major": True}),
    "steered-token-major": (2, 2, (4, 6), 8, 2, True, {"token_major": True}),
    "steered-centres-1e3-off-the-grid": (1, 2, (4, 6), 8, 2, True, {"mu_shift": 1e3}),
    "fixed-centres-minus-1e3": (1, 2, (5, 4), 8, 2, False, {"mu_shift": -1e3}),
    "fixed-tiny-sigma": (1, 2, (4, 5), 8, 4, False, {"tiny_sigma": True, "mu_shift": 0.3}),
    "steered-tiny-sigma": (1, 1, (5, 4), 8, 4, True, {"tiny_sigma": True, "mu_shift": 0.3}),
    "steered-huge-sigma": (1, 1, (5, 6), 8, 2, True, {"sigma_scale": 1e3}),
    "steered-wide-d-padded-lines": (1, 1, (3, 5), 40, 2, True, {}),  # BLOCK_D 64, BLOCK_L 32 > L
}


@needs_triton
@pytest.mark.parametrize("case", list(CASES))
def test_forward_and_gradients_match_reference(case):
    batch, heads, grid, d, atoms, steered, extra = CASES[case]
    check(make_inputs(batch, heads, grid, d, atoms, steered, **extra), grid)


@needs_triton
def test_value_gradient_alone():
    """With only v requiring grad, dv must still be right."""
    v, mu, sigma, amp = make_inputs(1, 2, (4, 5), 8, 2, False)
    v = v.requires_grad_()
    ops.ssog(v, mu, sigma, amp, (4, 5), backend="triton").square().sum().backward()
    v_ref = v.detach().double().requires_grad_()
    ssog_reference(v_ref, mu.double(), sigma.double(), amp.double(), (4, 5), dense=False).square().sum().backward()
    assert_close_scaled(v.grad, v_ref.grad, 1e-4, "dv")


@needs_triton
def test_stage_lse_is_the_log_normalizer():
    """lse_i = logsumexp_j ℓ_ij − max_j ℓ_ij of stage 1 (column mixing, parameters [..., 1]), brute force."""
    grid, atoms = (3, 5), 2
    _, mu, sigma, _ = make_inputs(1, 2, grid, 1, atoms, False)
    lse = tk.stage_lse(tk.Stage(1, grid), mu, sigma)  # (1, heads, H, W, M)
    cols = torch.arange(grid[1], dtype=torch.float64)
    mu_col, sigma_col = mu[None, :, :, 1, None].double(), sigma[None, :, :, 1, None].double()  # (1, heads, M, 1)
    logits = -(cols - cols[:, None, None, None] - mu_col) ** 2 / (2 * sigma_col**2)  # (W query, heads, M, W source)
    expected = (torch.logsumexp(logits, -1) - logits.amax(-1)).permute(1, 0, 2)  # (heads, W, M)
    torch.testing.assert_close(lse[0, :, 1].double(), expected, rtol=1e-5, atol=1e-6)



@needs_triton
def test_notebook_checks_agree_with_the_reference():
    """ops.triton_check (notebook 08): stage 1's normalizers and the operator's forward and gradients."""
    from ssog_lab.ops import triton_check

    assert all(error < 1e-5 for error in triton_check.lse_step(grid=(2, 4), atoms=2).values())
    for steered in (False, True):
        result = triton_check.interpreter_check(grid=(2, 3), heads=1, atoms=2, d=2, steered=steered)
        assert result.pop("seconds (triton forward + backward)") > 0
        assert all(error < 1e-4 for error in result.values()), result

# --- the edges of the domain: the reference's rules (tiny σ floored, far centres, ties), forward and backward ------

JUST_BELOW_HALF = float(torch.nextafter(torch.tensor(0.5), torch.tensor(0.0)))  # 0.5 − 2^-25: floor(c + 0.5) = 1
EDGE_SIGMAS = (1e-25, 1e-38, 1e-12, 1e4)
EDGE_MUS = (3e7, -3e7, 1e30, -1e30, 0.5, JUST_BELOW_HALF, -1.5, 0.25)


def edge_params(shape, axis_shift):
    """(μ, σ) of `shape` + (2,) holding every (σ, μ) pair of EDGE_SIGMAS × EDGE_MUS on each axis, in float32;
    the column axis runs through the pairs in another order, so that each token pairs different edges."""
    pairs = torch.tensor([(s, m) for s in EDGE_SIGMAS for m in EDGE_MUS])  # (32, 2)
    count = torch.Size(shape).numel()
    index = torch.arange(count)
    rows, cols = pairs[index % len(pairs)], pairs[(index * axis_shift + 5) % len(pairs)]  # (count, 2) each
    sigma = torch.stack([rows[:, 0], cols[:, 0]], -1).reshape(*shape, 2)
    mu = torch.stack([rows[:, 1], cols[:, 1]], -1).reshape(*shape, 2)
    return mu, sigma


def edge_results(v, mu, sigma, amp, grid):
    """Output and (dv, dμ, dσ, dα) of the Triton path and of the float32 reference, whose rules it follows (the
    float64 one would not floor σ at 1e-12, so its gradients at a tie with tiny σ are other, larger numbers)."""
    dy = torch.randn(v.shape, generator=torch.Generator().manual_seed(3))
    results = []
    for backend in ("triton", "torch"):
        leaves = [t.detach().clone().requires_grad_() for t in (v, mu, sigma, amp)]
        y = ops.ssog(*leaves, grid, backend="triton") if backend == "triton" else ssog_reference(*leaves, grid)
        (y * dy).sum().backward()
        results.append([y.detach()] + [t.grad for t in leaves])
    return results


def assert_edges_match(actual, expected, names, rel=1e-4):
    """Elementwise |a − e| ≤ rel·(|e| + 1): the edge gradients span 1e-30 … 1e36 (1/σ², 1/σ³ of the floor), so
    each is compared with its own size. Both backends must be finite everywhere."""
    for name, a, e in zip(names, actual, expected, strict=True):
        for backend, t in (("triton", a), ("torch", e)):
            assert torch.isfinite(t).all(), f"{backend} {name}: {(~torch.isfinite(t)).sum().item()} entries not finite"
        torch.testing.assert_close(a, e, rtol=rel, atol=rel, msg=lambda m, n=name: f"{n}: {m}")


NAMES = ("forward", "dv", "dmu", "dsigma", "damp")
# The exponent (u·s)·(t* + u/2) of a far centre overflows to −inf by design (a weight of exactly 0); the interpreter's
# numpy reports it.
edge_warnings = pytest.mark.filterwarnings("ignore:overflow encountered in multiply:RuntimeWarning")


@needs_triton
@edge_warnings
def test_steered_edges_of_the_domain_match_the_reference():
    """Per-token gradients: every (σ, μ) of EDGE_SIGMAS × EDGE_MUS on both axes, in both stages (3 × 6 grid, the
    rows are 6 long, the columns 3; M = 2: 36 (token, atom) pairs per axis). μ = 0.5 − 2^-25 at i = 0 is the
    centre just below a half-integer (j* = 0); at i ≥ 1 it rounds to a tie, as do 0.5 and −1.5."""
    grid, atoms = (3, 6), 2
    gen = torch.Generator().manual_seed(2)
    mu, sigma = edge_params((1, 2, grid[0] * grid[1], atoms), axis_shift=7)  # (B, heads, N, M, 2)
    v = torch.randn(1, 2, grid[0] * grid[1], 4, generator=gen)
    amp = torch.randn(1, 2, grid[0] * grid[1], atoms, generator=gen)
    (y, *grads), (y_ref, *grads_ref) = edge_results(v, mu, sigma, amp, grid)
    assert_edges_match([y, *grads], [y_ref, *grads_ref], NAMES)
    tiny = (sigma < 1e-12)[..., None]  # below the floor the weights do not depend on σ
    assert (grads[2][tiny[..., 0]] == 0).all()


@needs_triton
@edge_warnings
@pytest.mark.parametrize("sigma_row", [1e-25, 1e4])
def test_fixed_edges_of_the_domain_match_the_reference(sigma_row):
    """Fixed parameters (gradients summed over tokens): 2 heads × 4 atoms of edge (σ, μ) pairs on the column axis
    against a row axis of tiny or wide Gaussians centred on ties (μ_row = 0.5: 50/50 for every query)."""
    grid, atoms = (2, 5), 4
    gen = torch.Generator().manual_seed(4)
    mu, sigma = edge_params((2, atoms), axis_shift=3)  # (heads, M, 2)
    mu[..., 0], sigma[..., 0] = 0.5, sigma_row
    v = torch.randn(1, 2, grid[0] * grid[1], 4, generator=gen)
    amp = torch.randn(2, atoms, generator=gen)
    (y, *grads), (y_ref, *grads_ref) = edge_results(v, mu, sigma, amp, grid)
    assert_edges_match([y, *grads], [y_ref, *grads_ref], NAMES)


@needs_triton
@edge_warnings
@pytest.mark.parametrize("steered", [False, True])
def test_no_subnormal_output_or_gradient(steered):
    """σ = 0.3 on a 40-long axis and one atom 1000 tokens off the grid: tails that the old evaluation left
    subnormal (slow matrix products on some CPUs) are exact zeros in the kernels too, forward and backward."""
    gen = torch.Generator().manual_seed(6)
    grid, atoms = (40, 3), 3
    shape = (1, 1, grid[0] * grid[1], atoms) if steered else (1, atoms)
    v = torch.randn(1, 1, grid[0] * grid[1], 4, generator=gen)
    mu = torch.randn(*shape, 2, generator=gen) * 5
    mu[..., 0, :] += 1000.0
    sigma, amp = torch.full((*shape, 2), 0.3), torch.randn(*shape, generator=gen)
    (y, grads), _ = run_both([t.to(DEVICE) for t in (v, mu, sigma, amp)], grid)
    for name, t in zip(("forward", "dv", "dmu", "dsigma", "damp"), (y, *grads), strict=True):
        assert count_subnormal(t) == 0, f"{name}: {count_subnormal(t)} subnormal entries"


def test_reading_order_lists_every_helper_the_kernels_call():
    """READING_ORDER (notebook 08) holds every @triton.jit function of the module, and viz.KERNEL_PARTS is it."""
    from ssog_lab import viz

    jitted = {name for name, obj in vars(tk).items() if getattr(getattr(obj, "fn", None), "__name__", None) == name
              and inspect.getsource(obj.fn).lstrip().startswith("@triton.jit")}
    assert jitted and jitted <= set(tk.READING_ORDER)
    assert viz.KERNEL_PARTS == tk.READING_ORDER


def test_line_longer_than_max_line_is_refused():
    v, mu, sigma, amp = [torch.zeros(1, 1, tk.MAX_LINE + 1, 1)] + [torch.ones(1, 1, 2), torch.ones(1, 1, 2),
                                                                  torch.ones(1, 1)]
    with pytest.raises(ValueError, match="MAX_LINE"):
        tk.ssog_triton(v, mu, sigma, amp, (1, tk.MAX_LINE + 1))


def test_auto_on_cpu_uses_torch(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("backend='auto' on a CPU tensor must not call the Triton kernel")

    monkeypatch.setattr(tk, "ssog_triton", refuse)
    v, mu, sigma, amp = [t.cpu() for t in make_inputs(1, 2, (3, 4), 8, 2, True)]
    y = ops.ssog(v, mu, sigma, amp, (3, 4), backend="auto")
    torch.testing.assert_close(y, ssog_reference(v, mu, sigma, amp, (3, 4)))


def test_triton_on_cpu_refused_without_interpreter(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert not triton_available("cpu")
    v, mu, sigma, amp = [t.cpu() for t in make_inputs(1, 1, (2, 3), 4, 1, False)]
    with pytest.raises(ValueError, match="backend='triton' cannot run on a cpu tensor"):
        ops.ssog(v, mu, sigma, amp, (2, 3), backend="triton")


@needs_triton
@pytest.mark.skipif(not tk.INTERPRET, reason="bfloat16 is refused only in the interpreter")
def test_bfloat16_refused_in_interpreter():
    v, mu, sigma, amp = make_inputs(1, 1, (2, 3), 4, 1, False, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="v must be float32 for the Triton backend in the interpreter"):
        ops.ssog(v, mu, sigma, amp, (2, 3), backend="triton")


# --- roofline ---------------------------------------------------------------------------------------------------

def test_roofline_counts_compulsory_traffic_and_issue():
    """Forward of a fixed layer: bytes of V, Z twice, Y, two normalizers; weights over padded 16-wide lines."""
    batch, heads, (h, w), d, m, s = 2, 3, (4, 5), 8, 2, 2
    est = rf.roofline(batch, heads, (h, w), d, m, steered=False, dtype_bytes=s)
    n, bh = h * w, batch * heads
    assert est.bytes == pytest.approx(bh * (n * d * s * (2 + 2 * m) + 2 * n * m * 4) + 5 * heads * m * 4)
    weights = bh * m * 2 * n * 16  # both stages, every line padded to BLOCK_L = 16
    assert est.exps == weights and est.flops == pytest.approx(2 * weights * 16)
    assert est.instructions == rf.INSTR_PER_WEIGHT_FWD * weights
    assert est.t_issue == pytest.approx(est.instructions / rf.H200.issue)
    backward = rf.roofline(batch, heads, (h, w), d, m, steered=False, dtype_bytes=s, backward=True)
    assert backward.flops == pytest.approx(2 * est.flops) and backward.bound == "issue"


@pytest.mark.parametrize("backward", [False, True])
def test_roofline_of_the_two_stage_kernels_adds_up(backward):
    kw = dict(steered=True, dtype_bytes=4, backward=backward)
    whole = rf.roofline(2, 3, (5, 40), 64, 4, **kw)
    col, row = (rf.roofline(2, 3, (5, 40), 64, 4, stage=k, **kw) for k in (1, 2))
    for field in ("bytes", "flops", "exps", "instructions"):
        assert getattr(col, field) + getattr(row, field) == pytest.approx(getattr(whole, field))
    assert col.exps > row.exps  # stage 1 runs along the 40-long rows, stage 2 along the 5-long columns
    with pytest.raises(ValueError, match="stage"):
        rf.roofline(2, 3, (5, 40), 64, 4, stage=3, **kw)


def test_flash_estimate_counts_four_n_squared_d():
    assert rf.flash_estimate(1, 1, 10, 4) == pytest.approx(4 * 100 * 4 / rf.FLASH_FWD_FLOPS)



def test_roofline_rows_are_the_fixed_forward_per_grid_and_dtype():
    rows = rf.roofline_rows(sides=(16, 32), batch=2, heads=3, head_dim=8, atoms=4)
    assert [(r["side"], r["dtype"]) for r in rows] == [(16, "float32"), (16, "bfloat16"), (32, "float32"),
                                                       (32, "bfloat16")]
    est = rf.roofline(2, 3, (32, 32), 8, 4, steered=False, dtype_bytes=2)
    assert rows[3]["time_s"] == est.time_s and rows[3]["bound"] == est.bound and rows[3]["bytes"] == est.bytes
    assert rows[0]["peaks"] == rf.H200.name

@pytest.mark.gpu
@pytest.mark.parametrize("steered", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_realistic_shape_on_gpu(dtype, steered):
    """B=8, 24 heads × d=8, 32×32 tokens, M=4: float32 to 1e-4; bfloat16 to bfloat16 accuracy (2e-2)."""
    inputs = make_inputs(8, 24, (32, 32), 8, 4, steered, dtype=dtype, token_major=True)
    check(inputs, (32, 32), rel=1e-4 if dtype == torch.float32 else 2e-2)


# --- the GPU check: compile count, sm_90 compilation without spills, refusal without CUDA -------------------------

def _specialization(kernel, args: tuple, consts: dict) -> tuple:
    """What Triton compiles one launch for: tensor dtypes and 16-byte alignment, the ==1 / %16 classes of the
    integers it specializes on (all but do_not_specialize), the int width, and the constexprs."""
    fn = getattr(kernel, "fn", kernel)
    names = list(inspect.signature(fn).parameters)
    no_spec = set(tk._NO_SPECIALIZE_FWD if fn.__name__ == "_stage_forward_kernel" else tk._NO_SPECIALIZE_BWD)
    key = [fn.__name__]
    for name, arg in zip(names[:len(args)], args, strict=True):
        if isinstance(arg, torch.Tensor):
            key.append((str(arg.dtype), arg.storage_offset() * arg.element_size() % 16 == 0))
        else:
            bits = 64 if abs(arg) >= 2**31 else 32
            key.append((bits,) if name in no_spec else (bits, 1 if arg == 1 else 16 if arg % 16 == 0 else 0))
    return (*key, tuple(sorted((k, v) for k, v in consts.items() if k != "BLOCK_I")))


def compilations_of(cases) -> dict:
    """{specialization: number of autotune configs} over the forward and backward launches of the given operator
    cases, run on the meta device with the launcher recording instead of launching."""
    seen = {}

    def record(kernel, grid, args, consts):
        names = list(inspect.signature(getattr(kernel, "fn", kernel)).parameters)
        named = dict(zip(names[:len(args)], args, strict=True))
        seen[_specialization(kernel, args, consts)] = len(triton_host.gpu_configs(named["L"], named["D"],
                                                                                  named["x_ptr"].element_size()))

    original, tk._launch = tk._launch, record
    try:
        for case in cases:
            batch, heads, d, grid = case["batch"], case["heads"], case["d"], case["grid"]
            n = grid[0] * grid[1]
            dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[case["dtype"]]
            shape = (batch, heads, n, 4) if case["steered"] else (heads, 4)
            v = torch.empty(batch, n, heads, d, device="meta", dtype=dtype).transpose(1, 2).requires_grad_()
            params = [torch.empty(*shape, 2, device="meta").requires_grad_() for _ in range(2)]
            amp = torch.empty(*shape, device="meta").requires_grad_()
            y = tk.SSoGFunction.apply(v, *params, amp, grid)
            dy = torch.empty(batch, n, heads, d, device="meta", dtype=dtype).transpose(1, 2) \
                if case.get("token_major_dy") else torch.empty(y.shape, device="meta", dtype=dtype)
            y.backward(dy)
    finally:
        tk._launch = original
    return seen


def test_gpu_check_compilations_stay_under_the_bound():
    """Σ over distinct specializations of the pruned autotune configs ≤ COMPILE_BOUND, for the operator cases and
    the model runs (token-major dY, as the mixer's output projection returns it) of one GPU-check run; each model
    case has its mixer's shipped shape (ViT-Tiny: fixed SSoG 24 heads × 8, steered SSoG 4 heads × 48)."""
    from ssog_lab.models import PRESETS, ViTConfig

    configs = {s: ViTConfig(**PRESETS["tiny"], mixer="ssog-steered" if s else "ssog") for s in (False, True)}
    assert [(c.ssog_heads, c.dim // c.ssog_heads) for c in configs.values()] == [(24, 8), (4, 48)]
    model_cases = [dict(batch=b, heads=c.ssog_heads, d=c.dim // c.ssog_heads,
                        grid=(r // c.patch_size, r // c.patch_size), steered=s, dtype="bfloat16",
                        token_major_dy=True) for r, b in gpu_check.MODEL_RUNS for s, c in configs.items()]
    seen = compilations_of(gpu_check.operator_cases() + model_cases)
    total = sum(seen.values())
    assert 0 < total <= gpu_check.COMPILE_BOUND, (total, len(seen))
    readme = (ROOT / "docs" / "results" / "gpu" / "README.md").read_text()  # says the bound and this count
    assert f"`COMPILE_BOUND` = {gpu_check.COMPILE_BOUND}" in readme and f"give {total} for this run" in readme
    # and strides do not multiply compilations: two batch sizes of one shape specialize alike
    case = dict(heads=3, d=64, grid=(14, 14), steered=True, dtype="float32")
    assert compilations_of([{**case, "batch": 2}]).keys() == compilations_of([{**case, "batch": 64}]).keys()


@needs_triton
def test_gpu_check_sections_run_in_the_interpreter(monkeypatch, tmp_path):
    """The GPU check's own code on tiny cases without a GPU (Triton in the interpreter, a stand-in timer): every row
    is on disk as it is measured, and a failing part (SDPA's GPU-only kernels) becomes the row's error after the
    columns measured before it."""
    import csv

    from ssog_lab.bench import gpu

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: scripts/gpu_check.sh runs the real thing")
    monkeypatch.setattr(gpu, "DEVICE", "cpu")
    monkeypatch.setattr(gpu, "cuda_time_ms", lambda fn, **kw: (fn(), 1.0)[1])  # one call, "1 ms"
    run = gpu.CheckRun(tmp_path, budget_s=600)
    run.cases = [dict(section=section, batch=1, heads=2, d=3, grid=(3, 4), steered=steered, dtype="float32")
                 for section in ("check", "time") for steered in (False, True)]
    run.operator_section("check", [(3, 4)])
    run.operator_section("time", [(3, 4)])
    checks, timings = ([*csv.DictReader((tmp_path / f"{name}.csv").read_text().splitlines())]
                       for name in ("checks", "operator"))
    assert [r["ok"] for r in checks] == ["True", "True"] and run.all_ok
    assert [r["kind"] for r in timings] == ["fixed", "steered"]
    for row in timings:
        assert row["fwd_col_ms"] == row["bwd_col_ms"] == row["triton_fwdbwd_ms"] == row["torch_fwdbwd_ms"] == "1"
        assert float(row["pred_fwd_ms"]) > 0 and row["sdpa_fwd_ms"] == "" and "scaled_dot_product" in row["error"]
    report = (tmp_path / "report.md").read_text()
    assert "## checks" in report and "## operator" in report and report.count("| 3x4 |") == 4


# Compiles every kernel variant the GPU check reaches, with every autotune config it may pick, for sm_90 without a
# GPU (in a process without the interpreter, which accepts constructs the GPU compiler rejects), and prints the
# ptxas resource report of each.
COMPILE_FOR_SM90 = r"""
import sys
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, compile
from ssog_lab.ops import triton_host
from ssog_lab.ops import triton_kernel as tk

STAGES = {"_stage_forward_kernel": ({"X_PER_ATOM": False, "SUM_ATOMS": False, "HAS_AMP": False},
                                    {"X_PER_ATOM": True, "SUM_ATOMS": True, "HAS_AMP": True}),
          "_stage_backward_kernel": ({"X_PER_ATOM": True, "DX_SUM_ATOMS": False, "HAS_AMP": True},
                                     {"X_PER_ATOM": False, "DX_SUM_ATOMS": True, "HAS_AMP": False})}
VALUES = ("x_ptr", "out_ptr", "dout_ptr", "dx_ptr")
count = 0
for fn in (tk._stage_forward_kernel, tk._stage_backward_kernel):
    names = fn.arg_names
    for dtype, itemsize, precision in (("fp32", 4, "tf32x3"), ("bf16", 2, "tf32")):
        for length, d in [tuple(map(int, s.split("x"))) for s in sys.argv[1:]]:
            block_l, block_d = triton_host.line_blocks(length, d, itemsize)
            for stage in STAGES[fn.__name__]:
                for block_i, warps in triton_host.gpu_configs(length, d, itemsize):
                    consts = {**stage, "PRECISION": precision, "BLOCK_I": block_i, "BLOCK_L": block_l,
                              "BLOCK_D": block_d}
                    types = {n: "constexpr" if n in consts else ("*" + (dtype if n in VALUES else "fp32")
                             if n.endswith("_ptr") else "i32") for n in names}
                    aligned = {(names.index(n),): [["tt.divisibility", 16]] for n in names
                               if n.endswith("_ptr") or (n.endswith("_spos") and n[0] in "xodg")}
                    src = ASTSource(fn=fn, signature=types, attrs=aligned,
                                    constexprs={(names.index(k),): v for k, v in consts.items()})
                    print(f"=== {fn.__name__} {dtype} L={length} d={d} {stage} BLOCK_I={block_i} warps={warps}",
                          flush=True)
                    kernel = compile(src, target=GPUTarget("cuda", 90, 32),
                                     options={"num_warps": warps, "num_stages": 1})
                    assert "cubin" in kernel.asm
                    count += 1
print("compiled", count)
"""


def test_every_autotune_config_compiles_for_sm90_without_spills(tmp_path):
    """The (line, d) tiles of the GPU check: 224² and 1024² grids (L = 14, 64) × d = 8, 32, 64, compiled by two
    processes at once (half the shapes each: both cores of a 2-core machine; their ptxas logs go to files, as a
    full pipe would stall one process while the other is read)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(TRITON_DEFAULT_FP_FUSION="1", TRITON_DUMP_PTXAS_LOG="1", TRITON_ALWAYS_COMPILE="1")
    shapes = [f"{length}x{d}" for length in (14, 64) for d in (8, 32, 64)]
    logs = [(tmp_path / f"out{half}.txt", tmp_path / f"err{half}.txt") for half in (0, 1)]
    processes = []
    for half, (out, err) in enumerate(logs):
        with open(out, "w") as stdout, open(err, "w") as stderr:
            processes.append(subprocess.Popen([sys.executable, "-c", COMPILE_FOR_SM90, *shapes[half::2]],
                                              stdout=stdout, stderr=stderr, env=env))
    for process, (out, err) in zip(processes, logs, strict=True):
        assert process.wait(timeout=900) == 0 and "compiled" in out.read_text(), err.read_text()[-3000:]
    outputs = [out.read_text() for out, _ in logs]
    reports = [report for stdout in outputs for report in stdout.split("=== ")[1:]]
    assert len(reports) == sum(int(stdout.split("compiled")[-1]) for stdout in outputs)
    spilling = [r.splitlines()[0] for r in reports
                if any(int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", r))]
    assert reports and not spilling, spilling


def test_gpu_check_refuses_without_cuda_and_writes_nothing(tmp_path):
    """Without a CUDA torch the script stops with a clear message before measuring anything (the timeout only
    guards against a hang), leaving docs/results/gpu as is."""
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    before = sorted(p.name for p in (ROOT / "docs" / "results" / "gpu").iterdir())
    env = {**os.environ, "PY": sys.executable}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh")], capture_output=True, text=True,
                          env=env, timeout=120, cwd=tmp_path)
    assert done.returncode != 0
    assert "no CUDA GPU" in done.stderr
    assert sorted(p.name for p in (ROOT / "docs" / "results" / "gpu").iterdir()) == before
