"""The Fashion-MNIST sweep script without training: command generation, the equal tuning budget, resume
skipping, the parallel executor (with a stand-in command) and the report on fabricated summary.json files."""

import importlib.util
import json
import math
import shlex
import statistics
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "fashion_sweep.py"
spec = importlib.util.spec_from_file_location("fashion_sweep", SCRIPT)
sweep = importlib.util.module_from_spec(spec)
sys.modules["fashion_sweep"] = sweep
spec.loader.exec_module(sweep)


def flag(argv, name):
    """Every value given to `name` in argv (--set gives several)."""
    return [argv[i + 1] for i, a in enumerate(argv) if a == name]


def write_summary(root, run, **fields):
    folder = root / run.phase / run.name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "summary.json").write_text(json.dumps({"parameters": 1000, "epochs_done": 8, "train_seconds": 80.0,
                                                     **fields}))


def dry_run(root, capsys, *extra):
    assert sweep.main(["run", "--dry-run", "--runs", str(root), *extra]) == 0
    return [line for line in capsys.readouterr().out.splitlines() if " -m ssog_lab train " in line]


def test_tuning_gives_every_mixer_the_same_budget_on_the_validation_split():
    runs = sweep.tune_runs(sweep.Recipe(), 6, 0.1, Path("/fm"))
    assert [r.labels["mixer"] for r in runs] == [m for m in sweep.MIXERS for _ in range(6)]
    for mixer in sweep.MIXERS:
        mine = [r for r in runs if r.labels["mixer"] == mixer]
        hypers = [tuple(sorted((k, v) for k, v in r.labels.items() if k not in ("mixer", "trial"))) for r in mine]
        assert len(set(hypers)) == 6, "trials must be distinct"
        for r in mine:
            assert flag(r.argv, "--validation-fraction") == ["0.1"] and flag(r.argv, "--seed") == ["0"]
            assert flag(r.argv, "--dataset") == ["fashion-mnist"] and flag(r.argv, "--data-dir") == ["/fm"]
            assert {"image_size=28", "patch_size=4"} <= set(flag(r.argv, "--set"))
            assert flag(r.argv, "--depth") == ["discrete"] and r.train_images == 54_000
            assert bool(flag(r.argv, "--atom-lr-scale")) == (mixer in sweep.SSOG_MIXERS)
    assert sweep.trials("sdpa", 6) == sweep.trials("sdpa", 6), "the draw is fixed"
    assert len(sweep.space("ssog")) == 36 and len(sweep.trials("ssog", 6)) == 6
    with pytest.raises(ValueError, match="trials"):
        sweep.trials("ssog", 7)  # more than sdpa's grid: the budgets would differ


def test_dry_run_prints_the_tuning_commands_and_writes_nothing(tmp_path, capsys):
    commands = dry_run(tmp_path / "runs", capsys)
    assert len(commands) == 4 * 6 and not (tmp_path / "runs").exists()
    argv = shlex.split(commands[0])
    assert argv[:4] == [sys.executable, "-m", "ssog_lab", "train"]
    assert flag(argv, "--out") == [str(tmp_path / "runs" / "tune" / "sdpa" / "t0")] and "--resume" not in argv


def test_resume_skips_finished_runs_and_picks_the_best_validation_trial(tmp_path, capsys):
    root = tmp_path / "runs"
    tuning = sweep.tune_runs(sweep.Recipe(), 6, 0.1, sweep.data.FASHION_MNIST_ROOT)
    for run in tuning[:5]:
        write_summary(root, run, val_accuracy=0.5)
    assert len(dry_run(root, capsys)) == 24 - 5
    winners = {}
    for run in tuning:  # trial 3 of each mixer wins
        write_summary(root, run, val_accuracy=0.9 if run.labels["trial"] == 3 else 0.5 + 0.01 * run.labels["trial"])
        if run.labels["trial"] == 3:
            winners[run.labels["mixer"]] = run
    commands = [shlex.split(c) for c in dry_run(root, capsys)]
    assert len(commands) == 4 * 3 * 3 + 4 * 3 + 2  # main: mixers × depths × seeds; patch2: mixers × seeds; horizon
    for argv in commands:
        mixer, out = flag(argv, "--mixer")[0], Path(flag(argv, "--out")[0])
        tuned = winners[mixer].argv
        assert flag(argv, "--lr") == flag(tuned, "--lr") and flag(argv, "--atom-lr-scale") == flag(tuned,
                                                                                                   "--atom-lr-scale")
        assert {s for s in flag(tuned, "--set") if s.split("=")[0] in ("heads", "ssog_heads", "atoms")} <= \
            set(flag(argv, "--set"))
        assert not flag(argv, "--validation-fraction"), "final runs train on the whole training set"
        phase = out.parts[-4]
        assert f"patch_size={2 if phase == 'patch2' else 4}" in flag(argv, "--set")
        epochs = {"main": sweep.Recipe.epochs, "patch2": sweep.PATCH2_EPOCHS, "horizon": 2 * sweep.Recipe.epochs}[phase]
        assert flag(argv, "--epochs") == [str(epochs)]
    # A run interrupted with a checkpoint is resumed; a finished one is skipped.
    finals = sweep.final_runs(sweep.Recipe(), sweep.Recipe(epochs=sweep.PATCH2_EPOCHS), [0, 1, 2],
                              sweep.best_hyper(root, tuning),
                              sweep.data.FASHION_MNIST_ROOT)
    (root / "main" / finals[0].name).mkdir(parents=True)
    (root / "main" / finals[0].name / "checkpoint.pt").write_bytes(b"")
    write_summary(root, finals[1], test_accuracy=0.8)
    (root / "main" / finals[2].name).mkdir(parents=True)  # died before its first checkpoint
    (root / "main" / finals[2].name / "metrics.jsonl").write_text("")
    commands = [shlex.split(c) for c in dry_run(root, capsys)]
    assert len(commands) == 50 - 1
    by_out = {flag(a, "--out")[0]: a for a in commands}
    first, third = by_out[str(root / "main" / finals[0].name)], by_out[str(root / "main" / finals[2].name)]
    assert "--resume" in first and "--overwrite" not in first
    assert "--overwrite" in third and "--resume" not in third
    assert not {"--resume", "--overwrite"} & set(by_out[str(root / "main" / finals[3].name)])
    assert str(root / "main" / finals[1].name) not in by_out


def test_executor_runs_two_at_a_time_logs_and_counts_failures(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    runs = [sweep.Run("main", f"discrete/sdpa/s{i}", [], 60_000, {}) for i in range(3)]
    # A stand-in for the train command: write summary.json, or fail for seed 2.
    script = ("import json, pathlib, sys, time; out = pathlib.Path(sys.argv[1]); time.sleep(0.2); "
              "sys.exit(3) if out.name == 's2' else (out / 'summary.json').write_text(json.dumps({'ok': 1}))")
    monkeypatch.setattr(sweep, "command", lambda r, run: [sys.executable, "-c", script, str(r / run.phase / run.name)])
    lines = []
    assert sweep.execute(root, runs, 2, False, lines.append) == 1
    assert (root / "main/discrete/sdpa/s0/summary.json").is_file() and (root / "main/discrete/sdpa/s1/summary.json"
                                                                       ).is_file()
    assert any("FAILED (exit 3) main/discrete/sdpa/s2" in line for line in lines)
    assert json.loads((root / "main/discrete/sdpa/s0/run.json").read_text())["train_images"] == 60_000
    assert json.loads((root / "main/discrete/sdpa/s2/failed.json").read_text()) == {"returncode": 3}
    lines.clear()
    assert sweep.execute(root, runs, 2, False, lines.append) == 0  # done and failed runs are not run again
    assert lines[0].endswith("0 runs to do, 3 done or failed")
    assert sweep.execute(root, runs, 2, False, lines.append, retry_failed=True) == 1
    assert any("1 runs to do, 2 done or failed" in line for line in lines)


def test_a_failed_tuning_trial_ranks_last(tmp_path):
    root = tmp_path / "runs"
    tuning = sweep.tune_runs(sweep.Recipe(), 6, 0.1, Path("/fm"))
    for run in tuning[1:]:
        write_summary(root, run, val_accuracy=0.5)
    assert sweep.best_hyper(root, tuning) is None, "a trial is still to run"
    (root / "tune" / tuning[0].name / "failed.json").parent.mkdir(parents=True)
    (root / "tune" / tuning[0].name / "failed.json").write_text('{"returncode": 2}')
    hyper = sweep.best_hyper(root, tuning)
    assert hyper["sdpa"] == sweep.trials("sdpa", 6)[1]  # the first finished trial wins the tie
    assert "failed (exit 2)" in sweep.report(root, tuning, [])


def test_report_tables_mean_sample_std_and_speed(tmp_path):
    root = tmp_path / "runs"
    tuning = sweep.tune_runs(sweep.Recipe(), 6, 0.1, Path("/fm"))
    for run in tuning:
        write_summary(root, run, val_accuracy=0.5 + 0.01 * run.labels["trial"])
    hyper = sweep.best_hyper(root, tuning)
    assert all(hyper[m] == sweep.trials(m, 6)[5] for m in sweep.MIXERS)
    finals = sweep.final_runs(sweep.Recipe(), sweep.Recipe(epochs=4), [0, 1, 2], hyper, Path("/fm"))
    accuracy = {}
    for run in finals:
        lab = run.labels
        acc = 0.80 + 0.01 * lab["seed"] + (0.05 if lab["mixer"] == "ssog" else 0)
        accuracy.setdefault((run.phase, lab["depth"], lab["mixer"]), []).append(100 * acc)
        write_summary(root, run, test_accuracy=acc, train_seconds=100.0 + lab["seed"])
    # A run with per-epoch rates in metrics.jsonl (e.g. resumed: train_seconds counts only the last process).
    patch2_sdpa = next(r for r in finals if r.phase == "patch2" and r.labels["mixer"] == "sdpa"
                       and r.labels["seed"] == 0)
    records = [{"kind": "step", "images_per_s": 1.0}, {"kind": "epoch", "images_per_s": 30.0},
               {"kind": "epoch", "images_per_s": 50.0}]
    (root / "patch2" / patch2_sdpa.name / "metrics.jsonl").write_text("\n".join(map(json.dumps, records)) + "\n")
    expected_patch2 = statistics.mean([40.0, *(60_000 * 8 / (100.0 + s) for s in (1, 2))])
    text = sweep.report(root, tuning, finals)
    patch2_table = text.split("## 28², patch 2")[1].split("## ")[0]
    patch2_sdpa_line = next(line for line in patch2_table.splitlines() if line.startswith("| discrete | sdpa |"))
    assert patch2_sdpa_line.strip("|").split("|")[7].strip() == f"{expected_patch2:.0f}"
    rows = {tuple(c.strip() for c in line.strip("|").split("|")[:2]): line for line in text.splitlines()
            if line.startswith("| ode ") or line.startswith("| discrete ")}
    values = accuracy[("main", "ode", "ssog")]
    mean, std = statistics.mean(values), statistics.stdev(values)
    assert std == pytest.approx(1.0)  # 80, 81, 82 (+5): sample std, not population std (0.816)
    line = rows[("ode", "ssog")]
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[2] == f"{mean:.2f} ± {std:.2f}" and cells[4] == "3" and cells[6] == "1,000"
    assert cells[3] == f"{5:.2f} ± {math.sqrt(2 / 3):.2f}"  # Δ vs SDPA and the std of that difference
    speed = statistics.mean(60_000 * 8 / (100.0 + s) for s in range(3))
    assert cells[7] == f"{speed:.0f}"
    assert rows[("ode", "sdpa")].split("|")[4].strip() == "—"
    assert "## 28², patch 2 (14×14 tokens)" in text and "## Tuning" in text
    assert text.count("| discrete |") == 4 + 4 + 2  # main, patch 2, horizon


def test_a_real_train_run_goes_through_the_executor_and_the_report(tmp_path):
    from test_data import fabricate_fashion_mnist

    fabricate_fashion_mnist(tmp_path, n_train=16, n_test=8)
    run = sweep.Run("main", "discrete/ssog/s0", [*sweep.model_argv("ssog", "discrete", 4, tmp_path), "--epochs", "1",
                                                 "--batch-size", "8", "--seed", "0"],
                    16, {"mixer": "ssog", "depth": "discrete", "patch": 4, "seed": 0})
    root = tmp_path / "runs"
    assert sweep.execute(root, [run], 1, False, lambda line: None) == 0
    summary = sweep.read_summary(root, run)
    assert summary["dataset"] == "fashion-mnist" and summary["epochs_done"] == 1
    [row] = sweep.group_rows(root, [run], ("depth", "mixer"))
    assert row["n"] == 1 and row["accuracy"][0] == pytest.approx(100 * summary["test_accuracy"])
    assert row["parameters"] == summary["parameters"] and row["images_per_s"] > 0
