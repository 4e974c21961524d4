"""Training loop: exact resume, atomic checkpoints, clear errors, data parallel through torchrun, and the
shipped checkpoint."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ssog_lab import data, train
from ssog_lab.models import build_model

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "data" / "checkpoints" / "nano_ssog_steered_mnist5k.pt"
TINY = dict(in_chans=1, num_classes=10, dim=16, layers=2, ssog_heads=2)


def small_digits(n: int, augment: bool) -> data.ImageDataset:
    """n training digits spread over all classes (the split is sorted by class)."""
    full = data.mnist5k("train", augment=augment)
    pick = torch.arange(0, len(full), len(full) // n)[:n]
    return data.ImageDataset(full.images[pick], full.labels[pick], full.transform)


def tiny_model(seed: int = 0):
    torch.manual_seed(seed)
    return build_model("nano", depth="discrete", mixer="ssog-steered", **TINY)


def recipe(**changes) -> train.TrainConfig:
    # 24 images, batch 8: 3 steps per epoch, so 4 steps cross an epoch end (test evaluation, checkpoint).
    return train.TrainConfig(**{**dict(epochs=2, batch_size=8, warmup_epochs=0.5, log_every=1, progress=False),
                                **changes})


def test_four_steps_equal_two_plus_resume_plus_two(tmp_path):
    train_set, test_set = small_digits(24, augment=True), small_digits(8, augment=False)
    straight = tiny_model()
    history = train.fit(straight, train_set, test_set, recipe(max_steps=4), out_dir=tmp_path / "a")
    interrupted = tiny_model()
    train.fit(interrupted, train_set, test_set, recipe(max_steps=2), out_dir=tmp_path / "b")
    resumed = tiny_model(seed=123)  # different initial weights: everything must come from the checkpoint
    resumed_history = train.fit(resumed, train_set, test_set, recipe(max_steps=4), out_dir=tmp_path / "b",
                                resume=True)
    a, b = straight.state_dict(), resumed.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["head.weight"], interrupted.state_dict()["head.weight"]), "steps 3-4 must train"
    def trajectory(records):  # everything but the timings
        return [(r["kind"], r["step"], r.get("loss"), r.get("test_accuracy"), r["lr"]) for r in records]

    assert trajectory(resumed_history) == trajectory(history)
    # The logs of the resumed run hold each step once, in order.
    lines = [json.loads(x) for x in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines if r["kind"] == "step"] == [1, 2, 3, 4]
    assert [r["kind"] for r in lines].count("epoch") == 1
    csv_rows = (tmp_path / "b" / "metrics.csv").read_text().splitlines()
    assert csv_rows[0].split(",") == list(train.LOG_COLUMNS) and len(csv_rows) == 1 + len(lines)


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
    assert train.main(["--amp", "bf16", "--device", "cpu", "--max-steps", "1", "--out", str(tmp_path / "y")]) == 2
    assert "needs a CUDA device" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        train.main(["--help"])
    assert info.value.code == 0 and "--resume" in capsys.readouterr().out


def test_on_log_records_and_evaluate(tmp_path):
    train_set, test_set = small_digits(24, False), small_digits(8, False)
    seen = []
    model = tiny_model()
    history = train.fit(model, train_set, test_set, recipe(epochs=1), on_log=seen.append)
    assert seen == history and [r["kind"] for r in seen] == ["step"] * 3 + ["epoch"]
    assert set(seen[0]) == {"kind", "epoch", "step", "loss", "accuracy", "lr", "images_per_s", "time_s"}
    # Warm-up: 0.5 epoch = 2 steps (rounded), so the first step runs at half the peak rate.
    assert seen[0]["lr"] == pytest.approx(recipe().lr / 2)
    with torch.no_grad():
        images = torch.stack([test_set[i][0] for i in range(len(test_set))])
        expected = (model(images).argmax(-1) == test_set.labels).float().mean().item()
    assert seen[-1]["test_accuracy"] == pytest.approx(expected)
    assert train.evaluate(model, test_set, batch_size=3) == pytest.approx(expected)


@pytest.mark.slow
def test_two_process_gloo_step_equals_one_process_on_the_whole_batch(tmp_path):
    argv = ["--preset", "nano", "--mixer", "ssog-steered", "--set", "dim=16", "--set", "layers=2",
            "--set", "ssog_heads=2", "--batch-size", "16", "--max-steps", "2", "--no-progress"]
    assert train.main([*argv, "--out", str(tmp_path / "single")]) == 0
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                             "-m", "ssog_lab", "train", *argv, "--out", str(tmp_path / "ddp")],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    single = train.read_checkpoint(tmp_path / "single" / train.CHECKPOINT_NAME)
    ddp = train.read_checkpoint(tmp_path / "ddp" / train.CHECKPOINT_NAME)
    assert len(ddp["rng"]) == 2 and ddp["position"]["step"] == 2
    start = tiny_model().state_dict()  # same seed as the CLI: training moved the weights
    assert not torch.equal(single["model"]["head.weight"], start["head.weight"])
    for key, value in single["model"].items():
        torch.testing.assert_close(ddp["model"][key], value, rtol=1e-5, atol=1e-6, msg=key)
    # Only rank 0 wrote: one metrics file, one summary line, no second checkpoint.
    assert sorted(p.name for p in (tmp_path / "ddp").iterdir()) == ["checkpoint.pt", "metrics.csv",
                                                                     "metrics.jsonl", "summary.json"]


def test_shipped_checkpoint_scores_at_least_95_percent():
    assert SHIPPED.stat().st_size < 5 * 2**20
    model, config = train.load_model(SHIPPED)
    assert (config.depth, config.mixer, config.in_chans, config.num_classes) == ("discrete", "ssog-steered", 1, 10)
    reference = build_model("nano", depth="discrete", mixer="ssog-steered", in_chans=1, num_classes=10).config
    assert config == reference
    accuracy = train.evaluate(model, data.mnist5k("test"))
    assert accuracy >= 0.95
    metadata = json.loads(SHIPPED.with_suffix(".json").read_text())
    assert metadata["test_accuracy"] == pytest.approx(accuracy, abs=1e-6)
