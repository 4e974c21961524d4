"""The benchmark harness on tiny sizes: rows, failures, timeouts, CSV, figure, ratios (no timing asserts)."""

import pytest

from ssog_lab import bench


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """Four configurations in fresh processes: two good ones, an impossible resolution, a forced failure."""
    out = tmp_path_factory.mktemp("bench")
    common = dict(preset="nano", batch=2, repeats=1, warmup=0, min_seconds=0.0)
    configs = bench.grid(depths=("discrete",), mixers=("sdpa", "ssog"), resolutions=(32,), **common)
    configs += [bench.BenchConfig(setting="discrete", mixer="ssog", resolution=30, **common),  # 30 % 4 ≠ 0
                bench.BenchConfig(setting="discrete", mixer="sdpa-math", resolution=32, **common)]
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
    rows = [dict(setting="ode", mode="infer", resolution=64, mixer=m, status="ok", images_per_s=s, peak_mb=p)
            for m, s, p in (("sdpa", 2.0, 50.0), ("sdpa-math", 4.0, 200.0), ("ssog", 10.0, 40.0))]
    ratios = {r["mixer"]: r for r in bench.ratio_table(rows)}
    assert ratios["ssog"]["fastest_sdpa"] == "sdpa-math"
    assert ratios["ssog"]["speed_vs_fastest_sdpa"] == pytest.approx(2.5)
    assert ratios["ssog"]["memory_vs_sdpa_math"] == pytest.approx(0.2)


def test_ode_row_counts_function_evaluations():
    row = bench.run_one(bench.BenchConfig(preset="nano", setting="ode", mixer="ssog", resolution=16, repeats=2,
                                          warmup=0, min_seconds=0.0, ode_steps=2, ode_method="rk4"))
    assert row["status"] == "ok" and row["nfe"] == 8 and row["repeats"] == 2
    assert row["best_images_per_s"] >= row["images_per_s"] > 0


def test_operator_rows():
    rows = bench.operator_rows(sizes=(3,), batch=1, heads=2, head_dim=2, atoms=2, repeats=1)
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
