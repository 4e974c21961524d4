"""Widgets of the model notebooks (04–07): each builds, its `update(...)` (or `log(...)`) changes the figure's data and
readout, and the numbers it shows agree with the definitions they visualize."""

import math

import numpy as np
import pytest
import torch
from test_learned import steered_model
from test_ode_cost import linear_problem

from ssog_lab import learned, models, ode_cost, ops, viz


def trace_data(figure) -> list[np.ndarray]:
    """Every x/y/z array of the figure's traces, as float arrays, to compare before and after an update."""
    arrays = []
    for trace in figure.data:
        for key in ("x", "y", "z"):
            value = getattr(trace, key, None)
            if value is not None:  # numbers compare as floats, categorical axes (names) as text
                try:
                    arrays.append(np.asarray(value, dtype=float))
                except ValueError:
                    arrays.append(np.asarray(value, dtype=str))
    return arrays


def changed(before: list[np.ndarray], after: list[np.ndarray]) -> bool:
    def same(a: np.ndarray, b: np.ndarray) -> bool:
        if a.shape != b.shape or a.dtype.kind != b.dtype.kind:
            return False
        return bool((a == b).all()) if a.dtype.kind == "U" else np.allclose(a, b, equal_nan=True)

    return len(before) != len(after) or not all(same(a, b) for a, b in zip(before, after, strict=True))


# --- 04: depth three ways ------------------------------------------------------------------------------


def test_convergence_rows_and_solver_widget():
    func, y0, exact = linear_problem(n=6)
    rows = ode_cost.convergence(func, y0, 1.0, exact, ["euler · ssog_lab.ode", "dopri5 (adaptive) · torchdiffeq"],
                                steps=(1, 2, 4), tolerances=(1e-3, 1e-6))
    assert [r["steps"] for r in rows] == [1, 2, 4, None, None]
    euler_errors = [r["error"] for r in rows[:3]]
    assert euler_errors[0] > euler_errors[1] > euler_errors[2]
    lf = viz.solver_widget(func, y0, 1.0, exact, (2, 3), rows=rows, solver="euler · ssog_lab.ode", steps=1)
    slopes = [t for t in lf.figure.data if (t.name or "").startswith("slope")]
    assert [t.name for t in slopes] == ["slope −1", "slope −2", "slope −4"]
    for p, line in zip((1, 2, 4), slopes, strict=True):
        assert math.log10(line.y[0] / line.y[1]) / math.log10(line.x[1] / line.x[0]) == pytest.approx(p)
    assert np.asarray(lf.figure.data[-1].z).shape == (2, 3)  # error per token over the grid
    assert lf.figure.data[-2].x == (1,) and "NFE = 1" in lf.readout.value
    before = trace_data(lf.figure)
    lf.update(solver="midpoint · ssog_lab.ode", steps=4)
    assert changed(before, trace_data(lf.figure))
    assert lf.figure.data[-2].x == (8,) and "NFE = 8" in lf.readout.value
    assert not lf.controls["steps"].disabled and lf.controls["rtol"].disabled
    lf.update(solver="dopri5 (adaptive) · torchdiffeq")
    assert lf.controls["steps"].disabled and not lf.controls["rtol"].disabled  # dopri5 picks its own steps
    lf.update(solver="midpoint · ssog_lab.ode")
    y, _ = ode_cost.solve_and_count(func, y0, 1.0, "midpoint · ssog_lab.ode", steps=4)
    assert f"{ode_cost.relative_error(y, exact):.2e}" in lf.readout.value
    with pytest.raises(ValueError, match="shape"):
        viz.solver_widget(func, y0, 1.0, exact, (3, 3))


def test_trajectory_widget_projects_states_on_shared_principal_axes():
    torch.manual_seed(0)
    grid, c = (2, 2), 5
    layers = torch.arange(4.0)
    looped = torch.randn(4, 4, c).cumsum(0)  # (S, N, C)
    shifted = looped + 1.0
    lf = viz.trajectory_widget({"looped": (layers, looped), "shifted": (layers, shifted)}, grid, max_tokens=4,
                               tokens=2)
    per_form = 4
    shown = [trace.visible for trace in lf.figure.data[:-1]]
    assert shown == [True, True, False, False] * 2
    # One PCA for both: the constant shift keeps the two paths congruent in the projection.
    a, b = lf.figure.data[0], lf.figure.data[per_form]
    np.testing.assert_allclose(np.diff(a.x), np.diff(b.x), atol=1e-5)
    before = trace_data(lf.figure)
    lf.update(tokens=4, forms=("looped",), axes="PC2 · PC3")
    assert changed(before, trace_data(lf.figure))
    assert [trace.visible for trace in lf.figure.data[:-1]] == [True] * 4 + [False] * 4
    assert len(lf.figure.data[-1].x) == 4  # one start marker per visible path
    assert "pick two forms" in lf.readout.value
    with pytest.raises(ValueError, match="states"):
        viz.trajectory_widget({"bad": (layers, looped[:, :3])}, grid)


def test_trajectory_widget_on_real_models_shows_looped_is_euler():
    torch.manual_seed(0)
    kwargs = dict(in_chans=1, num_classes=10, dim=16, layers=2, heads=2)
    looped = models.build_model("nano", depth="looped", mixer="ssog", **kwargs).double()
    euler = models.build_model("nano", depth="ode", mixer="ssog", ode_solver="ssog_lab", ode_method="euler",
                               ode_step_size=1.0, **kwargs).double()
    euler.load_state_dict(looped.state_dict())
    images = torch.randn(1, 1, 32, 32, dtype=torch.float64)
    with torch.no_grad():
        paths = {"looped": (torch.arange(3.0), looped.states(images)[:, 0]),
                 "euler": (torch.arange(3.0), euler.states(images)[:, 0])}
    lf = viz.trajectory_widget(paths, (8, 8), tokens=3)
    assert "looped ↔ euler: 0.000" in lf.readout.value


def test_parameter_widget_shows_the_table():
    rows = models.parameter_table(("nano",), depth="discrete") + models.parameter_table(("nano",), depth="looped") \
        + models.parameter_table(("tiny",), depth="discrete")
    lf = viz.parameter_widget(rows)
    table = {(r["preset"], r["depth"], r["mixer"]): r["params"] for r in rows}
    ssog = list(models.MIXERS).index("ssog")
    assert lf.figure.data[0].y[ssog] == table[("nano", "discrete", "ssog")]
    assert lf.figure.data[1].y[ssog] == table[("nano", "looped", "ssog")]
    before = trace_data(lf.figure)
    lf.update(preset="tiny")
    assert changed(before, trace_data(lf.figure))
    assert lf.figure.data[0].y[ssog] == table[("tiny", "discrete", "ssog")]
    assert lf.figure.data[1].y[ssog] is None  # no looped row for tiny
    assert "tiny" in lf.readout.value and "16.0% fewer" in lf.readout.value
    with pytest.raises(ValueError, match="rows"):
        viz.parameter_widget([])



# --- 05: training --------------------------------------------------------------------------------------


def test_training_monitor_appends_records_from_fit():
    from ssog_lab import data, train

    generator = torch.Generator().manual_seed(0)
    images, labels = torch.randn(32, 1, 8, 8, generator=generator), torch.arange(32) % 4
    dataset = data.ImageDataset(images, labels, name="noise")
    monitor = viz.TrainingMonitor(["a", "b"])
    assert all(len(trace.x or ()) == 0 for trace in monitor.figure.data)
    torch.manual_seed(0)
    model = models.build_model("nano", image_size=8, dim=16, layers=1, heads=2, in_chans=1, num_classes=4)
    history = train.fit(model, dataset, dataset, train.TrainConfig(epochs=2, batch_size=16, log_every=1,
                                                                   progress=False), on_log=monitor.callback("b"))
    steps = [r for r in history if r["kind"] == "step"]
    epochs = [r for r in history if r["kind"] == "epoch"]
    loss_b, test_accuracy_b = monitor.figure.data[4], monitor.figure.data[7]  # run b: batch loss, test accuracy
    assert loss_b.y == tuple(r["loss"] for r in steps) and loss_b.x == tuple(r["epoch"] for r in steps)
    assert test_accuracy_b.y == tuple(r["test_accuracy"] for r in epochs)
    assert all(len(trace.x or ()) == 0 for trace in monitor.figure.data[:4])  # run a untouched
    assert "<b>b</b>: epoch 2.00" in monitor.readout.value
    assert f"test accuracy {100 * epochs[-1]['test_accuracy']:.1f}%" in monitor.readout.value
    monitor.log({"kind": "epoch", "epoch": 1, "step": 2, "test_loss": 1.5, "test_accuracy": None}, run="a")
    assert monitor.figure.data[1].y == (1.5,) and len(monitor.figure.data[3].y or ()) == 0  # None is skipped
    with pytest.raises(ValueError, match="run"):
        monitor.log(steps[0], run="c")
    with pytest.raises(ValueError, match="kind"):
        monitor.log({"epoch": 1})


def test_prediction_widget_shows_softmax_of_each_model():
    from ssog_lab import data

    dataset = data.ImageDataset(torch.randn(5, 1, 8, 8), torch.arange(5), name="noise")
    torch.manual_seed(0)
    kwargs = dict(image_size=8, dim=16, layers=1, heads=2, in_chans=1, num_classes=5)
    trained = {"x": models.build_model("nano", **kwargs).eval(),
               "y": models.build_model("nano", mixer="ssog", **kwargs).eval()}
    lf = viz.prediction_widget(trained, dataset, index=0)
    before = trace_data(lf.figure)
    lf.update(index=3)
    assert changed(before, trace_data(lf.figure))
    with torch.no_grad():
        expected = trained["y"](dataset[3][0][None]).softmax(-1)[0]
    np.testing.assert_allclose(lf.figure.data[2].y, expected.numpy(), atol=1e-6)
    np.testing.assert_allclose(np.asarray(lf.figure.data[0].z), dataset[3][0][0].numpy(), atol=1e-6)
    assert "true label <b>3</b>" in lf.readout.value


def test_results_widget_keeps_configurations_apart_and_uses_the_sample_std():
    rows = [dict(source="accuracy_x.md", group="main", depth="discrete", mixer="sdpa", label="", values=[0.80, 0.90],
                 current=True),
            dict(source="accuracy_x.md", group="main", depth="discrete", mixer="ssog", label="heads2", values=[0.70],
                 current=True),
            dict(source="accuracy_x.md", group="main", depth="discrete", mixer="ssog", label="heads16",
                 values=[0.50, 0.60, 0.70], current=True),
            dict(source="old.jsonl", group="main", depth="ode", mixer="sdpa", label="", values=[0.6, 0.7],
                 current=False)]
    lf = viz.results_widget(rows)
    assert lf.controls["table"].value == "accuracy_x.md · main"  # opens on the current table with the most runs
    lf.update(table="old.jsonl · main (superseded)")
    assert "Not measured at the current code" in lf.readout.value and "SUPERSEDED" in lf.figure.layout.title.text
    assert [trace.showlegend for trace in lf.figure.data] == [True, False]  # no ssog row in this table
    lf.update(table="accuracy_x.md · main")
    sdpa, ssog = lf.figure.data
    assert lf.figure.layout.yaxis.range[0] > 40 and lf.figure.layout.yaxis.range[1] < 100  # spans the values
    assert ssog.x == ("discrete", "discrete · heads2", "discrete · heads16")  # never pooled: one bar each
    assert ssog.y[1] == pytest.approx(70.0) and ssog.y[2] == pytest.approx(60.0)
    assert ssog.error_y.array[2] == pytest.approx(10.0)  # sample std of 50, 60, 70 (population std: 8.16)
    assert sdpa.error_y.array[0] == pytest.approx(100 * np.std([0.8, 0.9], ddof=1))
    assert ssog.text[2] == "60.0 (n=3)" and "(n = 1)" in lf.readout.value
    assert "Not measured" not in lf.readout.value
    with pytest.raises(ValueError, match="results"):
        viz.results_widget([])


def test_digits_figure_draws_each_image_with_its_label():
    from ssog_lab import data

    dataset = data.ImageDataset(torch.randn(4, 1, 6, 6), torch.tensor([3, 1, 4, 1]), name="noise")
    figure = viz.digits_figure(dataset, [0, 2, 3], columns=2)
    assert len(figure.data) == 3
    assert [a.text for a in figure.layout.annotations] == ["3", "4", "1"]
    np.testing.assert_allclose(np.asarray(figure.data[1].z), dataset[2][0][0].numpy(), atol=1e-6)


# --- 06: learned atoms ---------------------------------------------------------------------------------


def test_atoms_widget_draws_each_atom_around_the_query():
    model, _ = steered_model()
    lf = viz.atoms_widget(model, query=(2, 1))
    mu, sigma, amp = learned.learned_atoms(model, 0)
    ellipse = lf.figure.data[0]
    np.testing.assert_allclose([np.mean(ellipse.y[:-1]), np.mean(ellipse.x[:-1])],
                               [2 + mu[0, 0, 0], 1 + mu[0, 0, 1]], atol=1e-5)
    np.testing.assert_allclose(np.ptp(ellipse.x), 2 * sigma[0, 0, 1], rtol=1e-2)
    before = trace_data(lf.figure)
    lf.update(layer=1, head=1)
    assert changed(before, trace_data(lf.figure))
    mu1, _, _ = learned.learned_atoms(model, 1)
    np.testing.assert_allclose(lf.figure.data[-1].x, mu1[1, :, 1].numpy(), atol=1e-6)
    assert "layer 1, head 1" in lf.readout.value and f"{mu1[1, 0, 0]:+.2f}" in lf.readout.value


def test_steering_widget_shows_per_token_shifts():
    model, images = steered_model()
    lf = viz.steering_widget(model, images)
    mu, sigma, _ = learned.layer_atoms(model, images[:1], 0)
    ends_col = np.asarray(lf.figure.data[2].x)
    np.testing.assert_allclose(ends_col, (torch.arange(16) % 4 + mu[0, 0, :, 0, 1]).numpy(), atol=1e-5)
    before = trace_data(lf.figure)
    lf.update(image=2, layer=1, head=1, atom=3)
    assert changed(before, trace_data(lf.figure))
    mu, sigma, _ = learned.layer_atoms(model, images[2:3], 1)
    base_sigma = learned.learned_atoms(model, 1)[1][1, 3]
    np.testing.assert_allclose(np.asarray(lf.figure.data[3].z),
                               torch.log2(sigma[0, 1, :, 3] / base_sigma).mean(-1).reshape(4, 4).numpy(), atol=1e-5)
    assert "image 2, layer 1, head 1, atom 3" in lf.readout.value


def test_receptive_field_widget_is_a_row_of_the_dense_kernel():
    model, images = steered_model(depth="ode")
    lf = viz.receptive_field_widget(model, images, query=(0, 0))
    before = trace_data(lf.figure)
    lf.update(image=1, layer=1, head=1, row=2, col=3)
    assert changed(before, trace_data(lf.figure))
    mu, sigma, amp = learned.layer_atoms(model, images[1:2], 1)
    kernel = ops.dense_kernel(mu[:, 1:2], sigma[:, 1:2], amp[:, 1:2], (4, 4))[0, 0]  # (N, N)
    np.testing.assert_allclose(np.asarray(lf.figure.data[1].z), kernel[2 * 4 + 3].reshape(4, 4).numpy(), atol=1e-6)
    base = learned.learned_atoms(model, 1)
    fixed = ops.dense_kernel(base[0][1:2], base[1][1:2], base[2][1:2], (4, 4))[0]
    np.testing.assert_allclose(np.asarray(lf.figure.data[2].z), fixed[11].reshape(4, 4).numpy(), atol=1e-6)
    assert "query (2, 3)" in lf.readout.value and f"{float(fixed[11].sum()):.3f} unsteered" in lf.readout.value
    assert lf.figure.layout.xaxis2.showticklabels and lf.figure.layout.xaxis2.dtick == 1  # token ticks


def test_atom_change_figure_shows_the_one_moved_offset_off_the_diagonal():
    model, _ = steered_model()
    twin = learned.initial_twin(model, seed=0)
    with torch.no_grad():
        learned.ssog_mixers(model)[1].mu[0, 2, 1] += 0.75
    figure = viz.atom_change_figure(model, twin)
    offsets = np.concatenate([t.y for t in figure.data if t.xaxis == "x" and t.mode == "markers"])
    starts = np.concatenate([t.x for t in figure.data if t.xaxis == "x" and t.mode == "markers"])
    assert np.count_nonzero(~np.isclose(offsets, starts)) == 1  # exactly the one offset that moved


# --- 07: scaling ---------------------------------------------------------------------------------------


def bench_rows():
    """Rows shaped like `bench.run`'s: throughput ∝ 1/N² for attention, 1/N^1.5 for SSoG; one failure."""
    rows = []
    for depth in ("discrete", "ode"):
        for resolution in (256, 512, 1024):
            n = (resolution // 16) ** 2
            for mixer, speed, memory in (("sdpa", 1e7 / n**2, 100.0), ("sdpa-math", 0.8e7 / n**2, 0.01 * n),
                                         ("ssog", 1e6 / n**1.5, 0.004 * n)):
                rows.append(dict(depth=depth, mixer=mixer, mode="infer", resolution=resolution, tokens=n,
                                 images_per_s=speed, peak_mb=memory, status="ok", device="cpu"))
    rows.append(dict(depth="ode", mixer="axial", mode="infer", resolution=1024, images_per_s=None, peak_mb=None,
                     status="oom", device="cpu"))
    return rows


def test_scaling_widget_draws_measurements_ratios_and_claims():
    from ssog_lab import bench

    rows = bench_rows()
    lf = viz.scaling_widget({"synthetic": rows, "empty": []})
    assert list(lf.controls["source"].options) == ["synthetic"]  # empty sources are left out
    assert lf.controls["depth"].value == "ode" and lf.controls["view"].value.startswith("throughput vs")
    ssog = lf.figure.data[list(bench.MIXERS).index("ssog")]
    expected = {r["resolution"]: r["speed_vs_fastest_sdpa"] for r in bench.ratio_table(rows)
                if r["depth"] == "ode" and r["mixer"] == "ssog"}
    assert ssog.x == (256, 1024, 4096) and ssog.y == pytest.approx([expected[x] for x in (256, 512, 1024)])
    assert ssog.y[2] == pytest.approx(2 * ssog.y[1])  # √N doubles with the resolution
    stars = lf.figure.data[-2]
    assert stars.x == (4096,) and stars.y == pytest.approx([2.54])  # at the paper's token count
    assert "measured at 1024²" in lf.readout.value and "ssog 6.40×" in lf.readout.value
    before = trace_data(lf.figure)
    lf.update(view="peak memory vs sdpa-math (×)")
    assert changed(before, trace_data(lf.figure))
    assert ssog.y == pytest.approx([0.4] * 3) and lf.figure.data[-2].y == pytest.approx([0.40])
    lf.update(depth="discrete", view="throughput (images/s)")
    assert lf.figure.data[-2].x == () and lf.figure.data[-1].x == ()  # no claims or parity line on raw views
    assert lf.figure.layout.yaxis.type == "log"
    assert ssog.y == pytest.approx([r["images_per_s"] for r in rows if r["depth"] == "discrete"
                                    and r["mixer"] == "ssog"])
    assert "over +30% throughput" in lf.readout.value
    with pytest.raises(ValueError, match="sources"):
        viz.scaling_widget({"failed only": rows[-1:]})


def test_claims_markdown_lists_the_largest_compared_resolution():
    from ssog_lab.results import benchmarks

    text = benchmarks.claims_markdown({"synthetic": bench_rows()})
    lines = text.splitlines()
    assert len(lines) == 4  # header, rule, discrete and ode rows of ssog (looped was not measured)
    assert "| synthetic | ode | 1024² | ssog | 6.40× | 0.40× | ODE: up to +154% throughput" in text
    assert "no SSoG measurement" in viz.claim_summary(bench_rows(), "looped")


def test_stored_sources_name_each_host_by_what_its_csv_records(tmp_path):
    from ssog_lab import bench
    from ssog_lab.results import benchmarks

    for folder, cpu in (("scaling_cpu_amd", "AMD EPYC"), ("scaling_cpu", "Intel(R) Xeon(R) Processor"),
                        ("scaling_cpu/repeat", "Intel(R) Xeon(R) Processor")):  # a repeat run is not another host
        bench.write_csv([dict(r, cpu_model=cpu) for r in bench_rows()], tmp_path / folder / "bench.csv")
    assert benchmarks.cpu_result_folders(tmp_path) == ["scaling_cpu", "scaling_cpu_amd"]
    gpu = [dict(r, device="cuda (NVIDIA H200)", cpu_model="AMD EPYC") for r in bench_rows()]
    bench.write_csv(gpu, tmp_path / "gpu" / "h200" / "bench.csv")
    sources = benchmarks.stored_sources(tmp_path)
    assert list(sources) == ["Intel(R) Xeon(R) Processor (stored, scaling_cpu)", "AMD EPYC (stored, scaling_cpu_amd)",
                             "cuda (NVIDIA H200) (stored, gpu/h200)"]
    assert all(len(rows) == len(bench_rows()) for rows in sources.values())
    assert list(benchmarks.stored_sources(tmp_path, folders=("missing",))) == ["cuda (NVIDIA H200) (stored, gpu/h200)"]
    assert benchmarks.host_label([{"device": "cpu"}]) == "cpu" and benchmarks.host_label([]) == ""


def test_solver_independence_widget_follows_image_and_tolerance():
    from ssog_lab.models import build_model, rk4_residual

    torch.manual_seed(0)
    options = dict(depth="ode", mixer="ssog", in_chans=1, num_classes=3, image_size=16, patch_size=4, layers=2)
    models = {"default solver": build_model("nano", **options).eval(),
              "one RK4 step": build_model("nano", **options, **rk4_residual(2.0)).eval()}
    images, labels = torch.randn(4, 1, 16, 16), torch.tensor([0, 1, 2, 0])
    lf = viz.solver_independence_widget(models, images, labels, ["a", "b", "c"])
    for image, rtol in ((0, 1e-3), (2, 1e-6)):
        text = lf.update(image=image, rtol=rtol)
        for i, model in enumerate(models.values()):
            own = ode_cost.solve_logits(model, images)[0].softmax(-1)[image]
            fine, nfe = ode_cost.solve_logits(model, images, ode_method="dopri5", ode_rtol=rtol, ode_atol=rtol)
            assert np.allclose(lf.figure.data[2 * i].y, own.numpy(), atol=1e-6)
            assert np.allclose(lf.figure.data[2 * i + 1].y, fine.softmax(-1)[image].numpy(), atol=1e-6)
            assert f"dopri5 NFE {nfe}" in text
        assert f"test image {image}" in text and "answers moved" in text
    assert models["one RK4 step"].config.ode_step_size == 2.0  # each model's own solver left as it was
    with pytest.raises(ValueError, match="images must be"):
        viz.solver_independence_widget(models, images, labels[:2], ["a", "b", "c"])
