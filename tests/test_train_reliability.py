"""Training never destroys work: atomic checkpoints under a crash or a SIGKILL, corrupt and empty files named,
locked and existing run folders refused, bad recipes and flags rejected by name before any write, a diverging
run stopped before it saves."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from train_helpers import DDP_ARGV, recipe, small_digits, step_losses, tiny_model

from ssog_lab import data, train

ROOT = Path(__file__).resolve().parents[1]


def test_interrupted_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    model = tiny_model()
    train.fit(model, small_digits(24, False), None, recipe(max_steps=1), out_dir=tmp_path)
    path = tmp_path / train.CHECKPOINT_NAME
    before = path.read_bytes()
    real_save = torch.save

    def crash_midway(obj, f):
        real_save(obj, f)
        f.truncate(f.tell() // 2)  # half the file is on disk when the process "dies"
        raise KeyboardInterrupt("simulated crash during torch.save")

    monkeypatch.setattr(torch, "save", crash_midway)
    with pytest.raises(KeyboardInterrupt):
        train.fit(model, small_digits(24, False), None, recipe(max_steps=2), out_dir=tmp_path, resume=True)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    assert train.read_checkpoint(path)["position"]["step"] == 1


def test_corrupt_checkpoint_names_the_file(tmp_path):
    train.fit(tiny_model(), small_digits(24, False), None, recipe(max_steps=1), out_dir=tmp_path / "run")
    good = tmp_path / "run" / train.CHECKPOINT_NAME
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(good.read_bytes()[:5000])
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(os.urandom(3000))
    for path in (truncated, garbage):
        with pytest.raises(train.CheckpointError, match="corrupt or truncated") as info:
            train.load_model(path)
        assert str(path) in str(info.value)
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(2)}, foreign)
    with pytest.raises(train.CheckpointError, match="not an ssog_lab checkpoint"):
        train.load_model(foreign)
    state = torch.load(good, weights_only=True)
    state["model"]["head.weight"] = torch.zeros(3, 3)
    mismatched = tmp_path / "mismatched.pt"
    torch.save(state, mismatched)
    with pytest.raises(train.CheckpointError, match="do not fit"):
        train.load_model(mismatched)
    (tmp_path / "run" / train.CHECKPOINT_NAME).write_bytes(garbage.read_bytes())
    with pytest.raises(train.CheckpointError, match=str(tmp_path / "run")):
        train.fit(tiny_model(), small_digits(24, False), None, recipe(), out_dir=tmp_path / "run", resume=True)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        train.load_model(tmp_path / "absent.pt")


def test_resume_refuses_a_different_recipe(tmp_path):
    train.fit(tiny_model(), small_digits(24, False), None, recipe(max_steps=1), out_dir=tmp_path)
    with pytest.raises(train.CheckpointError, match="lr"):
        train.fit(tiny_model(), small_digits(24, False), None, recipe(lr=1.0), out_dir=tmp_path, resume=True)


def test_cli_errors_are_clear(tmp_path, capsys):
    assert train.main(["--dataset", "cifar100", "--data-dir", str(tmp_path)]) == 2
    assert data.CIFAR100_URL in capsys.readouterr().err
    assert train.main(["--preset", "huge", "--out", str(tmp_path / "x")]) == 2
    assert "preset" in capsys.readouterr().err
    assert train.main(["--precision", "bf16", "--device", "cpu", "--max-steps", "1", "--out", str(tmp_path / "y")]) == 2
    assert "needs a CUDA device" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        train.main(["--help"])
    assert info.value.code == 0 and "--resume" in capsys.readouterr().out


def wait_for_step(path: Path, step: int, process: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read()[-3000:]
        if path.is_file():
            try:
                if train.read_checkpoint(path)["position"]["step"] >= step:
                    return
            except train.CheckpointError:  # only a partial file would be: replace is atomic
                raise
        time.sleep(0.05)
    raise TimeoutError(f"no checkpoint at step {step} after {timeout} s")


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_equals_the_uninterrupted_run(tmp_path):
    # Batch 128 and 30 steps, each saved: slow enough to be killed in the middle.
    argv = [*DDP_ARGV[:10], "--max-steps", "30", "--save-every", "1", "--log-every", "2", "--no-progress"]
    assert train.main([*argv, "--out", str(tmp_path / "straight")]) == 0
    # The killed run computes with this process's thread count: another count changes the order of the float
    # reductions, and the comparison below is bit for bit.
    env = {**os.environ, "OMP_NUM_THREADS": str(torch.get_num_threads()), "PYTHONPATH": str(ROOT)}
    killed = tmp_path / "killed"
    process = subprocess.Popen([sys.executable, "-m", "ssog_lab", "train", *argv, "--out", str(killed)], cwd=ROOT,
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_step(killed / train.CHECKPOINT_NAME, 3, process)
        process.send_signal(signal.SIGKILL)  # no cleanup runs: the lock and maybe a temp file stay behind
    finally:
        process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL
    assert (killed / ".lock").exists()
    (killed / ".checkpoint.pt.tmp").write_bytes(b"")  # what a kill inside a save leaves
    assert 3 <= train.read_checkpoint(killed / train.CHECKPOINT_NAME)["position"]["step"] < 30
    with pytest.warns(UserWarning, match="stale lock"):
        assert train.main([*argv, "--out", str(killed), "--resume"]) == 0
    a = train.read_checkpoint(tmp_path / "straight" / train.CHECKPOINT_NAME)
    b = train.read_checkpoint(killed / train.CHECKPOINT_NAME)
    assert a["position"] == b["position"] and all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert step_losses(killed) == step_losses(tmp_path / "straight")
    assert sorted(p.name for p in killed.iterdir()) == ["checkpoint.pt", "metrics.csv", "metrics.jsonl",
                                                        "summary.json"]


def test_zero_byte_checkpoint_is_a_checkpoint_error(tmp_path):
    empty = tmp_path / train.CHECKPOINT_NAME
    empty.write_bytes(b"")
    with pytest.raises(train.CheckpointError, match="empty") as info:
        train.load_model(empty)
    assert str(empty) in str(info.value)
    with pytest.raises(train.CheckpointError, match="empty"):
        train.fit(tiny_model(), small_digits(24, False), None, recipe(), out_dir=tmp_path, resume=True)


def test_leftover_temp_files_of_killed_saves_are_removed(tmp_path):
    train.fit(tiny_model(), small_digits(24, False), None, recipe(max_steps=1), out_dir=tmp_path)
    leftovers = [tmp_path / ".checkpoint.pt.tmp"]
    for p in leftovers:
        p.write_bytes(b"partial")
    train.fit(tiny_model(), small_digits(24, False), None, recipe(max_steps=2), out_dir=tmp_path, resume=True)
    assert not any(p.exists() for p in leftovers)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt", "metrics.csv", "metrics.jsonl"]


def run_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_an_existing_run_is_never_clobbered(tmp_path, capsys):
    train.fit(tiny_model(), small_digits(24, False), None, recipe(max_steps=2), out_dir=tmp_path)
    before = run_files(tmp_path)
    with pytest.raises(ValueError, match="already holds a run"):
        train.fit(tiny_model(), small_digits(24, False), None, recipe(max_steps=1), out_dir=tmp_path)
    cli = ["--set", "dim=16", "--set", "layers=1", "--set", "ssog_heads=2", "--max-steps", "1", "--no-progress",
           "--out", str(tmp_path)]
    assert train.main(cli) == 2
    assert "--resume" in capsys.readouterr().err
    assert train.main([*cli, "--resume", "--label-smoothing", "2"]) == 2  # a bad recipe fails before any write
    assert "label_smoothing" in capsys.readouterr().err
    assert run_files(tmp_path) == before


def test_overwrite_replaces_the_earlier_run(tmp_path):
    train.fit(tiny_model(), small_digits(24, False), None, recipe(max_steps=2), out_dir=tmp_path)
    history = train.fit(tiny_model(), small_digits(24, False), None, recipe(max_steps=1), out_dir=tmp_path,
                        overwrite=True)
    assert [r["step"] for r in history] == [1]
    assert train.read_checkpoint(tmp_path / train.CHECKPOINT_NAME)["position"]["step"] == 1
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 1
    with pytest.raises(ValueError, match="exclude each other"):
        train.fit(tiny_model(), small_digits(24, False), None, recipe(), out_dir=tmp_path, resume=True,
                  overwrite=True)


HOLD_LOCK = "import sys, time; from pathlib import Path; from ssog_lab.train import folder; " \
            "folder.RunLock(Path(sys.argv[1])).acquire(); print('held', flush=True); time.sleep(600)"


def test_a_locked_run_folder_is_refused_and_a_stale_lock_taken_over(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(ValueError, match=f"in use by process {holder.pid} on {socket.gethostname()}"):
            train.fit(tiny_model(), small_digits(24, False), None, recipe(max_steps=1), out_dir=tmp_path)
        assert not (tmp_path / "metrics.jsonl").exists()
    finally:
        holder.kill()  # SIGKILL: no cleanup runs, the lock file stays with the dead process's name
        holder.wait()
    lock = tmp_path / ".lock"
    assert lock.read_text() == f"{socket.gethostname()} {holder.pid}\n"
    with pytest.warns(UserWarning, match=f"stale lock .* process {holder.pid}"):
        train.fit(tiny_model(), small_digits(24, False), None, recipe(max_steps=1), out_dir=tmp_path)
    assert not lock.exists()
    lock.write_bytes(b"")  # what a full disk left: the file was made, its content never written
    train.fit(tiny_model(), small_digits(24, False), None, recipe(max_steps=2), out_dir=tmp_path, resume=True)
    assert not lock.exists()


@pytest.mark.parametrize("field, value", [("lr", float("inf")), ("lr", float("nan")), ("lr", 0.0), ("lr", -1e-3),
                                          ("weight_decay", float("nan")), ("weight_decay", -0.1),
                                          ("weight_decay", float("inf")), ("warmup_epochs", float("inf")),
                                          ("warmup_epochs", float("nan")), ("warmup_epochs", -1.0),
                                          ("label_smoothing", 1.0), ("label_smoothing", float("nan")),
                                          ("grad_clip", float("nan")), ("grad_clip", 0.0),
                                          ("min_lr_ratio", 1.5), ("atom_lr_scale", 0.0),
                                          ("atom_lr_scale", float("inf")), ("validation_fraction", 0.5),
                                          ("validation_fraction", -0.1), ("epochs", 0), ("batch_size", True),
                                          ("epochs", 2.5), ("precision", "fp8")])
def test_bad_recipe_values_are_rejected_by_name(field, value):
    with pytest.raises(ValueError, match=field):
        train.TrainConfig(**{field: value})


def test_a_diverging_run_stops_before_saving_and_keeps_the_last_good_checkpoint(tmp_path):
    digits = small_digits(24, False)
    poisoned = data.ImageDataset(digits.images.float() / 255, digits.labels, digits.transform)
    order = train.epoch_order(0, 0, len(poisoned))
    poisoned.images[order[16]] = float("nan")  # in the third batch of epoch 0
    train.fit(tiny_model(), poisoned, None, recipe(save_every=1, max_steps=2), out_dir=tmp_path)
    before = (tmp_path / train.CHECKPOINT_NAME).read_bytes()
    with pytest.raises(train.DivergedError, match="step 3"):
        train.fit(tiny_model(), poisoned, None, recipe(save_every=1), out_dir=tmp_path, resume=True)
    assert (tmp_path / train.CHECKPOINT_NAME).read_bytes() == before
    assert not (tmp_path / ".lock").exists()
    # lr 1e30: the weights blow up after the first step; nothing non-finite is ever written.
    with pytest.raises(train.DivergedError, match="not finite"):
        train.fit(tiny_model(), digits, None, recipe(lr=1e30, warmup_epochs=0.0, save_every=1), out_dir=tmp_path / "x")
    saved = tmp_path / "x" / train.CHECKPOINT_NAME
    if saved.exists():
        assert all(torch.isfinite(v).all() for v in train.read_checkpoint(saved)["model"].values())


def test_cli_bad_flags_and_io_errors_are_messages_before_any_training(tmp_path, capsys, monkeypatch):
    cli = ["--set", "dim=16", "--set", "layers=1", "--set", "ssog_heads=2", "--max-steps", "1", "--no-progress"]
    (tmp_path / "file").write_text("")
    cases = [(["--warmup-epochs", "inf"], "warmup_epochs"), (["--warmup-epochs", "nan"], "warmup_epochs"),
             (["--lr", "1e400"], "lr"), (["--grad-clip", "nan"], "grad_clip"), (["--device", "foo"], "device"),
             (["--out", str(tmp_path / "file" / "x")], "is a file"),
             (["--export", str(tmp_path / "file" / "w.pt")], "--export folder")]
    if not torch.cuda.is_available():
        cases.append((["--device", "cuda"], "needs a CUDA GPU"))
    for flags, message in cases:
        assert train.main([*cli, "--out", str(tmp_path / "run"), *flags]) == 2, flags
        assert message in capsys.readouterr().err, flags
        assert not (tmp_path / "run").exists(), flags

    def disk_full(obj, path):
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(train.checkpoint, "atomic_save", disk_full)
    assert train.main([*cli, "--out", str(tmp_path / "full")]) == 2
    err = capsys.readouterr().err
    assert "error: cannot write" in err and "No space left" in err and "Traceback" not in err
