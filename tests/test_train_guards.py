"""Reliability, round 2 (issue #31): no command overwrites a file unasked, resume refuses a different experiment,
a full disk is a message and leaves no lock behind, every config value is checked before any work, damaged
checkpoints are CheckpointErrors, an adaptive ODE solver's divergence is a DivergedError, and a SIGKILL never
leaves half a summary. Each test goes through the real CLI or API with files it makes itself."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from train_helpers import TINY, recipe, small_digits, tiny_model

from ssog_lab import data, train
from ssog_lab.models import ViTConfig, build_model

ROOT = Path(__file__).resolve().parents[1]
CLI = ["--set", "dim=16", "--set", "layers=1", "--set", "ssog_heads=2", "--batch-size", "16", "--max-steps", "1",
       "--no-progress"]


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_export_never_replaces_a_file_unasked_and_is_checked_before_training(tmp_path, capsys):
    run = tmp_path / "run"
    assert train.main([*CLI, "--out", str(run), "--export", str(tmp_path / "best.pt")]) == 0
    before, exported = files(run), (tmp_path / "best.pt").read_bytes()
    (tmp_path / "folder").mkdir()
    (tmp_path / "taken.json").write_text("{}")
    cases = [(["--resume", "--max-steps", "2", "--out", str(run), "--export", str(run / "checkpoint.pt")],
              "a file of a run folder"),
             (["--resume", "--max-steps", "2", "--out", str(run), "--export", str(run / "summary.pt")],
              "a file of a run folder"),  # its .json sidecar is the run's summary.json
             (["--out", str(tmp_path / "b"), "--export", str(tmp_path / "model.json")], "both the weights"),
             (["--out", str(tmp_path / "b"), "--export", str(tmp_path / "best.pt")], "--overwrite"),
             (["--out", str(tmp_path / "b"), "--export", str(tmp_path / "taken.pt")], "taken.json"),
             (["--out", str(tmp_path / "b"), "--export", str(tmp_path / "folder")], "is a folder"),
             (["--out", str(tmp_path / "b"), "--export", str(run / "checkpoint.pt"), "--overwrite"],
              "a file of a run folder")]  # another run's checkpoint, even with --overwrite
    for flags, message in cases:
        assert train.main([*CLI, *flags]) == 2, flags
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, flags
        assert not (tmp_path / "b").exists(), flags  # refused before any training
    assert files(run) == before and (tmp_path / "best.pt").read_bytes() == exported
    assert train.main([*CLI, "--seed", "1", "--out", str(tmp_path / "b"), "--export", str(tmp_path / "best.pt"),
                       "--overwrite"]) == 0
    assert (tmp_path / "best.pt").read_bytes() != exported
    assert json.loads((tmp_path / "best.json").read_text())["seed"] == 1


def test_resume_refuses_any_change_of_the_trajectory_naming_the_field(tmp_path, capsys):
    run = tmp_path / "run"
    assert train.main([*CLI, "--out", str(run)]) == 0
    before = files(run)
    resume = [*CLI, "--out", str(run), "--resume", "--max-steps", "2"]
    cases = [(["--set", "image_size=28"], "image_size 32 → 28"), (["--set", "mlp_ratio=2.0"], "mlp_ratio 4.0 → 2.0"),
             (["--augment"], "transform"), (["--batch-size", "32"], "batch_size 16 → 32"),
             (["--depth", "looped"], "depth 'discrete' → 'looped'"), (["--epochs", "3"], "epochs 10 → 3")]
    for flags, message in cases:
        assert train.main([*resume, *flags]) == 2, flags
        assert message in capsys.readouterr().err, flags
    assert files(run) == before
    train.fit(tiny_model(), small_digits(24, False), None, recipe(max_steps=1), out_dir=tmp_path / "api")
    with pytest.raises(train.CheckpointError, match="different training data .*images 24 → 32"):
        train.fit(tiny_model(), small_digits(32, False), None, recipe(max_steps=2), out_dir=tmp_path / "api",
                  resume=True)
    digits = small_digits(24, False)
    other = data.ImageDataset(digits.images, digits.labels, digits.transform, name="fashion-mnist-train")
    with pytest.raises(train.CheckpointError, match="name 'images' → 'fashion-mnist-train'"):
        train.fit(tiny_model(), other, None, recipe(max_steps=2), out_dir=tmp_path / "api", resume=True)
    lambdas = [data.ImageDataset(digits.images, digits.labels, lambda x, k=k: x.float()) for k in range(2)]
    train.fit(tiny_model(), lambdas[0], None, recipe(max_steps=1), out_dir=tmp_path / "fn")
    train.fit(tiny_model(), lambdas[1], None, recipe(max_steps=2), out_dir=tmp_path / "fn", resume=True)  # same data
    changed = data.ImageDataset(digits.images.clone(), digits.labels, digits.transform)
    changed.images[5, 0, 3, 3] += 1  # the same name, size and shape: one pixel of other data
    with pytest.raises(train.CheckpointError, match="different training data \\(sha256"):
        train.fit(tiny_model(), changed, None, recipe(max_steps=2), out_dir=tmp_path / "api", resume=True)


@pytest.mark.parametrize("flags, field", [
    (["--set", "mlp_ratio=-1"], "mlp_ratio"), (["--set", "mlp_ratio=1e999"], "mlp_ratio"),
    (["--set", "ssog_init_spread=abc"], "ssog_init_spread"), (["--set", "ode_step_size=x"], "ode_step_size"),
    (["--set", "ode_T=1e999"], "ode_T"), (["--set", "image_size=abc"], "image_size"),
    (["--set", "ode_rtol=-1"], "ode_rtol"), (["--set", "ode_rtol=nan"], "ode_rtol"),
    (["--set", "ode_adjoint=1"], "ode_adjoint"), (["--set", "heads=True"], "heads"),
    (["--set", "no_such_field=1"], "no_such_field"), (["--set", "depth=ode"], "--depth"), (["--seed", "-1"], "seed"),
    (["--seed", "4294967296"], "seed")])
def test_bad_values_are_refused_by_name_before_data_or_folders(tmp_path, capsys, monkeypatch, flags, field):
    def no_data(*args, **kwargs):
        raise AssertionError("data loaded before the values were checked")

    monkeypatch.setattr(train.cli.datasets, "load_dataset", no_data)
    assert train.main([*CLI, "--out", str(tmp_path / "run"), *flags]) == 2
    err = capsys.readouterr().err
    assert field in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("field, value", [("mlp_ratio", -1.0), ("mlp_ratio", float("inf")), ("mlp_ratio", 1e-9),
                                          ("ssog_init_spread", "abc"), ("ssog_init_spread", float("nan")),
                                          ("ode_step_size", 0.0), ("ode_T", float("inf")), ("ode_rtol", -1.0),
                                          ("ode_rtol", float("nan")), ("ode_atol", -1e-4), ("ode_adjoint", 1),
                                          ("image_size", "abc"), ("atoms", 2.0), ("ode_method", "rk45")])
def test_every_model_field_is_checked_by_name(field, value):
    with pytest.raises(ValueError, match=field):
        ViTConfig(**{field: value})


def test_labels_outside_the_model_and_empty_sets_are_refused_before_any_folder(tmp_path, capsys):
    assert train.main([*CLI, "--set", "num_classes=5", "--out", str(tmp_path / "run")]) == 2
    assert "num_classes=5" in capsys.readouterr().err and not (tmp_path / "run").exists()
    assert train.main([*CLI, "--set", "in_chans=3", "--out", str(tmp_path / "run")]) == 2  # digits have 1 channel
    assert "in_chans=3" in capsys.readouterr().err and not (tmp_path / "run").exists()
    digits = small_digits(24, False)
    shifted = data.ImageDataset(digits.images, digits.labels + 1, digits.transform)  # labels 1 … 10
    empty = data.ImageDataset(digits.images[:0], digits.labels[:0], digits.transform)
    for train_set, test_set, message in [(shifted, None, "labels from 1 to 10"), (digits, shifted, "evaluation set"),
                                         (empty, None, "0 images"), (digits, empty, "evaluation set has 0 images")]:
        with pytest.raises(ValueError, match=message):
            train.fit(tiny_model(), train_set, test_set, recipe(max_steps=1), out_dir=tmp_path / "api")
        assert not (tmp_path / "api").exists()


def crafted(tmp_path: Path, name: str, change) -> Path:
    """A copy of a real one-step run's checkpoint with `change(state)` applied, saved as `name`."""
    good = tmp_path / "good" / train.CHECKPOINT_NAME
    if not good.exists():
        train.fit(tiny_model(), small_digits(24, False), None, recipe(max_steps=1), out_dir=good.parent)
    state = torch.load(good, weights_only=True)
    change(state)
    folder = tmp_path / name
    folder.mkdir()
    torch.save(state, folder / train.CHECKPOINT_NAME)
    return folder


def first_moment(state: dict) -> dict:
    return next(iter(state["optimizer"]["state"].values()))


DAMAGE = {  # what a damaged file holds -> what the error must say
    "mlp_ratio": (lambda s: s["model_config"].update(mlp_ratio=-1.0), "mlp_ratio"),
    "string": (lambda s: s["model_config"].update(dim="16"), "dim must be int"),
    "rtol nan": (lambda s: s["model_config"].update(ode_rtol=float("nan")), "ode_rtol"),
    "unknown field": (lambda s: s["model_config"].update(colour=1), "colour"),
    "nan weight": (lambda s: s["model"]["head.weight"].__setitem__((0, 0), float("nan")), "non-finite .*head.weight"),
    "wrong shape": (lambda s: s["model"].update({"head.weight": torch.zeros(3, 3)}), "head.weight: \\(3, 3\\)"),
    "newer format": (lambda s: s.update(format="ssog_lab-checkpoint-v2"), "newer ssog_lab"),
}
RESUME_DAMAGE = {
    "position without step": (lambda s: s["position"].pop("step"), "missing entry 'step'"),
    "train_config None": (lambda s: s.update(train_config=None), "train_config is not a dict"),
    "negative step": (lambda s: s["position"].update(step=-1), "integers ≥ 0"),
    "moment shape": (lambda s: first_moment(s).update(exp_avg=torch.zeros(7)), "optimizer exp_avg of shape \\(7,\\)"),
    "moment nan": (lambda s: first_moment(s)["exp_avg_sq"].fill_(float("nan")), "not finite"),
    "scheduler step": (lambda s: s["scheduler"].update(last_epoch=7), "scheduler is at step 7"),
    "history": (lambda s: s.update(history=[1, 2]), "history must be a list of records"),
    "nan sums": (lambda s: s["epoch_sums"].fill_(float("nan")), "finite tensors of shape \\(3,\\)"),
    "no window": (lambda s: s.pop("window"), "lacks \\['window'\\]"),
    "no data": (lambda s: s.pop("data"), "lacks \\['data'\\]"),
    "data None": (lambda s: s.update(data=None), "its data is not a dict"),
}


@pytest.mark.parametrize("case", DAMAGE)
def test_damaged_checkpoints_are_checkpoint_errors_naming_what_is_wrong(tmp_path, case):
    change, message = DAMAGE[case]
    folder = crafted(tmp_path, "bad", change)
    with pytest.raises(train.CheckpointError, match=message):
        train.load_model(folder / train.CHECKPOINT_NAME)
    with pytest.raises(train.CheckpointError, match=f"{folder}.*{message}"):
        train.fit(tiny_model(), small_digits(24, False), None, recipe(max_steps=2), out_dir=folder, resume=True)


@pytest.mark.parametrize("case", RESUME_DAMAGE)
def test_damaged_training_state_is_a_checkpoint_error_on_resume(tmp_path, case):
    change, message = RESUME_DAMAGE[case]
    folder = crafted(tmp_path, "bad", change)
    with pytest.raises(train.CheckpointError, match=f"{folder}.*{message}"):
        train.fit(tiny_model(), small_digits(24, False), None, recipe(max_steps=2), out_dir=folder, resume=True)


def test_a_folder_where_the_checkpoint_belongs_is_a_checkpoint_error(tmp_path):
    (tmp_path / train.CHECKPOINT_NAME).mkdir()
    with pytest.raises(train.CheckpointError, match="is a folder"):
        train.load_model(tmp_path / train.CHECKPOINT_NAME)
    with pytest.raises(train.CheckpointError, match="is a folder"):  # not a fresh start that fails at its first save
        train.fit(tiny_model(), small_digits(24, False), None, recipe(max_steps=1), out_dir=tmp_path, resume=True)


MEASURE_LOAD = """
import resource, sys, torch
from ssog_lab import train
state = torch.load(sys.argv[1], weights_only=True)  # everything but the model's allocation
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    train.load_model(sys.argv[1])
except train.CheckpointError as err:
    print("refused", err, file=sys.stderr)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""


def test_a_config_that_claims_a_huge_model_is_refused_before_its_memory_is_taken(tmp_path):
    # image_size 16000 at patch 4 and dim 16: a 4000² positional table, 1 GB of float32, would be allocated
    # (and filled) by building the model before comparing its shapes with the file's small weights.
    folder = crafted(tmp_path, "huge", lambda s: s["model_config"].update(image_size=16000))
    result = subprocess.run([sys.executable, "-c", MEASURE_LOAD, str(folder / train.CHECKPOINT_NAME)], cwd=ROOT,
                            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    assert "refused" in result.stderr and "pos_embed" in result.stderr
    assert int(result.stdout) < 200, f"{result.stdout} MB more while loading"


def test_divergence_under_dopri5_is_a_diverged_error(tmp_path, capsys):
    def ode_model():
        torch.manual_seed(0)
        return build_model("nano", depth="ode", mixer="ssog-steered", ode_method="dopri5", **TINY)

    digits = small_digits(24, False)
    with pytest.raises(train.DivergedError, match="not finite"):
        train.fit(ode_model(), digits, None, recipe(lr=1e30, warmup_epochs=0.0, save_every=1), out_dir=tmp_path / "a")
    poisoned = data.ImageDataset(digits.images.float() / 255, digits.labels, digits.transform)
    poisoned.images[train.epoch_order(0, 0, len(poisoned))[9]] = float("nan")  # in the second batch
    with pytest.raises(train.DivergedError, match="step 2"):
        train.fit(ode_model(), poisoned, None, recipe(save_every=1), out_dir=tmp_path / "b")
    assert train.read_checkpoint(tmp_path / "b" / train.CHECKPOINT_NAME)["position"]["step"] == 1
    assert train.main([*CLI, "--depth", "ode", "--set", "ode_method=dopri5", "--lr", "1e30", "--warmup-epochs", "0",
                       "--max-steps", "3", "--out", str(tmp_path / "cli")]) == 1
    err = capsys.readouterr().err
    assert "diverged" in err and "Traceback" not in err


@pytest.fixture
def small_disk(tmp_path):
    """A real 512 KiB tmpfs (root only); skipped where mounting is not allowed."""
    mount = tmp_path / "disk"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)], capture_output=True,
                            text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({result.stderr.strip() or 'not root'}): no real full disk to test")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def fill(disk: Path, leave: int) -> Path:
    """Fill `disk` up to `leave` free bytes with one file; deleting that file frees the space again."""
    stats = os.statvfs(disk)
    filler = disk / "filler"
    filler.write_bytes(b"\0" * max(0, stats.f_bavail * stats.f_frsize - leave))
    return filler


def test_a_full_disk_is_a_message_naming_the_file_and_leaves_no_lock_behind(small_disk, tmp_path, capsys):
    filler = fill(small_disk, 0)
    run = small_disk / "run"
    assert train.main([*CLI, "--out", str(run)]) == 2
    err = capsys.readouterr().err
    assert f"cannot write {run / '.lock'}: No space left on device" in err and "Traceback" not in err
    filler.unlink()
    filler = fill(small_disk, 8192)  # a page for the lock, one for metrics.csv's header: none for the first record
    assert train.main([*CLI, "--out", str(run), "--log-every", "1"]) == 2
    err = capsys.readouterr().err
    assert f"cannot write {run / 'metrics.jsonl'}: No space left on device" in err and "Traceback" not in err
    filler.unlink()
    filler = fill(small_disk, 48 * 1024)  # room for the lock and the metrics, not for a 90 KB checkpoint
    assert train.main([*CLI, "--out", str(run), "--overwrite"]) == 2  # a run without a checkpoint is no run yet
    err = capsys.readouterr().err
    assert f"cannot write {run / train.CHECKPOINT_NAME}: No space left on device" in err and "Traceback" not in err
    assert not (run / train.CHECKPOINT_NAME).exists() and not (run / ".lock").exists()
    assert [p.name for p in run.iterdir() if p.name.endswith(".tmp")] == []
    # The export after the whole training: the run's files stay, the export is named.
    filler.unlink()
    filler = fill(small_disk, 8 * 1024)  # less than the 26 KB export
    assert train.main([*CLI, "--out", str(tmp_path / "run"), "--export", str(small_disk / "w.pt")]) == 2
    err = capsys.readouterr().err
    assert f"cannot write {small_disk / 'w.pt'}: No space left on device" in err and "Traceback" not in err
    assert train.read_checkpoint(tmp_path / "run" / train.CHECKPOINT_NAME)["position"]["step"] == 1
    filler.unlink()  # space again: nothing left behind blocks the next run, and the finished run can be exported
    assert train.main([*CLI, "--out", str(tmp_path / "run"), "--resume", "--export", str(tmp_path / "w.pt")]) == 0
    assert train.load_model(tmp_path / "w.pt")[1].dim == 16
    assert train.main([*CLI, "--out", str(run), "--overwrite", "--export", str(small_disk / "w.pt")]) == 0
    assert train.load_model(small_disk / "w.pt")[1].dim == 16


KILL_AT = """
import os, signal, sys
from ssog_lab import train
real_replace = os.replace

def replace(src, dst):  # SIGKILL between writing a file's temp and moving it into place
    if str(dst).endswith(sys.argv[1]):
        os.kill(os.getpid(), signal.SIGKILL)
    real_replace(src, dst)

os.replace = replace
sys.exit(train.main(sys.argv[2:]))
"""


@pytest.mark.parametrize("victim", ["summary.json", "w.json", "w.pt"])
def test_a_sigkill_while_writing_the_summary_or_export_leaves_no_half_file(tmp_path, victim):
    run, export = tmp_path / "run", tmp_path / "w.pt"
    argv = [*CLI, "--out", str(run)]
    killed = subprocess.run([sys.executable, "-c", KILL_AT, victim, *argv, "--export", str(export)], cwd=ROOT,
                            capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert killed.returncode == -signal.SIGKILL
    written = {p.name for p in [*run.iterdir(), *tmp_path.iterdir()] if p.is_file()}
    assert "summary.json" not in written  # the run's "finished" mark comes last, so a sweep runs it again
    assert victim not in written and f".{victim}.tmp" in written  # the whole temp, never a half target
    assert ("w.pt" in written) == (victim != "w.pt")  # the export's weights come before its .json
    assert train.main([*argv, "--resume"]) == 0
    assert json.loads((run / "summary.json").read_text())["dataset"] == "mnist5k"
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint.pt", "metrics.csv", "metrics.jsonl", "summary.json"]
