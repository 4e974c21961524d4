"""The defaults table (ssog_lab.experiments.defaults): the stored table used the library's current defaults,
its runs are what the plan says, and the runner resumes, records and reports (one real tiny run)."""

import dataclasses
import json

import pytest
import torch

from ssog_lab.experiments import defaults
from ssog_lab.models import ViTConfig, defining_fields
from ssog_lab.train import TrainConfig


def test_the_stored_table_used_the_library_defaults():
    """Every stored run's model and recipe equal what build_model and TrainConfig() give today: a change of a
    default without re-running the table fails here."""
    rows = defaults.read_rows()
    assert rows, "docs/results/defaults/accuracy.csv holds no runs"
    for row in rows:
        assert row["variant"] == "defaults"
        _assert_configs_are_todays(row)
        # and the recipe is TrainConfig()'s but for the epochs, the seed and the progress bar
        assert {**json.loads(row["train_config"]), "epochs": 10, "seed": 0, "progress": True} == \
            dataclasses.asdict(TrainConfig())


def test_the_stored_validation_runs_compared_todays_defaults_with_each_variant():
    rows = defaults.read_rows(defaults.VALIDATION_CSV_PATH)
    assert {(r["dataset"], r["mixer"], r["variant"]) for r in rows} == \
        {(run.dataset, run.mixer, run.variant) for run in defaults.validation_plan()}
    for row in rows:
        _assert_configs_are_todays(row)


def _assert_configs_are_todays(row: dict) -> None:
    run = defaults.Run(row["dataset"], row["grid"], row["mixer"], row["seed"], row["variant"])
    with torch.device("meta"):
        model, recipe = defaults.model_and_recipe(run)
    assert defining_fields(json.loads(row["model_config"])) == defining_fields(dataclasses.asdict(model.config)), run
    assert json.loads(row["train_config"]) == dataclasses.asdict(recipe), run


def test_the_stored_table_covers_every_cell_with_at_least_three_seeds():
    rows = defaults.read_rows()
    for dataset in defaults.DATASETS:
        for grid in defaults.GRIDS:
            for mixer in defaults.MIXERS:
                seeds = {r["seed"] for r in rows if (r["dataset"], r["grid"], r["mixer"]) == (dataset, grid, mixer)}
                assert len(seeds) >= 3, (dataset, grid, mixer, seeds)


def test_the_model_config_is_the_default_but_for_the_data_shape():
    model, _ = defaults.model_and_recipe(defaults.Run("digits", 14, "ssog", 0))
    c = model.config
    assert (c.in_chans, c.num_classes, c.image_size, c.patch_size) == (1, 10, 28, 2)
    reference = ViTConfig(image_size=28, patch_size=2, in_chans=1, num_classes=10, dim=64, layers=4, heads=2,
                          mixer="ssog")
    assert dataclasses.asdict(c) == dataclasses.asdict(reference)


def test_data_sets_have_the_stated_sizes_and_silhouettes_are_binary():
    for name, (_, n_train, n_test) in defaults.DATASETS.items():
        if name == "digits":
            continue  # the embedded set, covered in test_data.py
        try:
            train, test = defaults.load(name)
        except FileNotFoundError as err:
            pytest.skip(str(err))
        assert (len(train), len(test)) == (n_train, n_test)
        if name == "silhouettes":
            assert set(train.images.unique().tolist()) <= {0, 255}


def test_run_resumes_records_and_reports(tmp_path, monkeypatch):
    """Two real runs (digits, 7×7, one epoch of 256 images); the second call runs nothing."""
    monkeypatch.setattr(defaults, "EPOCHS", 1)
    path = tmp_path / "defaults.csv"
    runs = [defaults.Run("digits", 7, "sdpa", 0), defaults.Run("digits", 7, "ssog", 0)]
    original = defaults.load
    monkeypatch.setattr(defaults, "load", lambda name, validation: tuple(
        defaults._subset(s, n, 0) for s, n in zip(original(name, validation), (256, 128), strict=True)))
    monkeypatch.setattr(defaults, "_child", lambda run: _in_process(run))
    assert defaults.execute(runs, jobs=2, path=path) == 0
    rows = defaults.read_rows(path)
    assert sorted(r["mixer"] for r in rows) == ["sdpa", "ssog"]
    assert all(0 <= r["test_accuracy"] <= 1 and r["infer_images_per_s"] > 0 for r in rows)
    monkeypatch.setattr(defaults, "_child", lambda run: pytest.fail(f"{run} ran again"))
    assert defaults.execute(runs, jobs=2, path=path) == 0
    text = defaults.report(rows)
    assert "| digits | 7×7 |" in text and "fixed − SDPA" in text


def test_validation_runs_hold_out_a_fifth_of_the_training_set_and_never_see_the_test_set():
    train, test = defaults.load("digits")
    fit_part, held_out = defaults.load("digits", validation=True)
    assert (len(fit_part), len(held_out)) == (len(train) - len(train) // 5, len(train) // 5)
    images = lambda d: sorted(bytes(image.numpy()) for image in d.images)  # noqa: E731
    assert sorted(images(fit_part) + images(held_out)) == images(train)  # a partition of the training images
    old = defaults.Run("digits", 7, "ssog", 0, "old (local blur, atom lr ×1, lr 2e-3)", validation=True)
    model, recipe = defaults.model_and_recipe(old)
    assert (model.config.ssog_init_spread, model.config.ssog_init_amplitudes) == (2.0, "blur")
    assert (recipe.atom_lr_scale, recipe.lr) == (1.0, 2e-3)
    with pytest.raises(ValueError, match="variant"):
        defaults.model_and_recipe(defaults.Run("digits", 7, "sdpa", 0, "atom lr ×1"))


class _Done:
    """A finished child process whose stdout is the row of a run made in this process."""

    def __init__(self, row: dict):
        import io

        self.stdout, self.returncode = io.StringIO(json.dumps(row) + "\n"), 0

    def poll(self):
        return 0


def _in_process(run):
    return _Done(defaults.run_one(run))
