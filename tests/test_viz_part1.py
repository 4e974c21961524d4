"""Widgets of notebooks 00–04: each builds, `update(...)` changes the figure's data and readout, and the
exercise checks accept the right answer, reject wrong ones and treat None as "not answered yet"."""

import numpy as np
import pytest
import torch

from ssog_lab import ops, viz


def trace_data(lf: viz.LiveFigure) -> list[np.ndarray]:
    """Every x/y/z array of the figure's traces, as float arrays, to compare before and after an update."""
    arrays = []
    for trace in lf.figure.data:
        for key in ("x", "y", "z"):
            value = getattr(trace, key, None)
            if value is not None:
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


def test_edge_detector_check():
    assert viz.check_edge_detector(None, None, None).status == "unanswered"
    good = viz.check_edge_detector([0, 0], [1, 3], [1, -1])
    assert good and good.status == "correct"
    assert viz.check_edge_detector([0, 0], [1, 3], [1, -0.5]).status == "wrong"  # Σα ≠ 0: flat ≠ 0
    assert viz.check_edge_detector([0, 0], [3, 1], [1, -1]).status == "wrong"  # surround narrower
    assert viz.check_edge_detector([0], [1], [1]).status == "wrong"  # one atom
    assert viz.check_edge_detector([0, 0], [1, 3], "x").status == "wrong"  # unreadable
    figure = viz.edge_response([0, 0], [1, 3], [1, -1], "camera", size=16)
    assert np.asarray(figure.data[1].z).shape == (16, 16)


def test_check_number_tolerance_and_placeholder():
    assert viz.check_number(None, 8).status == "unanswered"
    assert viz.check_number(8, 8, rel=0.0)
    assert viz.check_number(8.1, 8, rel=0.02)
    assert viz.check_number(9, 8, rel=0.02).status == "wrong"
    assert viz.check_number("eight", 8).status == "wrong"


def test_photo_grid_rejects_bad_names():
    with pytest.raises(ValueError, match="name"):
        viz.photo_grid("no_such_photo")
