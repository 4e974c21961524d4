"""What a Fashion-MNIST sweep run's labels stand for: its model as ViTConfig fields. The sweep writes its train
commands from these fields (`sweep.model_argv`), the speed step builds the same models from them, and a run
folder trained before summary.json held the model config gets it here (`model_config`, the `derive` of
`results.record.read_run`)."""

from __future__ import annotations

from ... import models

PRESET = "nano"  # every run of the sweep
IMAGE_SIZE = 28  # Fashion-MNIST's own side
DATA_FIELDS = {"in_chans": 1, "num_classes": 10}  # grey images, ten classes
# ODE: dx/dt = f(x) on [0, T = layers] with one fixed RK4 step, 4 evaluations of f (the compute of 4 blocks):
# models.rk4_residual(4.0), the matched-cost wiring, which docs/results/ode_solutions.md shows is no ODE solution.
DEPTH_FIELDS = {"discrete": {}, "looped": {}, "ode": models.rk4_residual(4.0)}
# How the sweep's reports name each depth form: its ODE form is that one-step wiring, not a solution of its ODE.
DEPTH_TITLES = {"discrete": "discrete", "looped": "looped", "ode": f"ode ({models.RK4_RESIDUAL_LABEL})"}
HYPER_FIELDS = ("heads", "ssog_heads", "atoms")  # the tuned hyper-parameters that are ViTConfig fields
SSOG_MIXERS = ("ssog", "ssog-steered")  # the mixers with atoms (and an atom learning-rate scale)
NFE_FILE = "nfe.json"  # beside an ODE run's summary: dopri5's NFE of the trained model (measure.write_nfe)


def model_fields(labels: dict) -> dict:
    """The ViTConfig fields beyond the preset's of a run with these labels (a tuning trial has no depth or patch
    label: it is discrete at patch 4)."""
    depth = labels.get("depth", "discrete")
    return {"image_size": IMAGE_SIZE, "patch_size": labels.get("patch", 4), **DATA_FIELDS, **DEPTH_FIELDS[depth],
            **{key: labels[key] for key in HYPER_FIELDS if key in labels}}


def model_config(labels: dict, summary: dict) -> models.ViTConfig:
    """The model of a finished run: its summary's preset, depth and mixer with `model_fields(labels)`."""
    return models.preset_config(summary["preset"], summary["depth"], summary["mixer"], **model_fields(labels))
