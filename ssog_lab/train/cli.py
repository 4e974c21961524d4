"""`python -m ssog_lab train`: the training flags are generated from TrainConfig's fields (plus the help
strings and special cases below); model, data and output flags are spelled here."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import datetime
import json
import os
import shlex
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from .. import data as datasets
from ..models import DEPTHS, MIXERS, PRESETS, build_model, count_parameters, preset_config
from . import folder, loop
from .atomic import atomic_write
from .checkpoint import save_weights
from .config import PRECISION_CHOICES, TrainConfig
from .runtime import autocast_for, choose_device, world

# Per TrainConfig field: help text, and extra argparse keywords where the generated flag needs them.
HELP = {
    "batch_size": "global batch (all ranks)",
    "lr": "peak learning rate",
    "grad_clip": "gradient-norm clip; ≤ 0 disables",
    "precision": "mixed precision",
    "atom_lr_scale": "learning-rate factor for the SSoG atoms (offsets, log-widths, amplitudes)",
    "validation_fraction": "hold out this fraction of the training set (the same images for every seed) and "
                           "evaluate on it instead of the test set",
    "device": "auto, cpu, cuda, cuda:1, ...",
    "max_steps": "stop after this many steps (and checkpoint)",
    "save_every": "also checkpoint every N steps",
}
SPECIAL = {
    "precision": dict(flags=("--precision",), choices=PRECISION_CHOICES),
    "progress": dict(flags=("--no-progress",), action="store_false", help="no tqdm bars"),
}


def _parse_override(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--set expects KEY=VALUE (a ViTConfig field), got {text!r}")
    try:
        return key, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return key, value  # a bare word such as rk4


def _add_config_flags(group: argparse._ArgumentGroup) -> None:
    """One flag per TrainConfig field: --field-name, typed from the annotation, defaulting to the field's."""
    for field in dataclasses.fields(TrainConfig):
        options = dict(SPECIAL.get(field.name, {}))
        flags = options.pop("flags", ("--" + field.name.replace("_", "-"),))
        kind = field.type.split("|")[0].strip()
        if "action" not in options:
            options["type"] = {"int": int, "float": float, "str": str}[kind]
        options.setdefault("help", HELP.get(field.name))
        group.add_argument(*flags, dest=field.name, default=field.default, **options)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ssog_lab train", description=loop.__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    m = p.add_argument_group("model")
    m.add_argument("--preset", default="nano", help=f"one of {tuple(PRESETS)}")
    m.add_argument("--depth", default="discrete", choices=DEPTHS)
    m.add_argument("--mixer", default="ssog-steered", choices=MIXERS)
    m.add_argument("--set", dest="overrides", type=_parse_override, action="append", default=[], metavar="KEY=VALUE",
                   help="ViTConfig override, repeatable (e.g. --set ssog_heads=16 --set ode_method=euler); in_chans "
                        "and num_classes follow the data set unless set")
    d = p.add_argument_group("data")
    d.add_argument("--dataset", default="mnist5k", choices=datasets.DATASETS)
    d.add_argument("--data-dir", default=None,
                   help="data folder (default: the data set's own: cifar100 'data', holding cifar-100-python.tar.gz "
                        "or cifar-100-python/; fashion-mnist the Debian package's folder); --dataset folder: your "
                        "images as DIR/<class>/<image>, or DIR/train/<class>/… and DIR/test/<class>/…")
    d.add_argument("--augment", action=argparse.BooleanOptionalAction, default=None,
                   help="training augmentation (default: cifar100 crop+flip on, mnist5k off)")
    _add_config_flags(p.add_argument_group("training"))
    o = p.add_argument_group("output")
    o.add_argument("--out", default=None, help="run folder (default runs/<preset>-<depth>-<mixer>-<dataset>-s<seed>)")
    o.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    o.add_argument("--overwrite", action="store_true", help="replace the run already in OUT, and an existing "
                   "--export file")
    o.add_argument("--export", default=None, metavar="PATH", help="also write a small weights-only file here "
                   "(float32, model config, accuracy, command) plus PATH with .json")
    return p


def main(argv: list[str] | None = None) -> int:
    """`python -m ssog_lab train`: build data and model, fit, report the final accuracy."""
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed and not dist.is_initialized():
        gpu = torch.cuda.is_available() and args.device != "cpu"
        dist.init_process_group("nccl" if gpu else "gloo")
        if gpu:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    try:
        return _run(args, argv)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except FloatingPointError as err:  # loop.DivergedError, or an ODE solver that gave up outside training
        print(f"error: {err}", file=sys.stderr)
        return 1
    except OSError as err:
        print(f"error: cannot write {err.filename or ''}: {err.strerror or err}", file=sys.stderr)
        return 2
    finally:
        if distributed and dist.is_initialized():
            dist.destroy_process_group()


def _config(args: argparse.Namespace) -> TrainConfig:
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig)}
    if values["grad_clip"] is not None and values["grad_clip"] <= 0:  # NaN stays and is rejected
        values["grad_clip"] = None
    return TrainConfig(**values)


def _run(args: argparse.Namespace, argv: list[str]) -> int:
    if args.preset not in PRESETS:
        raise ValueError(f"--preset must be one of {tuple(PRESETS)}, got {args.preset!r}")
    config = _config(args)  # every check before any file is touched or any data is read
    overrides = dict(args.overrides)
    if {"depth", "mixer"} & overrides.keys():  # the run folder's name and summary are made from the flags
        raise ValueError("--set depth=… and --set mixer=… are spelled --depth and --mixer")
    # Every --set value is checked here, by ViTConfig's own rules; in_chans and num_classes are checked again
    # once the data say what they are.
    image_size = preset_config(args.preset, args.depth, args.mixer, **overrides).image_size
    autocast_for(choose_device(config.device), config.precision)  # a device this machine has, and its precision
    out = Path(args.out or f"runs/{args.preset}-{args.depth}-{args.mixer}-{args.dataset}-s{args.seed}")
    folder.check_run_folder(out, args.resume, args.overwrite)
    if args.export:
        folder.check_export(Path(args.export), out, args.overwrite)
    train_set = datasets.load_dataset(args.dataset, "train", args.data_dir, image_size, args.augment)
    test_set = datasets.load_dataset(args.dataset, "test", args.data_dir, image_size)
    overrides.setdefault("in_chans", train_set.image_shape[0])
    overrides.setdefault("num_classes", train_set.num_classes)
    torch.manual_seed(config.seed)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
    model = build_model(args.preset, depth=args.depth, mixer=args.mixer, **overrides)
    rank, _ = world()
    if rank == 0:
        print(f"{args.preset}/{args.depth}/{args.mixer}: {count_parameters(model):,} parameters; {args.dataset}: "
              f"{len(train_set)} train, {len(test_set)} test; run folder {out}", file=sys.stderr)
    history = loop.fit(model, train_set, test_set, config, out_dir=out, resume=args.resume, overwrite=args.overwrite)
    error = None
    if rank == 0:
        try:
            _report(args, argv, model, config, history, out)
        except OSError as err:
            error = err
    if dist.is_initialized():
        dist.barrier()  # the other ranks wait for rank 0's files: tearing gloo down under a busy peer can abort
    if error is not None:
        raise error
    return 0


def _report(args: argparse.Namespace, argv: list[str], model, config: TrainConfig, history: list[dict],
            out: Path) -> None:
    """summary.json (and the --export files): what was trained (the recipe and the model's ViTConfig, which
    `results.record` reads), how long, the accuracy on which split."""
    epochs = [r for r in history if r["kind"] == "epoch"]
    accuracy = epochs[-1]["test_accuracy"] if epochs else None
    split = "val" if config.validation_fraction > 0 else "test"
    summary = {"preset": args.preset, "depth": args.depth, "mixer": args.mixer, "dataset": args.dataset,
               "seed": args.seed, "parameters": count_parameters(model), "epochs_done": len(epochs),
               "eval_split": split, f"{split}_accuracy": accuracy,
               **({"test_accuracy": None} if split == "val" else {}),
               "train_seconds": epochs[-1]["time_s"] if epochs else None,
               "train_config": dataclasses.asdict(config), "model_config": dataclasses.asdict(model.config)}
    if args.export:  # before summary.json, which tells a sweep that the run is finished
        command = "python -m ssog_lab train " + shlex.join(argv)
        metadata = {**summary, "command": command, "date": datetime.date.today().isoformat(),
                    "torch": torch.__version__}
        save_weights(model, args.export, **{f"{split}_accuracy": accuracy}, eval_split=split, command=command,
                     train_config=dataclasses.asdict(config))
        atomic_write(folder.export_sidecar(Path(args.export)), json.dumps(metadata, indent=1, allow_nan=False) + "\n")
    atomic_write(out / "summary.json", json.dumps(summary, indent=1, allow_nan=False) + "\n")
    print(json.dumps(summary))
