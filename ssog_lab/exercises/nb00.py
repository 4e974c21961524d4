"""Exercises of notebook 00 (registered with `@exercise`; see the package docstring)."""

from .. import models
from ._registry import close, exercise


def _tiny_grid() -> tuple[int, int]:
    """The token grid of ViT-Tiny's 224² images in 16-pixel patches (`models.PRESETS`)."""
    preset = models.PRESETS["tiny"]
    side = preset["image_size"] // preset["patch_size"]
    return side, side


@exercise("00.tokens", wrong=224 * 224 // 16, judge=close(0.0),
          hint="the image is cut into a grid of patches: how many patches fit along one side, and how many "
               "in the whole square?",
          explain="224 / 16 patches per side, squared: the 14×14 grid of ViT-Tiny, ViT-S and ViT-B.")
def tokens() -> int:
    height, width = _tiny_grid()
    return height * width


@exercise("00.saving", wrong=14.0, judge=close(0.01),
          hint="write both counts with N = H·W and cancel the common factor N; both H and W count.",
          explain="N / (H + W): the saving grows like √N / 2 on a square grid, so larger images gain more.")
def saving() -> float:
    height, width = _tiny_grid()
    n = height * width
    return n * n / (n * (height + width))
