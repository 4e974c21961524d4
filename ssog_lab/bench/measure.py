"""One configuration measured in this process: throughput, peak memory and where it ran.

Peak memory:

* CUDA: `torch.cuda.max_memory_allocated()` (parameters, inputs and activations);
* CPU:  the process's peak resident set size (/proc/self/status VmHWM, reset through
  /proc/self/clear_refs once torch is imported) minus its resident size before the model was built.

Throughput is images/s of the median of the timed batches (`timing.cpu_time`, or `timing.cuda_time` on a
GPU): inference under `torch.inference_mode()`, or a training step (`train_step`: forward, cross-entropy,
backward, AdamW step). Meant for a fresh process (`runner.run_in_subprocess`), so the memory is this
configuration's own (in training: with the gradients and AdamW's two moment buffers).
"""

from __future__ import annotations

import math
import os
import platform
import subprocess

import torch
import torch.nn.functional as F

from .. import __version__
from ..models import PRESETS, build_model, count_parameters
from ..ops import triton_available
from . import timing
from .config import BenchConfig

# CPU features that change the speed of float32 GEMMs and softmax by large factors.
_ISA_PREFIXES = ("avx512", "amx")


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"{field} not in /proc/self/status")


def _reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux ≥ 4.0); False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo ({} where there is none)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


def denormals_flushed() -> bool:
    """Whether this process flushes subnormal floats to zero (torch.set_flush_denormal), tested directly:
    a subnormal float32 times one is zero only when they are flushed."""
    tiny = torch.full((8,), 1e-39)  # subnormal in float32 (smallest normal ≈ 1.2e-38)
    return bool(((tiny * 1.0) == 0).all())


def machine() -> dict:
    """Provenance of a measurement: CPU model and vendor, the ISA flags that matter (avx512*, amx*),
    torch's intra-op threads and whether denormals are flushed in this process."""
    info = _cpuinfo()
    flags = sorted(f for f in info.get("flags", "").split() if f.startswith(_ISA_PREFIXES))
    return dict(cpu_model=info.get("model name") or platform.processor() or platform.machine(),
                cpu_vendor=info.get("vendor_id", ""), cpu_flags=" ".join(flags), threads=torch.get_num_threads(),
                flush_denormal=denormals_flushed())


def git_commit() -> str | None:
    """The commit of the git checkout this process runs in (12 hex digits): the code a measurement was made
    with; None outside a git checkout."""
    try:
        return subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"


def _backend_name(config: BenchConfig, model, images) -> str:
    """The kernel behind the mixer: SDPA's chosen backend for this shape, or the SSoG backend."""
    if config.mixer.startswith("ssog"):
        return "triton" if images.is_cuda and triton_available(images.device) else "torch"
    if config.mixer == "sdpa-math":
        return "math"
    c = model.config
    tokens = (config.resolution // c.patch_size) ** 2
    length = int(math.isqrt(tokens)) if config.mixer == "axial" else tokens
    q = torch.zeros(config.batch, c.heads, length, c.dim // c.heads, device=images.device)
    try:
        from torch.nn.attention import SDPBackend

        return SDPBackend(int(torch._fused_sdp_choice(q, q, q))).name.lower()
    except (AttributeError, RuntimeError, TypeError, ValueError):
        return "auto"


def _build(config: BenchConfig, device: torch.device):
    """The model of a configuration; the ODE is solved by ode_method at the library's default step size, or with
    exactly ode_steps fixed-grid steps on [0, T = layers] when given (config.overrides apply last)."""
    overrides = {}
    if config.depth == "ode":
        overrides = dict(ode_method=config.ode_method)
        if config.ode_steps is not None:
            overrides["ode_step_size"] = PRESETS[config.preset]["layers"] / config.ode_steps
    return build_model(config.preset, depth=config.depth, mixer=config.mixer, num_classes=config.num_classes,
                       **{**overrides, **config.overrides}).to(device)


def train_step(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor,
               optimizer: torch.optim.Optimizer) -> None:
    """One training step as `ssog_lab.train` takes it: forward, cross-entropy, backward, optimizer step."""
    optimizer.zero_grad(set_to_none=True)
    F.cross_entropy(model(images), labels).backward()
    optimizer.step()


class _PeakMemory:
    """Peak memory since construction, in MB, by the best method this platform has (`method`)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.base_kib = _rss_kib("VmRSS")
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
            self.method = "cuda.max_memory_allocated"
        else:
            self.method = "VmHWM-baseline" if _reset_peak_rss() else "ru_maxrss-baseline (includes imports)"

    def mb(self) -> float:
        if self.device.type == "cuda":
            return torch.cuda.max_memory_allocated(self.device) / 2**20
        if self.method == "VmHWM-baseline":
            return (_rss_kib("VmHWM") - self.base_kib) / 1024
        import resource

        return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - self.base_kib) / 1024


def run_one(config: BenchConfig, fail: bool = False) -> dict:
    """Measure one configuration in this process; returns a row (see COLUMNS). `fail` raises a
    RuntimeError after the model is built (to test how failures are reported)."""
    if config.threads:
        torch.set_num_threads(config.threads)
    if config.flush_denormal:
        torch.set_flush_denormal(True)
    device = torch.device(config.device)
    row = dict(depth=config.depth, mixer=config.mixer, mode=config.mode, resolution=config.resolution,
               batch=config.batch, device=_device_name(device), torch=torch.__version__, ssog_lab=__version__,
               python=platform.python_version(), **machine())
    memory = _PeakMemory(device)
    model = _build(config, device)
    c = model.config
    images = torch.randn(config.batch, c.in_chans, config.resolution, config.resolution, device=device)
    labels = torch.randint(0, c.num_classes, (config.batch,), device=device)
    row.update(params=count_parameters(model), tokens=(config.resolution // c.patch_size) ** 2,
               backend=_backend_name(config, model, images), memory_method=memory.method)
    if fail:
        raise RuntimeError("forced failure (fail hook)")

    # The moment buffers are allocated by the first step, one of the warmup steps when warmup ≥ 1.
    optimizer = torch.optim.AdamW(model.parameters()) if config.mode == "train" else None

    def step():
        if optimizer is not None:
            train_step(model, images, labels, optimizer)
        else:
            with torch.inference_mode():
                model(images)

    model.train(config.mode == "train")
    timer = timing.cuda_time if device.type == "cuda" else timing.cpu_time
    measured = timer(step, warmup=config.warmup, repeats=config.repeats, min_seconds=config.min_seconds,
                     max_repeats=None)
    row.update(images_per_s=config.batch / measured.median_s, seconds_per_batch=measured.median_s,
               best_images_per_s=config.batch / measured.best_s, peak_mb=memory.mb(), repeats=measured.calls,
               nfe=getattr(model, "nfe", 0) if config.depth == "ode" else c.layers, status="ok", error="")
    return row
