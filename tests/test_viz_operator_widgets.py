"""Widgets of the operator notebooks (00–03 and the appendix 08): each builds, `update(...)` changes the figure's
data and readout, and the exercise checks accept the right answer, reject wrong ones and treat None as "not
answered yet"."""

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from ssog_lab import ops, viz


def trace_data(lf: viz.LiveFigure) -> list[np.ndarray]:
    """Every numeric x/y/z array of the figure's traces (labels skipped), to compare before and after an update."""
    arrays = []
    for trace in lf.figure.data:
        for key in ("x", "y", "z"):
            value = getattr(trace, key, None)
            if value is not None and np.asarray(value).dtype.kind in "biuf":
                arrays.append(np.asarray(value, dtype=float))
    return arrays


def changed(before: list[np.ndarray], after: list[np.ndarray]) -> bool:
    return len(before) != len(after) or any(a.shape != b.shape or not np.allclose(a, b, equal_nan=True)
                                            for a, b in zip(before, after, strict=True))


# --- 01: Gaussian atoms --------------------------------------------------------------------------------


def test_gaussian_1d_widget_draws_axis_weights_and_updates():
    lf = viz.gaussian_1d_widget(length=16, atoms=((0.0, 1.0, 1.0), (3.0, 2.0, -0.5)), query=5)
    expected = 1.0 * ops.axis_weights(torch.tensor(5.0), torch.tensor(0.0), torch.tensor(1.0), 16) \
        - 0.5 * ops.axis_weights(torch.tensor(5.0), torch.tensor(3.0), torch.tensor(2.0), 16)
    np.testing.assert_allclose(lf.figure.data[-1].y, expected.numpy(), atol=1e-6)
    before, text = trace_data(lf), lf.readout.value
    assert "= 0.5000" in text  # Σα
    lf.update(mu1=4.0, amp2=0.5)
    assert changed(before, trace_data(lf))
    assert lf.readout.value != text and "= 1.5000" in lf.readout.value
    assert np.argmax(lf.figure.data[1].y) == 9  # atom 1 now peaks at i + μ = 5 + 4


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, np.float32("nan")])
def test_a_non_finite_control_value_is_refused_by_name_and_nothing_is_redrawn(value):
    lf = viz.gaussian_1d_widget(length=16)
    for name in [n for n, v in lf.values().items() if isinstance(v, float)] + ["query"]:
        before, values = trace_data(lf), lf.values()
        with pytest.raises(ValueError, match=f"{name} must be a finite number"):
            lf.update(**{name: value})
        assert lf.values() == values and not changed(before, trace_data(lf))


def test_query_kernel_widget_shows_a_row_of_the_dense_kernel():
    grid = (6, 7)
    lf = viz.query_kernel_widget(grid=grid, preset="three atoms")
    mu, sigma, amp = viz.atoms_from_lists(*viz.KERNEL_PRESETS["centre–surround (α: +1, −1)"])
    kernel = ops.dense_kernel(mu[None], sigma[None], amp[None], grid)[0]  # (N, N)
    before = trace_data(lf)
    lf.update(row=0, col=6, preset="centre–surround (α: +1, −1)")
    assert changed(before, trace_data(lf))
    np.testing.assert_allclose(np.asarray(lf.figure.data[0].z), kernel[6].reshape(6, 7).numpy(), atol=1e-6)
    assert "(0, 6)" in lf.readout.value and "Σα = 0.0000" in lf.readout.value
    with pytest.raises(ValueError, match="preset"):
        viz.query_kernel_widget(grid=grid, preset="no such preset")


def test_photo_widget_blurs_and_shifts_a_real_photograph():
    lf = viz.photo_widget("camera", size=24)
    image = np.asarray(lf.figure.data[0].z)
    assert image.shape == (24, 24) and image.std() > 0.05  # a real photograph, not a constant
    blurred = np.asarray(lf.figure.data[1].z)
    lf.update(sigma_row=0.2, sigma_col=0.2)  # near-identity atom
    sharp = np.asarray(lf.figure.data[1].z)
    np.testing.assert_allclose(sharp, image, atol=1e-3)
    assert np.abs(blurred - image).max() > 0.05
    lf.update(mu_col=3.0)
    np.testing.assert_allclose(np.asarray(lf.figure.data[1].z)[:, :-3], image[:, 3:], atol=1e-3)
    assert "output in" in lf.readout.value





def test_edge_response_draws_the_photo_and_the_response():
    figure = viz.edge_response([0, 0], [1, 3], [1, -1], "camera", size=16)
    assert np.asarray(figure.data[1].z).shape == (16, 16)


def test_token_grids_have_ticks_and_colour_bars():
    kernel = viz.query_kernel_widget(grid=(6, 6))
    assert kernel.figure.layout.yaxis.showticklabels and kernel.figure.layout.yaxis.title.text == "row r′"
    picture = viz.ssog_vs_attention_widget("astronaut", size=32, patch=4)
    weights = [trace for trace in picture.figure.data if trace.type == "heatmap"][1:]
    assert len(weights) == 2 and all(trace.showscale is not False for trace in weights)
    assert picture.figure.layout.xaxis2.showticklabels
    one_d = viz.gaussian_1d_widget(length=8)
    assert one_d.figure.layout.yaxis.title.text and one_d.figure.layout.yaxis2.title.text


def test_photo_grid_rejects_bad_names():
    with pytest.raises(ValueError, match="name"):
        viz.photo_grid("no_such_photo")


# --- 03: Lipschitz and Picard–Lindelöf -----------------------------------------------------------------


def test_ssog_norm_widget_exact_norm_matches_dense_and_stays_below_the_bound():
    lf = viz.ssog_norm_widget(grid=(6, 6))
    before, text = trace_data(lf), lf.readout.value
    lf.update(mu_col=8.0, amp2=-0.5)
    assert changed(before, trace_data(lf)) and lf.readout.value != text
    exact, dense, bound, amp_sum = lf.figure.data[0].y
    assert lf.figure.data[0].mode == "markers+text"  # a dot plot: no bars from 0 hiding the gaps
    assert exact == pytest.approx(dense, rel=1e-5)
    assert exact <= bound * (1 + 1e-9) and amp_sum == pytest.approx(1.5)
    mu, sigma, amp = viz.two_atom_head(1.0, 8.0, -0.5)
    column_sums = ops.dense_kernel(mu, sigma, amp, (6, 6))[0].sum(0).reshape(6, 6)
    np.testing.assert_allclose(np.asarray(lf.figure.data[1].z), column_sums.numpy(), rtol=1e-5)


def test_ray_widget_generic_ray_saturates_tied_ray_grows_ssog_is_flat():
    lf = viz.ray_widget(scales=(1.0, 16.0, 256.0, 1024.0))
    before = trace_data(lf)
    lf.update(s=8.0)
    assert changed(before, trace_data(lf)) and "s = 8" in lf.readout.value
    curves = lambda: {trace.name: np.asarray(trace.y) for trace in lf.figure.data[:3]}
    generic = curves()
    sdpa = generic["SDPA (dense attention)"]
    assert sdpa[1] > 5 * sdpa[0] and sdpa[2] < sdpa[1] / 5  # rises while soft, falls once saturated
    assert sdpa[3] == pytest.approx(sdpa[2], rel=1e-2)  # a bounded limit
    np.testing.assert_allclose(generic["fixed SSoG"], generic["fixed SSoG"][0], rtol=1e-3)  # linear: constant
    assert lf.figure.data[5].y[0] == pytest.approx(generic["fixed SSoG"][0], rel=1e-3)  # marker at s = 8
    lf.update(ray=list(viz.lipschitz.RAYS)[1])
    tied = curves()
    for name in ("SDPA (dense attention)", "axial attention"):
        ratio = tied[name][3] / tied[name][2]  # s 256 → 1024: ‖J‖ ∝ s² gives 16
        assert 10 < ratio < 20, (name, ratio)
    np.testing.assert_allclose(tied["fixed SSoG"], generic["fixed SSoG"], rtol=1e-3)
    assert "tied" in lf.readout.value


def test_nfe_widget_counts_dopri5_evaluations():
    lf = viz.nfe_widget(scales=(0.5, 8.0), grid=(2, 2), dim=8)
    before = trace_data(lf)
    lf.update(s=8.0)
    assert changed(before, trace_data(lf))
    curves = {trace.name: np.asarray(trace.y) for trace in lf.figure.data[:3]}
    assert all(c.min() >= 6 and float(c.min()).is_integer() for c in curves.values())  # dopri5: ≥ 1 step of 6
    assert curves["SDPA (dense attention)"][1] > curves["SDPA (dense attention)"][0]


def test_picard_widget_iterates_converge_for_lipschitz_problems():
    lf = viz.picard_widget(max_iterations=6, end_time=1.0, points=41)
    problems = list(lf.controls["problem"].options)
    errors = {}
    for problem in (problems[0], problems[2]):
        for k in (0, 6):
            before = trace_data(lf)
            lf.update(k=k, problem=problem)
            errors[problem, k] = float(lf.readout.value.split("‖ = ")[1].split(";")[0])
        assert changed(before, trace_data(lf))
        assert errors[problem, 6] < 0.01 * errors[problem, 0]
    lf.update(k=3, problem=problems[1])
    assert "locally Lipschitz" in lf.readout.value


def test_picard_problems_exact_solutions():
    problems = viz.picard_problems(end_time=0.5, points=11)
    for problem in problems.values():
        # the exact solution satisfies the ODE: central differences of x(t) match f(t, x(t))
        t, exact = problem["t"], problem["exact"]
        slope = (exact[2:] - exact[:-2]) / (t[2:] - t[:-2])[:, None]
        rhs = torch.stack([problem["func"](s, x) for s, x in zip(t[1:-1], exact[1:-1], strict=True)])
        np.testing.assert_allclose(slope.numpy(), rhs.numpy(), rtol=1e-2, atol=1e-3)


# --- 02: separability and cost --------------------------------------------------------------------------


def test_kronecker_widget_factors_reproduce_the_dense_kernel():
    lf = viz.kronecker_widget(grid=(3, 4))
    before = trace_data(lf)
    lf.update(sigma_row=0.7, mu_col=-1.5)
    assert changed(before, trace_data(lf))
    g_row, g_col, kron, dense = (np.asarray(trace.z) for trace in lf.figure.data)
    assert g_row.shape == (3, 3) and g_col.shape == (4, 4) and dense.shape == (12, 12)
    np.testing.assert_allclose(kron, np.kron(g_row, g_col), atol=1e-6)
    np.testing.assert_allclose(kron, dense, atol=1e-6)
    assert "e-" in lf.readout.value or "0.0e+00" in lf.readout.value


def test_cost_widget_updates_with_atoms():
    lf = viz.cost_widget(sides=(4, 8, 16))
    before, text = trace_data(lf), lf.readout.value
    lf.update(atoms=8)
    assert changed(before, trace_data(lf)) and "exceeds M = 8" in lf.readout.value and text != lf.readout.value
    assert lf.figure.layout.yaxis.title.text == "FLOPs" and lf.figure.layout.yaxis2.title.text == "numbers held"
    assert "N^1.50" in lf.readout.value and "N^2.00" in lf.readout.value


def test_timing_widget_measures_each_operator():
    lf = viz.timing_widget(sweep=(4, 8), slider_max=8)
    assert set(lf.slopes) == {"SDPA (dense attention)", "SSoG separable", "SSoG via the N×N kernel"}
    references = [trace for trace in lf.figure.data if trace.name and "(formula)" in trace.name]
    assert [trace.name for trace in references] == ["∝ N^2 (formula)", "∝ N^1.5 (formula)"]
    (n0, n1), (t0, t1) = references[1].x, references[1].y
    assert t1 / t0 == pytest.approx((n1 / n0) ** 1.5)
    lf.figure.data[-1].y = [0.0, 0.0, 0.0]
    lf.update(side=8)
    assert all(t > 0 for t in lf.figure.data[-1].y) and "N = 64" in lf.readout.value


# --- 00: start here -----------------------------------------------------------------------------------


def test_environment_report_names_versions_and_triton():
    report = viz.environment_report()
    assert report["torch"] == torch.__version__
    assert report["CPU"]  # the processor's name: its vendor matters for timings (notebook 02)
    assert report["CUDA GPU"] == (torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")
    assert report["Triton interpreter on the CPU"].startswith("on" if ops.triton_available("cpu") else "off")
    table = viz.environment_table(report)
    assert list(table.data[0].cells.values[0]) == list(report)


def test_attention_row_is_the_softmax_of_scaled_scores():
    tokens = torch.randn(10, 4, dtype=torch.float64)
    row = viz.attention_row(tokens, query=3, scale=2.0)
    scores = (2 * tokens[3]) @ (2 * tokens).T / 2.0  # q·k / √d with d = 4
    torch.testing.assert_close(row, torch.softmax(scores, dim=0))


def test_ssog_vs_attention_widget_follows_the_query():
    lf = viz.ssog_vs_attention_widget("astronaut", size=32, patch=4)  # an 8×8 token grid
    before, text = trace_data(lf), lf.readout.value
    lf.update(row=1, col=6)
    assert changed(before, trace_data(lf)) and "(1, 6)" in lf.readout.value and text != lf.readout.value
    ssog_row, attention = np.asarray(lf.figure.data[1].z), np.asarray(lf.figure.data[2].z)
    assert ssog_row.shape == attention.shape == (8, 8)
    assert attention.sum() == pytest.approx(1.0, abs=1e-5) and ssog_row.sum() == pytest.approx(1.0, abs=1e-5)
    tokens, grid = viz.patch_tokens(viz.photo_grid("astronaut", 32), 4)
    assert tokens.shape == (64, 16) and grid == (8, 8)


# --- 08: the Triton kernel (CPU interpreter without CUDA; conftest sets TRITON_INTERPRET=1) ----------------


@pytest.mark.triton
def test_kernel_sources_are_the_module_code():
    from ssog_lab.ops import triton_kernel

    module_text = Path(triton_kernel.__file__).read_text()
    for name in viz.KERNEL_PARTS:
        source = viz.kernel_source(name)
        assert (f"def {name}(" in source or f"class {name}" in source) and source in module_text
    with pytest.raises(ValueError, match="name"):
        viz.kernel_source("no_such_kernel")


@pytest.mark.triton
def test_interpreter_widget_matches_the_reference_and_updates():
    lf = viz.interpreter_widget(side=4)
    before = trace_data(lf)
    lf.update(mu_col=2.0, steered=True)
    assert changed(before, trace_data(lf)) and "steered" in lf.readout.value
    fast, reference, difference = (np.asarray(trace.z) for trace in lf.figure.data)
    np.testing.assert_allclose(fast, reference, atol=1e-5)
    assert difference.max() < 1e-5


def test_roofline_figure_tables_the_estimate():
    from ssog_lab.ops import roofline

    rows = roofline.roofline_rows(sides=(16,))
    table = viz.roofline_figure(rows)
    assert list(table.data[0].cells.values[0]) == ["16×16", "16×16"]
    assert list(table.data[0].cells.values[1]) == ["float32", "bfloat16"]
    assert roofline.H200.name in table.layout.title.text


def test_gpu_timing_figure_draws_each_backend_and_pass():
    rows = [dict(side=side, tokens=side**2, backend=backend, forward_ms=1.0 * side, forward_backward_ms=3.0 * side,
                 device="NVIDIA H200") for side in (8, 16) for backend in ("triton", "torch")]
    figure = viz.gpu_timing_figure(rows)
    assert len(figure.data) == 4 and figure.data[1].y == (24.0, 48.0)
    assert figure.layout.title.text.startswith("NVIDIA H200")
