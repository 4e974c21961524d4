"""The Fashion-MNIST sweep script without training: command generation, the equal tuning budget, resume
skipping, the parallel executor (with a stand-in command), the NFE and speed steps (tiny real models, stand-in
measurements) and the report on fabricated run folders, nfe.json and speed.csv files."""

import dataclasses
import json
import math
import shlex
import statistics
import sys
from pathlib import Path

import pytest
import torch

from ssog_lab import bench
from ssog_lab.experiments.fashion import measure, plan, sweep
from ssog_lab.experiments.fashion import report as rep
from ssog_lab.results.record import current_parameters


def flag(argv, name):
    """Every value given to `name` in argv (--set gives several)."""
    return [argv[i + 1] for i, a in enumerate(argv) if a == name]


def write_summary(root, run, **fields):
    """summary.json as the train CLI writes it (without the model config, as before #27) and the sweep's run.json."""
    folder = root / run.phase / run.name
    folder.mkdir(parents=True, exist_ok=True)
    depth, mixer = run.labels.get("depth", "discrete"), run.labels["mixer"]
    parameters = current_parameters(plan.model_config(run.labels, {"preset": "nano", "depth": depth, "mixer": mixer}))
    (folder / "summary.json").write_text(json.dumps({"preset": "nano", "depth": depth, "mixer": mixer,
                                                     "dataset": "fashion-mnist", "parameters": parameters,
                                                     "epochs_done": 8, "train_seconds": 80.0, **fields}))
    (folder / "run.json").write_text(json.dumps({"labels": run.labels}))


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
            assert bool(flag(r.argv, "--atom-lr-scale")) == (mixer in plan.SSOG_MIXERS)
    assert sweep.trials("sdpa", 6) == sweep.trials("sdpa", 6), "the draw is fixed"
    assert len(sweep.space("ssog")) == 36 and len(sweep.trials("ssog", 6)) == 6
    with pytest.raises(ValueError, match="trials"):
        sweep.trials("ssog", 7)  # more than sdpa's grid: the budgets would differ


@pytest.mark.parametrize("flags, named", [
    (["--validation-fraction", "0"], "--validation-fraction"),
    (["--validation-fraction", "0.5"], "--validation-fraction"),
    (["--seeds", "0", "0"], "--seeds"), (["--seeds", "-1"], "--seeds"), (["--epochs", "0"], "--epochs"),
    (["--patch2-epochs", "0"], "--patch2-epochs"), (["--speed-batch", "0"], "--speed-batch"),
    (["--trials", "0"], "--trials"), (["--jobs", "0"], "--jobs")])
def test_bad_sweep_flags_stop_before_anything_runs(tmp_path, capsys, flags, named):
    with pytest.raises(SystemExit) as stopped:
        sweep.main(["run", "--runs", str(tmp_path / "runs"), *flags])
    error = capsys.readouterr().err.splitlines()[-1]  # the usage line above it names every flag
    assert stopped.value.code == 2 and "error: " in error and named in error
    assert not (tmp_path / "runs").exists()


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
    varied = [(phase, key, m) for phase, (key, _, values) in sweep.VARIATIONS.items() for m, options in values.items()
              for value in options if value != winners[m].labels.get(key)]  # values the tuning did not pick
    assert len(varied) >= 2
    # main: mixers × depths × seeds; patch2: mixers × seeds discrete, SDPA and both SSoG × seeds looped; horizon;
    # the variations of a tuned hyper-parameter
    assert len(commands) == 4 * 3 * 3 + 4 * 3 + 3 * 3 + len(sweep.HORIZON_MIXERS) + len(varied)
    only = [shlex.split(c) for c in dry_run(root, capsys, "--only", "patch2/looped/*")]
    assert len(only) == 3 * 3 and {flag(argv, "--depth")[0] for argv in only} == {"looped"}
    assert all("patch_size=2" in flag(argv, "--set") for argv in only)
    for argv in commands:
        mixer, out = flag(argv, "--mixer")[0], Path(flag(argv, "--out")[0])
        tuned = winners[mixer].argv
        if out.parts[-3] in sweep.VARIATIONS:  # the winning trial's command with only the varied value changed
            key = sweep.VARIATIONS[out.parts[-3]][0]
            expected = list(tuned)
            if key == "atom_lr_scale":
                expected[expected.index("--atom-lr-scale") + 1] = flag(argv, "--atom-lr-scale")[0]
            else:
                at = next(i for i, a in enumerate(expected) if a.startswith(f"{key}="))
                expected[at] = next(a for a in argv if a.startswith(f"{key}="))
            assert expected != tuned and argv[4:argv.index("--out")] == expected
            assert flag(argv, "--validation-fraction") == ["0.1"]
            continue
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
    order = [(run.phase == "patch2", run.labels["seed"]) for run in finals]
    assert order == sorted(order) and finals[0].phase == "main", "main and horizon seed by seed, then patch 2"
    (root / "main" / finals[0].name).mkdir(parents=True)
    (root / "main" / finals[0].name / "checkpoint.pt").write_bytes(b"")
    write_summary(root, finals[1], test_accuracy=0.8)
    (root / "main" / finals[2].name).mkdir(parents=True)  # died before its first checkpoint
    (root / "main" / finals[2].name / "metrics.jsonl").write_text("")
    commands = [shlex.split(c) for c in dry_run(root, capsys)]
    assert len(commands) == len(finals) - 1
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
    lines, finished = [], []
    assert sweep.execute(root, runs, 2, False, lines.append, after=finished.append) == 1
    assert sorted(run.name for run in finished) == ["discrete/sdpa/s0", "discrete/sdpa/s1"]  # not the failed one
    assert (root / "main/discrete/sdpa/s0/summary.json").is_file() and (root / "main/discrete/sdpa/s1/summary.json"
                                                                       ).is_file()
    assert any("FAILED (exit 3) main/discrete/sdpa/s2" in line for line in lines)
    record = json.loads((root / "main/discrete/sdpa/s0/run.json").read_text())
    assert record["train_images"] == 60_000
    assert record["machine"]["threads"] == 1 and record["machine"]["cpu_model"]  # where the run trained
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
    assert "failed (exit 2)" in rep.report(root, tuning, [])


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
    text = rep.report(root, tuning, finals)
    patch2_table = text.split("## 28², patch 2")[1].split("## ")[0]
    patch2_sdpa_line = next(line for line in patch2_table.splitlines() if line.startswith("| discrete | sdpa |"))
    assert patch2_sdpa_line.strip("|").split("|")[7].strip() == f"{expected_patch2:,.0f}"
    rows = {tuple(c.strip() for c in line.strip("|").split("|")[:2]): line for line in text.splitlines()
            if line.startswith(("| ode ", "| discrete "))}
    values = accuracy[("main", "ode", "ssog")]
    mean, std = statistics.mean(values), statistics.stdev(values)
    assert std == pytest.approx(1.0)  # 80, 81, 82 (+5): sample std, not population std (0.816)
    line = rows[("ode (1 RK4 step)", "ssog")]  # the sweep's ODE form is models.rk4_residual, and says so
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[2] == f"{mean:.2f} ± {std:.2f}" and cells[4] == "3" and cells[6] == "46,858"  # what nano builds
    assert cells[3] == f"{5:.2f} ± {math.sqrt(2 / 3):.2f}"  # Δ vs SDPA and the std of that difference
    speed = statistics.mean(60_000 * 8 / (100.0 + s) for s in range(3))
    assert cells[7] == f"{speed:,.0f}"
    assert rows[("ode (1 RK4 step)", "sdpa")].split("|")[4].strip() == "—"
    assert "## 28², patch 2 (14×14 tokens)" in text and "## Tuning" in text
    # main, patch 2, horizon; then main's and patch 2's in the table of accuracy beside speed
    assert text.count("| discrete |") == 4 + 4 + len(sweep.HORIZON_MIXERS) + 4 + 4


def test_a_real_ode_run_goes_through_the_executor_its_nfe_step_and_the_report(tmp_path):
    from test_data import fabricate_fashion_mnist

    fabricate_fashion_mnist(tmp_path, n_train=16, n_test=8)
    run = sweep.Run("main", "ode/ssog/s0", [*sweep.model_argv("ssog", "ode", 4, tmp_path), "--epochs", "1",
                                            "--batch-size", "8", "--seed", "0"],
                    16, {"mixer": "ssog", "depth": "ode", "patch": 4, "seed": 0})
    root, lines = tmp_path / "runs", []
    after = lambda r: measure.nfe_step(root, [r], tmp_path, lines.append)
    assert sweep.execute(root, [run], 1, False, lines.append, after=after) == 0
    summary = sweep.read_summary(root, run)
    assert summary["dataset"] == "fashion-mnist" and summary["epochs_done"] == 1
    record = json.loads((root / "main/ode/ssog/s0/nfe.json").read_text())  # from the train CLI's checkpoint
    assert record["trained_solver"] == {**record["trained_solver"], "method": "rk4", "step_size": 4.0, "nfe": 4}
    assert record["n_images"] == 8 and [e["rtol"] for e in record["dopri5"]] == list(measure.NFE_RTOLS)
    [row] = rep.group_rows(root, [run], ("depth", "mixer"))
    assert row["n"] == 1 and row["accuracy"][0] == pytest.approx(100 * summary["test_accuracy"])
    assert row["parameters"] == summary["parameters"] and row["images_per_s"] > 0
    assert row["nfe"] == {e["rtol"]: [e["nfe"]] for e in record["dopri5"]}


# ------------------------------------------------------------------------------------------ NFE, speed, report

def tuned_finals(root, data_dir=Path("/fm")):
    """Finished tuning trials (the last trial of each mixer wins) and the final runs they define."""
    tuning = sweep.tune_runs(sweep.Recipe(), 6, 0.1, data_dir)
    for run in tuning:
        write_summary(root, run, val_accuracy=0.5 + 0.01 * run.labels["trial"])
    return tuning, sweep.final_runs(sweep.Recipe(), sweep.Recipe(epochs=sweep.PATCH2_EPOCHS), [0, 1, 2],
                                    sweep.best_hyper(root, tuning), data_dir)


def tiny_checkpoint(folder, depth):
    """A tiny trained-model stand-in (width 16, 2 layers: T = 2, one RK4 step) in the format load_model reads."""
    from ssog_lab.models import build_model
    from ssog_lab.train import save_weights

    torch.manual_seed(0)
    model = build_model("nano", depth=depth, mixer="ssog", image_size=28, patch_size=4, in_chans=1, num_classes=10,
                        dim=16, layers=2, ssog_heads=2, ode_step_size=2.0)
    folder.mkdir(parents=True, exist_ok=True)
    save_weights(model, folder / "checkpoint.pt")
    return model


def test_nfe_step_measures_finished_ode_runs_that_still_have_their_checkpoint(tmp_path, capsys):
    from test_data import fabricate_fashion_mnist

    fabricate_fashion_mnist(tmp_path, n_train=4, n_test=8)
    root = tmp_path / "runs"
    _, finals = tuned_finals(root)
    ode, unfinished = [r for r in finals if r.phase == "main" and r.labels["depth"] == "ode"][:2]
    discrete = next(r for r in finals if r.phase == "main" and r.labels["depth"] == "discrete")
    for run in (ode, unfinished, discrete):
        tiny_checkpoint(root / run.phase / run.name, run.labels["depth"])
    for run in (ode, discrete):
        write_summary(root, run, test_accuracy=0.5)
    assert measure.nfe_pending(root, finals) == [ode]
    args = ["nfe", "--runs", str(root), "--data-dir", str(tmp_path)]
    assert sweep.main([*args, "--dry-run"]) == 0
    assert f"nfe {root / ode.phase / ode.name}" in capsys.readouterr().out
    assert not (root / ode.phase / ode.name / "nfe.json").exists()
    threads = torch.get_num_threads()
    assert sweep.main(args) == 0 and torch.get_num_threads() == threads
    path = root / ode.phase / ode.name / "nfe.json"
    record = json.loads(path.read_text())
    assert record["n_images"] == 8 and record["threads"] == 1 and record["end_time"] == 2.0
    assert record["trained_solver"]["nfe"] == 4 and record["commit"] == measure.git_commit()  # one RK4 step
    by_rtol = {e["rtol"]: e for e in record["dopri5"]}
    assert list(by_rtol) == list(measure.NFE_RTOLS) and all(e["atol"] == e["rtol"] for e in record["dopri5"])
    assert 0 < by_rtol[1e-3]["nfe"] <= by_rtol[1e-5]["nfe"]
    assert "nfe main/ode/" in (root / "sweep.log").read_text()
    stamp = path.stat().st_mtime_ns
    assert sweep.main(args) == 0 and path.stat().st_mtime_ns == stamp  # done: not measured again
    assert not (root / discrete.phase / discrete.name / "nfe.json").exists()


def test_dopri5_nfe_leaves_the_model_as_it_was(tmp_path):
    model = tiny_checkpoint(tmp_path / "ode", "ode")
    images, labels = torch.randn(3, 1, 28, 28), torch.tensor([0, 1, 2])
    config = model.config
    measured = measure.dopri5_nfe(model, images, labels, rtols=(1e-2,))
    assert model.config is config and measured["dopri5"][0]["nfe"] > 0
    assert 0 <= measured["dopri5"][0]["accuracy"] <= 1
    with pytest.raises(ValueError, match="depth 'ode'"):
        measure.dopri5_nfe(tiny_checkpoint(tmp_path / "discrete", "discrete"), images, labels)


def stand_in_bench(calls, fail=()):
    """A stand-in for bench.run_in_subprocess: a row with the bench's columns, images/s by mixer."""
    def run(config, timeout=None):
        calls.append(config)
        speed = {"sdpa": 100.0, "axial": 90.0, "ssog": 300.0, "ssog-steered": 150.0}[config.mixer]
        row = dict.fromkeys(bench.COLUMNS, "")
        row.update(depth=config.depth, mixer=config.mixer, mode=config.mode, resolution=config.resolution,
                   batch=config.batch, tokens=(config.resolution // config.overrides["patch_size"]) ** 2, params=1000,
                   images_per_s=speed, best_images_per_s=speed, seconds_per_batch=config.batch / speed, peak_mb=1.0,
                   threads=1, cpu_model="a test CPU", torch="2", status="failed" if len(calls) in fail else "ok")
        return row
    return run


def test_speed_step_measures_every_configuration_once_with_its_trained_model(tmp_path, capsys):
    root = tmp_path / "runs"
    tuning, finals = tuned_finals(root)
    hyper = sweep.best_hyper(root, tuning)
    heads = [r for r in finals if r.phase == "heads"]  # a head-count variation is a model of its own
    assert len(measure.speed_configs(finals, batch=8)) == (4 * 3 + 4 + 3 + len(heads)) * 2  # + patch 2, looped
    finals = [r for r in finals if r.phase not in sweep.VARIATIONS]
    configs = measure.speed_configs(finals, batch=8)
    assert len(configs) == (4 * 3 + 4 + 3) * 2  # main, patch 2 (the horizon's model is main's) × 28², 112²
    assert {c.resolution for _, c in configs} == {28, 112}
    for patch, c in configs:
        model = {k: v for k, v in hyper[c.mixer].items() if k in ("heads", "ssog_heads", "atoms")}
        assert (c.preset, c.mode, c.batch, c.threads, c.num_classes) == ("nano", "infer", 8, 1, 10)
        assert c.overrides == {**c.overrides, "image_size": 28, "patch_size": patch, "in_chans": 1, **model}
        assert (c.overrides.get("ode_method"), c.overrides.get("ode_step_size")) == (
            ("rk4", 4.0) if c.depth == "ode" else (None, None))
    # The speed command also measures the tuning trials' other models (heads, atoms): tuning's speed side.
    model_keys = ("heads", "ssog_heads", "atoms")
    tried = {(t.labels["mixer"], *(t.labels.get(k) for k in model_keys)) for t in tuning + heads}
    chosen = {(m, *(hp.get(k) for k in model_keys)) for m, hp in hyper.items()}
    assert sweep.main(["speed", "--dry-run", "--runs", str(root)]) == 0
    printed = [line for line in capsys.readouterr().out.splitlines() if " -m ssog_lab.bench --one " in line]
    assert len(printed) == 38 + 2 * len(tried - chosen) > 38 and not (tmp_path / "speed.csv").exists()
    assert bench.BenchConfig(**json.loads(shlex.split(printed[0])[-1])).overrides["image_size"] == 28
    path, calls, lines = tmp_path / "speed.csv", [], []
    assert measure.speed_step(path, finals, lines.append, batch=8, measure=stand_in_bench(calls, fail=(1,))) == 1
    rows = bench.load_csv(path)  # the bench's own CSV reader
    assert len(calls) == len(rows) == 38 and list(rows[0]) == list(measure.SPEED_COLUMNS)
    assert {r["commit"] or None for r in rows} == {measure.git_commit()} and all(r["measured"] for r in rows)
    assert {(r["patch"], r["tokens"]) for r in rows} == {("4", 49), ("4", 784), ("2", 196), ("2", 3136)}
    assert measure.speed_step(path, finals, lines.append, batch=8, measure=stand_in_bench(calls)) == 0
    assert len(calls) == 38, "measured configurations (the failed one too) are not measured again"
    assert measure.speed_step(path, finals, lines.append, batch=8, retry_failed=True,
                              measure=stand_in_bench(calls)) == 0
    assert len(calls) == 39 and len(bench.load_csv(path)) == 38
    assert all(r["status"] == "ok" for r in bench.load_csv(path))


def test_speed_measures_the_trained_model_in_a_bench_process():
    from ssog_lab.models import build_model, count_parameters

    hyper = {"lr": 1e-3, "ssog_heads": 16, "atoms": 8}  # the labels carry them, as in the sweep's runs
    run = sweep.Run("main", "ode/ssog/s0", [*sweep.model_argv("ssog", "ode", 4, Path("/fm")), *sweep.hyper_argv(hyper)],
                    60_000, {"mixer": "ssog", "depth": "ode", "patch": 4, "seed": 0, **hyper})
    (_, config), (_, high) = measure.speed_configs([run], batch=2)
    assert high.resolution == 112
    row = bench.run_in_subprocess(dataclasses.replace(config, repeats=1, warmup=0, min_seconds=0.0), timeout=120)
    assert row["status"] == "ok", row["error"]
    assert row["tokens"] == 49 and row["nfe"] == 4 and row["threads"] == 1 and row["batch"] == 2
    assert row["params"] == count_parameters(build_model("nano", "ode", "ssog", image_size=28, patch_size=4,
                                                         in_chans=1, num_classes=10, ssog_heads=16, atoms=8))


def goal_verdicts(text):
    """{(goal start, mixer): verdict} from the report's goals table."""
    table = text.split("## Goals")[1].split("## ")[0]
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in table.splitlines()
             if line.startswith("| ") and not line.startswith("| goal")]
    return {(c[0].split()[0], c[1]): c[-1].strip("*") for c in cells}


def test_the_report_runs_at_every_stage_and_says_what_is_missing(tmp_path):
    root = tmp_path / "runs"
    tuning = sweep.tune_runs(sweep.Recipe(), 6, 0.1, Path("/fm"))
    text = rep.report(root, tuning, [], tmp_path / "speed.csv")
    for line in ("No tuning trial has finished yet.", "No main runs yet: they start once every tuning trial",
                 "No finished main or patch-2 runs yet.", "No inference measurements yet"):
        assert line in text
    assert set(goal_verdicts(text).values()) == {"not yet measured"} and len(goal_verdicts(text)) == 4
    write_summary(root, tuning[0], val_accuracy=0.5)
    assert sweep.main(["report", "--runs", str(root), "--report-out", str(tmp_path / "r.md")]) == 0
    assert "1 of 24 trials finished." in (tmp_path / "r.md").read_text()
    tuning, finals = tuned_finals(root)
    text = rep.report(root, tuning, finals, tmp_path / "speed.csv")
    assert "No finished main runs yet (36 runs planned)." in text and "24 of 24 trials" in text
    # Seed 0 of every main cell only: the fixed-SSoG goal is met so far, on 1 of the 3 planned seeds.
    fabricate_finished_sweep(root, [r for r in finals if r.phase == "main" and r.labels["seed"] == 0], {})
    verdicts = goal_verdicts(rep.report(root, tuning, finals, tmp_path / "speed.csv"))
    assert verdicts[("fixed", "ssog")] == "met so far (1 of 3 seeds in the fewest-seeded cell)"


def fabricate_finished_sweep(root, finals, gaps):
    """Test accuracy 80 + seed (+ gaps[(depth, mixer)] points) for every final run; nfe.json for the main
    ODE runs (ssog: seeds 0 and 1 only)."""
    for run in finals:
        lab = run.labels
        accuracy = (80 + lab["seed"] + gaps.get((lab["depth"], lab["mixer"]), 0)) / 100
        write_summary(root, run, **{"val_accuracy" if run.phase in sweep.VARIATIONS else "test_accuracy": accuracy})
        if run.phase == "main" and lab["depth"] == "ode" and not (lab["mixer"] == "ssog" and lab["seed"] == 2):
            base = {"sdpa": 30, "axial": 28, "ssog": 10, "ssog-steered": 14}[lab["mixer"]] + lab["seed"]
            (root / run.phase / run.name / "nfe.json").write_text(json.dumps(
                {"trained_solver": {"method": "rk4", "nfe": 4, "accuracy": 0.9},
                 "dopri5": [{"rtol": 1e-3, "atol": 1e-3, "nfe": base, "accuracy": 0.5 + 0.1 * lab["seed"]},
                            {"rtol": 1e-5, "atol": 1e-5, "nfe": 2 * base, "accuracy": 0.5}]}))


def test_the_report_puts_nfe_and_speed_beside_accuracy_and_computes_the_goals(tmp_path):
    from ssog_lab.results import accuracy, ledger

    root, speed = tmp_path / "accuracy_fashion" / "runs", tmp_path / "speed.csv"
    tuning, finals = tuned_finals(root)
    gaps = {(d, "ssog"): 2 for d in sweep.DEPTHS} | {(d, "ssog-steered"): 1 for d in sweep.DEPTHS}
    fabricate_finished_sweep(root, finals, gaps | {("ode", "ssog-steered"): -1, ("looped", "axial"): -5})
    calls = []
    measure.speed_step(speed, finals + tuning, lambda line: None, measure=stand_in_bench(calls))
    rows = measure.read_speed(speed)  # at 112²: SDPA 5 images/s, steered 4 (slower), fixed 30 (faster)
    for row in rows:
        if row["resolution"] == 112:
            row["images_per_s"] = {"sdpa": 5.0, "axial": 6.0, "ssog": 30.0, "ssog-steered": 4.0}[row["mixer"]]
    measure.write_csv(rows, speed, measure.SPEED_COLUMNS)
    text = rep.report(root, tuning, finals, speed)
    main = text.split("## 28², patch 4")[1].split("## ")[0]
    header = [c.strip() for c in main.splitlines()[2].strip("|").split("|")]
    assert header[8:] == ["inference images/s, 28²", "inference images/s, 112²", "dopri5 NFE, rtol 1e-3",
                          "dopri5 NFE, rtol 1e-5", "accuracy %, 256 test images: trained RK4 → dopri5 (rtol 1e-3)"]
    cells = {tuple(c[:2]): c for c in ([x.strip() for x in line.strip("|").split("|")] for line in main.splitlines()
                                       if line.startswith("| ") and not line.startswith("| depth"))}
    ode = "ode (1 RK4 step)"  # the sweep's ODE form is models.rk4_residual, and its tables say so
    assert cells[(ode, "sdpa")][10:] == ["31.0 ± 1.0", "62.0 ± 2.0", "90.0 → 60.0"]  # dopri5: 50, 60, 70 %
    assert cells[(ode, "ssog")][10:] == ["10.5 ± 0.7 (n = 2)", "21.0 ± 1.4 (n = 2)", "90.0 → 55.0"]  # 1 missing
    assert cells[("discrete", "ssog")][8:] == ["300", "30", "—", "—", "—"]
    beside = text.split("## Accuracy beside inference speed")[1].split("## ")[0]
    line = next(x for x in beside.splitlines() if x.startswith("| 4 (7×7) | 8 | ode (1 RK4 step) | ssog |"))
    assert [c.strip() for c in line.strip("|").split("|")][4:] == [
        "83.00 ± 1.00", f"2.00 ± {math.sqrt(2 / 3):.2f}", "300", "3.00×", "30", "6.00×"]
    assert "per seed" not in beside  # the accuracy rows are read from the phase tables only
    assert goal_verdicts(text) == {("≥", "ssog"): "met", ("≥", "ssog-steered"): "missed",
                                   ("…", "ssog or ssog-steered"): "met", ("fixed", "ssog"): "met"}
    assert "a test CPU" in text.split("## Inference throughput")[1]
    assert f"commit {measure.git_commit()}, " in text.split("## Inference throughput")[1]  # the code measured
    assert "## 28², patch 4 (7×7 tokens), 8 epochs" in text  # the recipe's length, from the summaries
    tuning_table = text.split("## Tuning")[1].split("## ")[0]
    trials = [[x.strip() for x in line.strip("|").split("|")] for line in tuning_table.splitlines()
              if line.startswith("| ") and not line.startswith("| mixer")]
    assert len(trials) == len(tuning) and all(t[5] == {"sdpa": "5", "axial": "6", "ssog": "30",
                                                        "ssog-steered": "4"}[t[0]] for t in trials)
    # The atom lr ablation beside the tuning trials that differ from it only in the scale.
    ablation = [[x.strip() for x in line.strip("|").split("|")] for line in
                text.split("## Atom learning rate")[1].split("## ")[0].splitlines() if line.startswith("| ssog")]
    assert {r[0] for r in ablation if r[3] == "atom_lr"} == {"ssog", "ssog-steered"}
    assert all(len({r[1] for r in ablation if r[0] == m}) == 1 for m in plan.SSOG_MIXERS)  # only the scale differs
    assert any(r[3].startswith("tuning trial") for r in ablation)
    setting = text.split("## Setting")[1].split("## ")[0]
    assert "plan.md" in setting and "- Tuned hyper-parameters" in setting
    # The claims ledger reads the same runs as records (root is a sweep's runs/ folder under results/).
    stored = accuracy.accuracy_results(tmp_path)
    assert len(stored) == 12 + 4 + 3 + len(sweep.HORIZON_MIXERS) and all(r["current"] for r in stored)
    ode_ssog = next(r for r in stored if (r["depth"], r["mixer"]) == ("ode", "ssog"))
    assert ode_ssog["nfe"] == {1e-3: [10, 11], 1e-5: [20, 22]}
    assert ode_ssog["label"] == "1 RK4 step" and {r["label"] for r in stored if r["depth"] != "ode"} == {""}
    nfe_row = next(r for r in ledger.claims_ledger(tmp_path) if "Lipschitz" in r["claim"] and r["variant"] == "fixed")
    assert "dopri5 NFE, rtol 1e-3: 10.5 ± 0.7 (n = 2) vs sdpa 31.0 ± 1.0" in nfe_row["measured"]
    # the solves differ from training: accuracy % trained → dopri5
    assert "trained → dopri5: 90.0 → 55.0, sdpa 90.0 → 60.0" in nfe_row["measured"]
    # Fixed SSoG 3 points below SDPA in the ODE form: both of its goals are missed, and so is the first goal.
    fabricate_finished_sweep(root, finals, gaps | {("ode", "ssog"): -3, ("ode", "ssog-steered"): -1})
    assert goal_verdicts(rep.report(root, tuning, finals, speed)) == {
        ("≥", "ssog"): "missed", ("≥", "ssog-steered"): "missed", ("…", "ssog or ssog-steered"): "missed",
        ("fixed", "ssog"): "missed"}
    # Without speed measurements, a goal that needs them is not yet measured unless the accuracy already misses.
    fabricate_finished_sweep(root, finals, gaps)
    assert goal_verdicts(rep.report(root, tuning, finals, tmp_path / "none.csv")) == {
        ("≥", "ssog"): "not yet measured", ("≥", "ssog-steered"): "not yet measured",
        ("…", "ssog or ssog-steered"): "not yet measured", ("fixed", "ssog"): "met"}


def test_the_speed_goal_must_hold_on_every_cpu_measured(tmp_path):
    root, speed, other = tmp_path / "runs", tmp_path / "speed.csv", tmp_path / "speed_other.csv"
    tuning, finals = tuned_finals(root)
    fabricate_finished_sweep(root, finals, {(d, m): 2 for d in sweep.DEPTHS for m in plan.SSOG_MIXERS})
    measure.speed_step(speed, finals + tuning, lambda line: None, measure=stand_in_bench([]))
    rows = measure.read_speed(speed)  # a second CPU where fixed SSoG is slower than SDPA at 112² in the ODE form
    for row in rows:
        row["cpu_model"] = "another CPU"
        if (row["resolution"], row["depth"], row["mixer"]) == (112, "ode", "ssog"):
            row["images_per_s"] = 50.0
    measure.write_csv(rows, other, measure.SPEED_COLUMNS)
    assert goal_verdicts(rep.report(root, tuning, finals, speed))[("≥", "ssog")] == "met"
    text = rep.report(root, tuning, finals, speed, (other,))
    assert goal_verdicts(text)[("≥", "ssog")] == "missed"
    assert goal_verdicts(text)[("…", "ssog or ssog-steered")] == "met"  # steered: 1.5× on both CPUs
    goals = text.split("## Goals")[1].split("## ")[0]
    assert ("ode (1 RK4 step) 3.00× (a test CPU, no AVX-512) / discrete 3.00×; looped 3.00×; ode (1 RK4 step) 0.50× "
            "(another CPU, no AVX-512)" in goals)
    beside = text.split("## Accuracy beside inference speed")[1].split("## ")[0]
    assert "measured on another CPU, no AVX-512 (speed_other.csv)" in beside
    assert beside.count("| 4 (7×7) | 8 | ode (1 RK4 step) | ssog |") == 2  # one table per CPU
    assert rep.host_of([{"cpu_model": "X", "cpu_flags": "avx2 avx512f"}]) == "X, AVX-512"  # CPUs of one name differ
    assert "On another CPU (speed_other.csv)" in text.split("## Inference throughput")[1]
    other.rename(root.parent / "speed_amd.csv")  # the sweep's report finds speed_*.csv beside speed.csv
    assert sweep.main(["report", "--runs", str(root), "--report-out", str(tmp_path / "r.md")]) == 0
    assert "(speed_amd.csv)" in (tmp_path / "r.md").read_text()


def test_the_horizon_check_says_whether_the_main_recipe_is_flat(tmp_path):
    root = tmp_path / "runs"
    tuning, finals = tuned_finals(root)
    fabricate_finished_sweep(root, finals, {})  # main: 80 + seed (std 1.0); horizon (seed 0): the same 80
    horizon = [r for r in finals if r.phase == "horizon"]
    write_summary(root, horizon[-1], test_accuracy=0.807, epochs_done=12)  # +0.7 points: over the 0.5 limit
    text = rep.report(root, tuning, finals)
    lines = [line for line in text.split("## Horizon")[1].split("## ")[0].splitlines() if line.startswith("- ")]
    assert lines == [
        "- sdpa (discrete, seed 0): 8 epochs 80.00% against 8 epochs 80.00%, +0.00 points (the main row's seed-std "
        "1.00; the rule's limit 0.50): **flat**.",
        "- ssog (discrete, seed 0): 8 epochs 80.00% against 8 epochs 80.00%, +0.00 points (the main row's seed-std "
        "1.00; the rule's limit 0.50): **flat**.",
        "- ssog-steered (discrete, seed 0): 12 epochs 80.70% against 8 epochs 80.00%, +0.70 points (the main row's "
        "seed-std 1.00; the rule's limit 0.50): **budget-limited: the main recipe stops before this curve "
        "flattens**.",
        "- At 8 epochs, against SDPA (points, seed 0 only): ssog +0.00, ssog-steered +0.70."]
    assert "**The main recipe is budget-limited** for ssog-steered (the horizon check below)" in text.split("## 28²")[0]
