"""All notebooks (00–08) as a course: a recap, goals and running time at the top, references at the end; every
check cell is one `exercises.check` call on a registered exercise of its own notebook, and each group of check cells is
followed by a folded solution; every registered exercise is used; nothing is committed executed."""

import ast
import json
import re
from pathlib import Path

import pytest

from ssog_lab import exercises

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_the_course_has_all_nine_notebooks():
    assert [p.name[:2] for p in NOTEBOOKS] == [f"{i:02d}" for i in range(9)]


def cells(path):
    return [(c["cell_type"], "".join(c["source"]), c) for c in json.loads(path.read_text())["cells"]]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_check_cells_are_one_call_followed_by_a_folded_solution(path):
    number = path.name[:2]
    found = cells(path)
    keys = []
    for i, (kind, text, _) in enumerate(found):
        if kind != "code" or "exercises.check(" not in text:
            continue
        call = ast.parse(text).body
        assert len(call) == 1 and isinstance(call[0], ast.Expr), f"check cell {i} holds more than the call: {text!r}"
        key = call[0].value.args[0].value
        assert key.startswith(f"{number}.") and key in exercises.EXERCISES, key
        keys.append(key)
        following = next(c for c in found[i + 1:] if not (c[0] == "code" and "exercises.check(" in c[1]))
        assert following[0] == "markdown" and following[1].startswith("<details><summary>Solution</summary>"), i
    registered = {k for k in exercises.EXERCISES if k.startswith(f"{number}.")}
    assert sorted(keys) == sorted(registered)  # every exercise is asked, none twice


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_are_committed_clean_and_teach_in_the_course_shape(path):
    found = cells(path)
    for kind, _, cell in found:
        if kind == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None
    first = found[0][1]
    assert re.search(r"\*\*Recap\b", first) and "**Learning goals" in first and "**Running time**" in first
    assert "## References" in found[-1][1] and "arXiv:2611.08236" in found[-1][1]
    text = "\n".join(t for _, t, _ in found)
    assert "\n## Exercises" in "\n" + text, "a course notebook ends its teaching with exercises"
    assert "✅" not in text and "❌" not in text
    assert not re.search(r"\b24 (steered )?heads\b", text)  # steered SSoG's default head count changed


def test_the_implementation_solutions_of_04_are_accepted_and_their_slips_rejected():
    """The folded ```python solutions of 04 set answer_4 / answer_5; the check accepts them, and rejects a step
    that forgets h or takes a full step where half a step belongs."""
    namespace = {}
    path = next(p for p in NOTEBOOKS if p.name.startswith("04"))
    for kind, text, _ in cells(path):
        if kind == "markdown" and "<summary>Solution</summary>" in text:
            for block in re.findall(r"```python\n(.*?)```", text, flags=re.S):
                exec(block, namespace)  # noqa: S102 — the notebook's own solution code
    assert exercises.check("04.euler_step", namespace["answer_4"]).status == "correct"
    assert exercises.check("04.rk4_step", namespace["answer_5"]).status == "correct"
    assert exercises.check("04.rk4_step", namespace["answer_4"]).status == "wrong"  # Euler is not RK4
    assert exercises.check("04.euler_step", lambda f, t, x, h: None).status == "wrong"  # the unfinished template


@pytest.mark.parametrize("depth", ["discrete", "looped", "ode"])
def test_the_model_written_out_in_04_is_the_model_build_model_builds(depth):
    """Notebook 04's plain-torch model, run on the weights of a `build_model` model with atoms moved off their
    initialization (offsets, widths, signed amplitudes), gives its logits."""
    import torch

    from ssog_lab import models, ode

    source = next(text for kind, text, _ in cells(NOTEBOOKS[4]) if kind == "code" and "def inline_forward" in text)
    namespace = {"torch": torch, "ode": ode}
    exec(source, namespace)  # noqa: S102 — the notebook's own code
    torch.manual_seed(7)
    model = models.build_model("nano", depth=depth, mixer="ssog", in_chans=1, num_classes=10, ode_step_size=0.5)
    model = model.double().eval()
    with torch.no_grad():
        for block in model.blocks:
            block.mixer.mu.normal_(0, 3)
            block.mixer.log_sigma.uniform_(-1, 1.5)
            block.mixer.amp.normal_()
        images = torch.randn(2, 1, 32, 32, dtype=torch.float64)
        torch.testing.assert_close(namespace["inline_forward"](model, images, depth, step_size=0.5), model(images),
                                   rtol=1e-9, atol=1e-12)
