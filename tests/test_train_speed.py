"""scripts/train_speed.py: the paired training-step ratios of every mixer against SDPA, and its results file."""

import shlex
import sys

import pytest


@pytest.fixture(scope="module")
def train_speed(load_script):
    return load_script("train_speed")


def test_each_mixer_gets_a_paired_speed_and_its_page_faults(train_speed, monkeypatch):
    preset, overrides, _ = train_speed.CASES["nano7"]
    monkeypatch.setitem(train_speed.CASES, "nano7", (preset, overrides, 8))  # the case's model, a small batch
    rows = train_speed.measure("nano7", ["sdpa", "ssog"], {}, rounds=2, warmup=1)
    assert [(r["case"], r["mixer"]) for r in rows] == [("nano7", "sdpa"), ("nano7", "ssog")]
    assert rows[0]["speed"] == 1.0  # the baseline against itself, round by round
    assert all(r["ms"] > 0 and r["images_per_s"] == pytest.approx(8 / (r["ms"] / 1e3)) for r in rows)
    assert all(isinstance(r["faults"], (int, float)) for r in rows)


def test_the_results_file_names_its_command_environment_and_host_and_keeps_it(train_speed, tmp_path, monkeypatch):
    out = tmp_path / "speed.md"
    rows = [dict(case="nano7", mixer="sdpa", ms=2.0, images_per_s=64e3, speed=1.0, faults=3),
            dict(case="nano7", mixer="ssog", ms=1.0, images_per_s=128e3, speed=2.0, faults=0)]
    monkeypatch.setattr(train_speed, "measure", lambda case, mixers, *_: [r for r in rows if r["mixer"] in mixers])
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "4294967296")  # glibc's settings are part of the command
    argv = ["train_speed.py", "--case", "nano7", "--mixer", "sdpa", "ssog", "--out", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    train_speed.main()
    text = out.read_text()
    command = f"python scripts/train_speed.py --case nano7 --mixer sdpa ssog --out {shlex.quote(str(out))}"
    assert command in text and "Host: " in text and "`MALLOC_TRIM_THRESHOLD_=4294967296 OMP_NUM_THREADS=" in text
    assert "| nano7 | ssog | 1.0 | 128000.0 | 2.00 | 0 |" in text
    with pytest.raises(SystemExit, match="--overwrite"):
        train_speed.main()
    assert out.read_text() == text
