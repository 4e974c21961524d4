"""Triton SSoG kernels against the torch reference: forward and all four gradients.

On a machine without CUDA these run in Triton's CPU interpreter (conftest sets TRITON_INTERPRET=1 before triton
is imported); shapes are tiny because the interpreter executes every program instance in Python.
"""

import os
import subprocess
import sys

import pytest
import torch

from ssog_lab import ops
from ssog_lab.ops import triton_available
from ssog_lab.ops import triton_kernel as tk
from ssog_lab.ops.reference import ssog_reference

pytestmark = pytest.mark.triton

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
needs_triton = pytest.mark.skipif(not triton_available(DEVICE),
                                  reason="triton cannot run here (no CUDA and no TRITON_INTERPRET=1)")


def make_inputs(batch, heads, grid, d, atoms, steered, *, mu_scale=1.5, mu_shift=0.0, tiny_sigma=False,
                dtype=torch.float32, seed=0):
    """Random (v, mu, sigma, amp) on DEVICE; tiny_sigma gives every other atom σ ≈ 1e-3."""
    gen = torch.Generator().manual_seed(seed)
    n = grid[0] * grid[1]
    shape = (batch, heads, n, atoms) if steered else (heads, atoms)
    v = torch.randn(batch, heads, n, d, generator=gen)
    mu = torch.randn(*shape, 2, generator=gen) * mu_scale + mu_shift
    sigma = torch.rand(*shape, 2, generator=gen) * 1.5 + 0.4
    if tiny_sigma:
        sigma[..., ::2, :] = 1e-3 * (1 + torch.rand(sigma[..., ::2, :].shape, generator=gen))
    amp = torch.randn(*shape, generator=gen)
    return [t.to(DEVICE, dtype) for t in (v, mu, sigma, amp)]


def run_both(inputs, grid, backend="triton", seed=1):
    """Output and (dv, dmu, dsigma, damp) of the Triton path and of the float64 torch reference."""
    results = []
    dy = None
    for path, dtype in ((backend, inputs[0].dtype), ("reference", torch.float64)):
        leaves = [t.detach().to(dtype).requires_grad_() for t in inputs]
        if path == "reference":
            y = ssog_reference(*leaves, grid, dense=False)
        else:
            y = ops.ssog(*leaves, grid, backend=path)
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
    "fixed-nonsquare-offgrid": (2, 2, (5, 7), 8, 3, False, {"mu_scale": 4.0}),
    "steered-two-d-blocks-M5": (2, 1, (5, 7), 20, 5, True, {}),
    "fixed-two-k-blocks": (1, 1, (3, 20), 8, 2, False, {"mu_scale": 6.0}),
    "steered-one-row-M1": (2, 2, (1, 9), 8, 1, True, {}),
    "fixed-one-column-M1": (1, 2, (6, 1), 8, 1, False, {}),
    "steered-centres-off-the-grid": (1, 2, (4, 6), 8, 2, True, {"mu_shift": 9.0}),
    "fixed-tiny-sigma": (1, 2, (4, 5), 8, 4, False, {"tiny_sigma": True, "mu_shift": 0.3}),
    "steered-tiny-sigma": (1, 1, (5, 4), 8, 4, True, {"tiny_sigma": True, "mu_shift": 0.3}),
}


@needs_triton
@pytest.mark.parametrize("case", list(CASES))
def test_forward_and_gradients_match_reference(case):
    batch, heads, grid, d, atoms, steered, extra = CASES[case]
    check(make_inputs(batch, heads, grid, d, atoms, steered, **extra), grid)


@needs_triton
def test_value_gradient_alone():
    """With only v requiring grad the parameter-gradient kernels are skipped; dv must still be right."""
    v, mu, sigma, amp = make_inputs(1, 2, (4, 5), 8, 2, False)
    v = v.requires_grad_()
    ops.ssog(v, mu, sigma, amp, (4, 5), backend="triton").square().sum().backward()
    v_ref = v.detach().double().requires_grad_()
    ssog_reference(v_ref, mu.double(), sigma.double(), amp.double(), (4, 5), dense=False).square().sum().backward()
    assert_close_scaled(v.grad, v_ref.grad, 1e-4, "dv")


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


def test_roofline_counts_compulsory_traffic():
    """Forward bytes of a fixed layer: V, Z twice, Y, two lse (written, read), parameters read twice per stage."""
    batch, heads, (h, w), d, m, s = 2, 3, (4, 5), 8, 2, 2
    est = tk.roofline(batch, heads, (h, w), d, m, steered=False, dtype_bytes=s)
    n, bh = h * w, batch * heads
    assert est.bytes == pytest.approx(bh * (n * d * s * (2 + 2 * m) + 2 * 2 * n * m * 4) + 4 * heads * m * 3 * 4)
    assert est.flops == pytest.approx(bh * 2 * n * m * d * (h + w))
    backward = tk.roofline(batch, heads, (h, w), d, m, steered=False, dtype_bytes=s, backward=True)
    assert backward.flops == pytest.approx(2 * est.flops) and backward.time_s > 0


@pytest.mark.gpu
@pytest.mark.parametrize("steered", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_realistic_shape_on_gpu(dtype, steered):
    """B=8, 6 heads, 32×32 tokens, d=64, M=4: float32 to 1e-4; bfloat16 to bfloat16 accuracy (2e-2)."""
    inputs = make_inputs(8, 6, (32, 32), 64, 4, steered, dtype=dtype)
    check(inputs, (32, 32), rel=1e-4 if dtype == torch.float32 else 2e-2)


@needs_triton
@pytest.mark.skipif(not tk.INTERPRET, reason="bfloat16 is refused only in the interpreter")
def test_bfloat16_refused_in_interpreter():
    v, mu, sigma, amp = make_inputs(1, 1, (2, 3), 4, 1, False, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="v must be float32 for the Triton backend in the interpreter"):
        ops.ssog(v, mu, sigma, amp, (2, 3), backend="triton")


# Compiles each kernel variant to a CUDA binary (sm_90) without a GPU, in a process without the interpreter: the
# interpreter runs kernels as Python and accepts constructs the GPU compiler rejects.
COMPILE_FOR_SM90 = """
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, compile
from ssog_lab.ops import triton_kernel as tk

def build(fn, dtype, consts):
    types = {n: "constexpr" if n in consts else ("*" + (dtype if n in ("x_ptr", "out_ptr", "dout_ptr") else "fp32")
             if n.endswith("_ptr") else "i32") for n in fn.arg_names}
    src = ASTSource(fn=fn, signature=types, constexprs={(fn.arg_names.index(k),): v for k, v in consts.items()})
    assert "cubin" in compile(src, target=GPUTarget("cuda", 90, 32)).asm

blocks = {"BLOCK_O": 64, "BLOCK_K": 32, "BLOCK_D": 64}
build(tk._axis_lse_kernel, "fp32", {"BLOCK_O": 64, "BLOCK_K": 32})
for dtype, precision in (("fp32", "ieee"), ("bf16", "tf32"), ("fp16", "tf32")):
    for transposed in (False, True):
        build(tk._axis_apply_kernel, dtype,
              {"TRANSPOSED": transposed, "SUM_ATOMS": not transposed, "PRECISION": precision, **blocks})
    build(tk._axis_param_grad_kernel, dtype, {"PRECISION": precision, **blocks})
print("compiled")
"""


def test_kernels_compile_for_a_cuda_gpu():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_DEFAULT_FP_FUSION"] = "1"
    done = subprocess.run([sys.executable, "-c", COMPILE_FOR_SM90], capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0 and "compiled" in done.stdout, done.stderr[-3000:]
