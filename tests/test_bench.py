"""The benchmark harness on tiny sizes: rows, failures, timeouts, CSV, figure, ratios, flags and exit
codes (no timing asserts)."""

import csv
import math
import os
import platform
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from ssog_lab import bench
from ssog_lab.models import build_model


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """Four configurations in fresh processes: two good ones, an impossible resolution, a forced failure."""
    out = tmp_path_factory.mktemp("bench")
    common = dict(preset="nano", batch=2, repeats=1, warmup=0, min_seconds=0.0)
    configs = bench.configurations(depths=("discrete",), mixers=("sdpa", "ssog"), resolutions=(32,), **common)
    configs += [bench.BenchConfig(depth="discrete", mixer="ssog", resolution=30, **common),  # 30 % 4 ≠ 0
                bench.BenchConfig(depth="discrete", mixer="sdpa-math", resolution=32, **common)]
    rows = bench.run(configs, out_dir=out, timeout=120, progress=False, fail=(3,))
    return configs, rows, out


def test_one_row_per_configuration_with_positive_figures(measured):
    configs, rows, out = measured
    assert [(r["mixer"], r["resolution"]) for r in rows] == [(c.mixer, c.resolution) for c in configs]
    for row in rows[:2]:
        assert row["status"] == "ok", row["error"]
        assert row["images_per_s"] > 0 and row["peak_mb"] > 0 and row["params"] > 0
        assert row["tokens"] == 64 and row["batch"] == 2 and row["device"] and row["torch"]
    assert rows[1]["params"] < rows[0]["params"]  # SSoG drops the Q and K projections
    for row in rows[:2]:  # where it ran
        assert row["cpu_model"] and row["threads"] >= 1 and row["flush_denormal"] is False
        assert all(f.startswith(("avx512", "amx")) for f in row["cpu_flags"].split())
    loaded = bench.load_csv(out / "bench.csv")
    assert len(loaded) == len(configs) and list(loaded[0]) == list(bench.COLUMNS)
    assert loaded[0]["images_per_s"] == pytest.approx(rows[0]["images_per_s"])


def test_failing_configurations_are_rows_and_the_run_goes_on(measured):
    _, rows, _ = measured
    assert rows[2]["status"] == "failed" and "multiple" in rows[2]["error"]
    assert rows[3]["status"] == "failed" and "forced failure" in rows[3]["error"]
    assert rows[3]["images_per_s"] == ""


def test_timeout_is_reported():
    config = bench.BenchConfig(preset="nano", resolution=32)
    row = bench.run_in_subprocess(config, timeout=0.05)
    assert row["status"] == "timeout" and row["mixer"] == "sdpa"


def test_figure_file_and_ratio_table(measured, tmp_path):
    _, rows, _ = measured
    path = bench.save_figure(rows, tmp_path / "bench.html")
    assert path.stat().st_size > 1000 and "plotly" in path.read_text()
    fig = bench.figure(rows)
    assert {t.name for t in fig.data} == {"sdpa (infer)", "ssog (infer)"}  # failed rows are gaps
    ratios = {(r["mixer"], r["resolution"]): r for r in bench.ratio_table(rows)}
    sdpa, ssog = rows[0], rows[1]
    # sdpa-math failed, so the fastest SDPA is sdpa and there is no memory reference.
    assert ratios[("sdpa", 32)]["speed_vs_fastest_sdpa"] == pytest.approx(1.0)
    assert ratios[("ssog", 32)]["speed_vs_fastest_sdpa"] == pytest.approx(ssog["images_per_s"] / sdpa["images_per_s"])
    assert ratios[("ssog", 32)]["memory_vs_sdpa_math"] is None
    assert ratios[("ssog", 30)]["speed_vs_fastest_sdpa"] is None
    text = bench.ratio_markdown(rows)
    assert f"{ssog['images_per_s'] / sdpa['images_per_s']:.2f}×" in text and "failed" in text


def test_memory_ratio_against_sdpa_math():
    rows = [dict(depth="ode", mode="infer", resolution=64, mixer=m, status="ok", images_per_s=s, peak_mb=p)
            for m, s, p in (("sdpa", 2.0, 50.0), ("sdpa-math", 4.0, 200.0), ("ssog", 10.0, 40.0))]
    ratios = {r["mixer"]: r for r in bench.ratio_table(rows)}
    assert ratios["ssog"]["fastest_sdpa"] == "sdpa-math"
    assert ratios["ssog"]["speed_vs_fastest_sdpa"] == pytest.approx(2.5)
    assert ratios["ssog"]["memory_vs_sdpa_math"] == pytest.approx(0.2)
    assert ratios["ssog"]["memory_vs_sdpa"] == pytest.approx(0.8)
    assert "sdpa-math's / of sdpa's" in bench.report.RATIO_LEGEND
    assert "| ode | 64² | 0.50× / 25% / 100% | 1.00× / 100% / 400% |" in bench.ratio_markdown(rows)


def test_ratios_with_a_zero_reference_are_none():
    rows = [dict(depth="ode", mode="infer", resolution=64, mixer=m, status="ok", images_per_s=s, peak_mb=p)
            for m, s, p in (("sdpa", 0.0, 0.0), ("ssog", 10.0, 40.0))]
    ssog = bench.ratio_table(rows)[1]
    assert ssog["speed_vs_fastest_sdpa"] is None and ssog["memory_vs_sdpa"] is None


def test_ode_row_counts_function_evaluations():
    row = bench.run_one(bench.BenchConfig(preset="nano", depth="ode", mixer="ssog", resolution=16, repeats=2,
                                          warmup=0, min_seconds=0.0, ode_steps=2, ode_method="rk4"))
    assert row["status"] == "ok" and row["nfe"] == 8 and row["repeats"] == 2
    assert row["best_images_per_s"] >= row["images_per_s"] > 0
    # Without ode_steps the ODE is solved at the library's default step size, as build_model's models are.
    default = bench.run_one(bench.BenchConfig(preset="nano", depth="ode", mixer="ssog", resolution=16, repeats=1,
                                              warmup=0, min_seconds=0.0))
    step = build_model("nano", depth="ode").config.ode_step_size
    assert default["nfe"] == 4 * round(4 / step)  # RK4: 4 evaluations per step over [0, T = 4]


def test_operator_rows():
    rows = bench.operator_rows(sides=(3,), batch=1, heads=2, head_dim=2, atoms=2, repeats=1)
    ops = {r["op"] for r in rows}
    assert ops == {"sdpa", "sdpa-math", "ssog fixed dense", "ssog fixed separable", "ssog steered dense",
                   "ssog steered separable"}
    assert all(r["forward_ms"] > 0 and r["forward_backward_ms"] > 0 and r["tokens"] == 9 for r in rows)
    assert "| 3×3 | 9 |" in bench.operator_markdown(rows)


def test_cli_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for flag in ("--preset", "--depth", "--mixer", "--resolution", "--batch", "--out", "--train", "--repeats",
                 "--warmup", "--timeout", "--ode-steps", "--operator"):
        assert flag in text


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="torch flushes denormals on x86 only")
def test_flush_denormal_is_set_in_the_measuring_child_only():
    config = bench.BenchConfig(preset="nano", resolution=16, repeats=1, warmup=0, min_seconds=0.0,
                               flush_denormal=True)
    row = bench.run_in_subprocess(config, timeout=120)
    assert row["status"] == "ok" and row["flush_denormal"] is True
    assert not bench.measure.denormals_flushed()  # this process is untouched


def test_sigkill_is_reported_as_killed_not_oom():
    row = bench.run_in_subprocess(bench.BenchConfig(preset="nano", resolution=16), timeout=120, fail="kill")
    assert row["status"] == bench.KILLED == "killed (likely OOM)"


def test_csv_with_a_failed_row_loads_and_tabulates(tmp_path):
    path = tmp_path / "bench.csv"
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["depth", "mixer", "mode", "resolution", "images_per_s", "peak_mb", "status"])
        writer.writerows([["ode", "sdpa", "infer", "64", "2.0", "50", "ok"],
                          ["ode", "ssog", "infer", "64", "", "", "oom"]])
    rows = bench.load_csv(path)
    assert rows[0]["depth"] == "ode" and rows[0]["images_per_s"] == 2.0 and rows[1]["images_per_s"] is None
    assert bench.ratio_table(rows)[0]["depth"] == "ode" and "| ode | infer | 64² |" in bench.results_markdown(rows)


def test_report_writers(tmp_path):
    rows = [dict(name="a", value=1.5, extra="x"), dict(name="b", value=None)]
    twice = lambda r: r["value"] and 2 * r["value"]  # noqa: E731
    text = bench.markdown_table(rows, {"name": "name", "value": "value", "twice": twice}, align="lrr")
    assert text.splitlines() == ["| name | value | twice |", "|---|---:|---:|", "| a | 1.5 | 3.0 |", "| b |  |  |"]
    path = bench.report.write_csv(rows, tmp_path / "sub" / "rows.csv", columns=("name", "value"))
    assert path.read_text().splitlines() == ["name,value", "a,1.5", "b,"]
    assert bench.report.write_csv(rows, tmp_path / "all.csv").read_text().splitlines()[0] == "name,value,extra"


def test_row_writer_puts_each_row_on_disk_at_once(tmp_path):
    (tmp_path / "t.csv").write_text("from an earlier run\n")
    writer = bench.report.RowWriter(tmp_path, {"t": ["name", "value", "error"]})
    writer.note("# title")
    writer.row("t", dict(name="a", value=1.5, ignored="x"))
    assert (tmp_path / "t.csv").read_text().splitlines() == ["name,value,error", "a,1.5,"]  # a fresh file
    writer.row("t", dict(name="b", error="ValueError: no"))
    assert (tmp_path / "t.csv").read_text().splitlines() == ["name,value,error", "a,1.5,", "b,,ValueError: no"]
    assert (tmp_path / "report.md").read_text().splitlines() == [
        "# title", "", "## t", "", "| name | value | error |", "|---|---|---|", "| a | 1.5 |  |",
        "| b |  | ValueError: no |"]


def test_gpu_check_cases_inputs_and_predictions_without_a_gpu():
    from ssog_lab.bench import gpu

    cases = gpu.operator_cases()
    assert len(cases) == 2 * 2 * len(gpu.HEAD_CONFIGS) * 2 * 2 and {c["section"] for c in cases} == {"check", "time"}
    case = dict(batch=2, heads=4, d=3, grid=(3, 5), steered=True, dtype="bfloat16")
    v, mu, sigma, amp = gpu.make_inputs(case, device="cpu")
    assert v.shape == (2, 4, 15, 3) and v.dtype == torch.bfloat16 and not v.is_contiguous()  # token-major
    assert mu.shape == sigma.shape == (2, 4, 15, gpu.ATOMS, 2) and amp.shape == (2, 4, 15, gpu.ATOMS)
    assert mu.dtype == torch.float32 and (sigma > 0).all()
    rows = gpu.prediction_rows()
    assert [(r["heads"], r["d"], r["dtype"]) for r in rows][:2] == [(24, 8, "bfloat16"), (24, 8, "float32")]
    assert all(r["pred_fwd_ms"] > 0 and r["pred_bwd_bound"] in ("memory", "dot", "fp32", "exp", "issue") for r in rows)
    assert gpu.prediction_markdown(rows).splitlines()[2].startswith("| 24 heads × d 8 | bf16 | ")
    readme = Path(__file__).resolve().parents[1] / "docs" / "results" / "gpu" / "README.md"
    assert gpu.prediction_markdown(rows) in readme.read_text()  # the published table is the library's



def test_gpu_timings_refuse_without_cuda_and_speed_ratio_reads_them():
    from ssog_lab.bench import gpu

    rows = [{"side": 8, "backend": "triton", "forward_ms": 2.0}, {"side": 8, "backend": "torch", "forward_ms": 5.0},
            {"side": 16, "backend": "triton", "forward_ms": float("nan")},
            {"side": 16, "backend": "torch", "forward_ms": 5.0}]
    assert gpu.speed_ratio(rows) == {8: 2.5}
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: test_gpu_timings_measure_both_backends covers the timings")
    with pytest.raises(ValueError, match="CUDA"):
        gpu.gpu_timings()


@pytest.mark.gpu
def test_gpu_timings_measure_both_backends():
    from ssog_lab.bench import gpu

    rows = gpu.gpu_timings(sides=(8,), batch=1, heads=1, d=16, atoms=2, repeats=3)
    assert {r["backend"] for r in rows} == {"triton", "torch"}
    assert all(r["forward_ms"] > 0 and r["forward_backward_ms"] > 0 for r in rows)
    assert rows[0]["device"] == torch.cuda.get_device_name()

@pytest.mark.parametrize("field, value", [("batch", 0), ("repeats", 0), ("ode_steps", 0), ("resolution", -1),
                                          ("depth", "deep"), ("mixer", "none"), ("min_seconds", float("nan"))])
def test_config_rejects_bad_values_naming_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        bench.BenchConfig(**{field: value})


def test_run_rejects_a_non_positive_timeout():
    with pytest.raises(ValueError, match="timeout"):
        bench.run([bench.BenchConfig(preset="nano")], timeout=-1, progress=False)


@pytest.mark.parametrize("argv", [["--batch", "0"], ["--repeats", "0"], ["--timeout", "-1"], ["--timeout", "0"],
                                  ["--ode-steps", "0"], ["--operator", "--grid-sizes", "0"], ["--resolution", "nan"],
                                  ["--min-seconds", "inf"]])
def test_cli_bad_values_exit_2_with_a_message(argv, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        bench.main([*argv, "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "error: argument" in err and "Traceback" not in err


GPU_ABSENT = pytest.mark.skipif(torch.cuda.is_available(), reason="the case is a machine without a GPU")


@pytest.mark.parametrize("argv, message", [
    (["--mixer", "ssog", "sdpa", "ssog"], "--mixer: ssog given more than once"),
    (["--resolution", "32", "64", "32"], "--resolution: 32 given more than once"),
    (["--depth", "ode", "ode"], "--depth: ode given more than once"),
    (["--operator", "--grid-sizes", "8", "8"], "--grid-sizes: 8 given more than once"),
    (["--threads", "100000"], "--threads: threads must be at most this machine's"),
    (["--operator", "--threads", "100000"], "--threads: threads must be at most"),
    (["--device", "foo"], "--device: device must be"),
    pytest.param(["--operator", "--device", "cuda"], "--device: device 'cuda' needs a CUDA GPU", marks=GPU_ABSENT),
    pytest.param(["--device", "cuda"], "--device: device 'cuda' needs a CUDA GPU", marks=GPU_ABSENT),
    (["--out", "FILE/results"], "--out: folder .*FILE/results cannot be created: .*FILE is a file"),
])
def test_cli_checks_what_it_can_before_measuring_anything(argv, message, capsys, tmp_path, monkeypatch):
    def measured(*args, **kwargs):
        raise AssertionError("measured before the flags were checked")

    monkeypatch.setattr(bench.runner, "run", measured)
    monkeypatch.setattr(bench.operator, "operator_rows", measured)
    (tmp_path / "FILE").write_text("a file where a folder is asked for")
    argv = [a.replace("FILE", str(tmp_path / "FILE")) for a in argv]
    out = [] if "--out" in argv else ["--out", str(tmp_path / "out")]
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--preset", "nano", *argv, *out])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and re.search(f"error: argument {message}", err), err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def test_out_on_a_read_only_mount_is_refused_before_measuring(tmp_path, capsys, monkeypatch):
    """A real read-only tmpfs (root only; skipped where mounting is not allowed): permission bits say nothing
    there, so the check writes a temp file."""
    mount = tmp_path / "ro"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(mount)], capture_output=True,
                            text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({result.stderr.strip() or 'not root'})")
    try:
        monkeypatch.setattr(bench.runner, "run", lambda *a, **k: pytest.fail("measured before --out was checked"))
        with pytest.raises(SystemExit) as exit_info:
            bench.main(["--preset", "nano", "--out", str(mount / "results")])
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and "argument --out: folder" in err and "cannot be written" in err, err
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_the_api_refuses_repeated_values_and_impossible_threads():
    with pytest.raises(ValueError, match="mixers: sdpa given more than once"):
        bench.configurations("nano", mixers=("sdpa", "sdpa"))
    with pytest.raises(ValueError, match="threads must be at most"):
        bench.BenchConfig(threads=(os.cpu_count() or 1) + 1)
    with pytest.raises(ValueError, match="device must be"):
        bench.BenchConfig(device="foo")
    with pytest.raises(ValueError, match="sides: 8 given more than once"):
        bench.operator_rows((8, 8))


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _running(pid: int) -> bool:
    """Alive and not a zombie (a killed orphan waits as a zombie until init reaps it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux's /proc")
def test_a_killed_bench_leaves_no_measuring_process_behind(tmp_path):
    """SIGKILL the bench parent while its child measures a long configuration: the child ends with it."""
    command = [sys.executable, "-m", "ssog_lab", "bench", "--preset", "nano", "--depth", "discrete", "--mixer",
               "sdpa", "--resolution", "32", "--repeats", "1000000", "--min-seconds", "1000", "--threads", "1",
               "--no-progress", "--device", "cpu", "--out", str(tmp_path)]
    parent = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    children = []
    try:
        deadline = time.monotonic() + 60
        while not children and time.monotonic() < deadline:
            time.sleep(0.2)
            children = _children(parent.pid)
        assert children, "the bench never started its measuring process"
        time.sleep(5)  # the child is past its start-up and measuring
        assert _running(children[0])
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while _running(children[0]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _running(children[0]), "the measuring process outlived its killed parent"
    finally:
        parent.kill()
        for child in children:
            if _running(child):
                os.kill(child, signal.SIGKILL)


def test_cli_exits_1_when_a_configuration_fails(tmp_path, capsys):
    argv = ["--preset", "nano", "--depth", "discrete", "--mixer", "ssog", "--resolution", "30", "--repeats", "1",
            "--warmup", "0", "--min-seconds", "0", "--no-progress", "--device", "cpu", "--out", str(tmp_path)]
    assert bench.main(argv) == 1
    assert "0 ok, 1 not ok" in capsys.readouterr().out and (tmp_path / "bench.csv").exists()


@pytest.mark.parametrize("argv, message", [(["--num-classes", "0"], "--num-classes"),
                                           (["--ssog-heads", "7", "--presets", "tiny"], "--ssog-heads 7")])
def test_params_bad_values_exit_2_with_a_message(argv, message, capsys):
    from ssog_lab.__main__ import main

    with pytest.raises(SystemExit) as exit_info:
        main(["params", *argv])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_figure_draws_a_mixer_without_a_colour():
    rows = [dict(depth="discrete", mode="infer", resolution=r, mixer="new-mixer", status="ok", images_per_s=1.0,
                 peak_mb=2.0, device="cpu") for r in (32, 64)]
    fig = bench.figure(rows)
    assert [t.name for t in fig.data] == ["new-mixer (infer)"] * 2 and fig.data[0].line.color


def test_operator_timings_time_each_operator_and_skip_the_dense_kernel_above_its_limit():
    big = bench.operator_timings(4, dense_max_tokens=8)
    assert list(big) == ["SDPA (dense attention)", "SSoG separable", "SSoG via the N×N kernel"]
    assert math.isnan(big["SSoG via the N×N kernel"]) and big["SSoG separable"] > 0
    assert bench.time_ms(lambda: None, repeats=2, budget_s=0.0) >= 0


def test_flop_counts_follow_the_formulas():
    """By hand on a 3×3 grid (N = 9, H = W = 3), d = 2, M = 2: SDPA 4N²d, separable 2MN(H+W)d holding M(H² + W²)
    weights and the M·N·d intermediate, the N×N-kernel path 3MN² + 2N²d holding N²; the labels are operator_timings'."""
    counts = bench.flop_counts(3, d=2, atoms=2)
    assert tuple(counts) == bench.OPERATORS == tuple(bench.operator_timings(2, d=2, heads=1, atoms=1))
    assert counts["SDPA (dense attention)"] == {"flops": 4 * 81 * 2, "memory": 81}
    assert counts["SSoG separable"] == {"flops": 2 * 2 * 9 * 6 * 2, "memory": 2 * (9 + 9) + 2 * 9 * 2}
    assert counts["SSoG via the N×N kernel"] == {"flops": 3 * 2 * 81 + 2 * 81 * 2, "memory": 81}
    at_14 = bench.flop_counts(14, d=64, atoms=4)  # notebook 02's exercise: the ratio 2N / (M(H + W)) = 3.5
    assert at_14["SDPA (dense attention)"]["flops"] / at_14["SSoG separable"]["flops"] == pytest.approx(3.5)


def test_side_by_side_rounds_rotate_and_ratios_pair_round_by_round():
    from ssog_lab.bench.timing import paired_speed, rotated

    assert [rotated("abc", r) for r in range(4)] == [list("abc"), list("bca"), list("cab"), list("abc")]
    # A load that doubles both of a pair cancels in its ratio; the ratio of medians would not see the pairs.
    assert paired_speed([2.0, 4.0, 2.0], [1.0, 2.0, 1.0]) == 2.0
    with pytest.raises(ValueError, match="paired"):
        paired_speed([1.0, 2.0], [1.0])
