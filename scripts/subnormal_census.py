"""Subnormal floats in every model's activations: ViT-Tiny (untrained, a photograph at 224² and 1024²) for each
mixer, and trained models on their own test images. Writes a markdown report (default
docs/results/subnormals_cpu.md) with the machine and the command.

    python scripts/subnormal_census.py
    python scripts/subnormal_census.py --fashion-checkpoint runs/x/checkpoint.pt   # also a Fashion-MNIST model
"""

from __future__ import annotations

import argparse
import datetime
import shlex
import sys
from pathlib import Path

import torch

from ssog_lab import data
from ssog_lab.bench.measure import git_commit, machine
from ssog_lab.bench.subnormals import census_markdown, subnormal_census
from ssog_lab.models import build_model
from ssog_lab.train import load_model

SHIPPED = Path("data/checkpoints/nano_ssog_steered_mnist5k.pt")
MIXERS = ("sdpa", "axial", "ssog", "ssog-steered")
INTRO = ("Subnormal operands slow matrix products many-fold on some CPUs, so the SSoG operator cuts its Gaussian "
         "tails to exact zeros (`ssog_lab/ops/reference.py`, tested in `tests/test_ops.py`). This census checks the "
         "rest of the model: the output of every leaf module (patch embedding, LayerNorm, linear layers, GELU) and "
         "mixer, and the attention probabilities that SDPA keeps inside its kernel, made explicit by "
         "`ssog_lab.bench.subnormals.attention_probabilities`. A softmax probability becomes subnormal in float32 only "
         "when a score trails its row's maximum by 87.3 to 104 (beyond that it is exactly 0); PyTorch's float32 GELU "
         "returns exact zeros below x ≈ -5.5 and was found to produce no subnormal output on [-200, 0]. A count "
         "of 0 means none of these tensors can slow a matrix product on this input. Trained models: the shipped "
         "digits checkpoint and any `--fashion-checkpoint` of the Fashion-MNIST sweep (sweep checkpoints stay on "
         "the machine that trained them; their run records are committed).")


def untrained_rows(resolutions: list[int]) -> list[dict]:
    """ViT-Tiny of each mixer (seed 0) on the 'astronaut' photograph, ImageNet-normalized, at each resolution."""
    rows = []
    mean, std = torch.tensor([0.485, 0.456, 0.406])[:, None, None], torch.tensor([0.229, 0.224, 0.225])[:, None, None]
    for resolution in resolutions:
        image = ((data.photo("astronaut", resolution) - mean) / std)[None]  # (1, 3, R, R)
        for mixer in MIXERS:
            torch.manual_seed(0)
            model = build_model("tiny", "discrete", mixer).eval()
            label = f"tiny {mixer}, untrained, {resolution}²"
            rows += [{"model": label, **r} for r in subnormal_census(model, image)]
    return rows


def trained_rows(checkpoints: list[tuple[Path, str]], images: int) -> list[dict]:
    """Each (checkpoint, data set name) on the first `images` test images of that data set."""
    rows = []
    for path, dataset in checkpoints:
        model, config = load_model(path)
        test = data.load_dataset(dataset, "test", image_size=config.image_size)
        batch = torch.stack([test[i][0] for i in range(min(images, len(test)))])  # (b, C, H, W)
        label = f"{config.mixer} ({config.depth}), trained: {path}, {dataset} test images"
        rows += [{"model": label, **r} for r in subnormal_census(model, batch)]
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resolution", type=int, nargs="+", default=[224, 1024])
    parser.add_argument("--fashion-checkpoint", type=Path, action="append", default=[],
                        help="a model trained on Fashion-MNIST (repeatable)")
    parser.add_argument("--images", type=int, default=256, help="test images per trained model")
    parser.add_argument("--out", type=Path, default=Path("docs/results/subnormals_cpu.md"))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    checkpoints = [(SHIPPED, "mnist5k"), *((p, "fashion-mnist") for p in args.fashion_checkpoint)]
    rows = untrained_rows(args.resolution) + trained_rows(checkpoints, args.images)
    m = machine()
    command = "python scripts/subnormal_census.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = (f"# Subnormal floats in the model's activations (CPU)\n\n{INTRO}\n\n"
            f"Machine: {m['cpu_model']} ({m['cpu_vendor']}; {m['cpu_flags'] or 'no avx512/amx'}), "
            f"torch {torch.__version__}, "
            f"{m['threads']} thread, denormals flushed: {m['flush_denormal']}, {stamp}, code at commit "
            f"{git_commit() or 'unknown (not a git checkout)'}.\n"
            f"Command: `{command.strip()}`\n\n{census_markdown(rows)}\n")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
