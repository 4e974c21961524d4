"""Every registered exercise accepts its solution, rejects its registered wrong answer, and never shows the
expected answer to a learner who has not found it."""

import re

import pytest

from ssog_lab import exercises, lipschitz, ode_cost, viz

# Exercises that ask the learner to implement a library function: their registered solution *is* the library,
# which is refused as an answer; the notebooks' worked solutions are the accepted implementations (tested below).
IMPLEMENTATIONS = {"01.matrix", "02.two_stage", "03.bound", "03.exact", "03.picard", "04.euler_step", "04.rk4_step",
                   "06.steered"}


@pytest.mark.parametrize("key", sorted(exercises.EXERCISES))
def test_solution_is_accepted_and_the_wrong_answer_rejected(key):
    item = exercises.EXERCISES[key]
    if key in IMPLEMENTATIONS:
        # the library's function itself, and a function that looks it up and calls it when run
        refused = [exercises.check(key, answer) for answer in (item.solution(), lambda *args: item.solution()(*args))]
        assert [v.status for v in refused] == ["wrong", "wrong"], key
        assert all("this exercise asks you to write" in v.message for v in refused), refused
    else:
        assert exercises.check(key, item.solution()).status == "correct"
    verdict = exercises.check(key, item.wrong)
    assert verdict.status == "wrong"
    assert exercises.check(key, None).status == "unanswered"
    expected = item.solution()
    shown = (verdict.message, exercises.check(key, None).message, item.hint)
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        for text in shown:
            assert f"{expected:.3g}" not in text and f"{expected:.4g}" not in text, text
    if isinstance(expected, (set, frozenset)):  # no option letter of the answer stands alone in what is shown
        for text in shown:  # ("a" is also the article, so it cannot be checked this way)
            alone = [x for x in expected - {"a"} if re.search(rf"(?<![\w'’]){x}(?![\w'’])", text)]
            assert not alone, text


def test_a_call_to_the_library_is_refused_under_any_name():
    """The refusal follows the function's code, not its name: an alias held in a closure, or a call whose result is
    thrown away before another answer is returned."""
    from ssog_lab.lipschitz import ssog_lipschitz_bound as alias

    def discarding(*args):
        alias(*args)  # the library's answer, computed and dropped
        return exercises.EXERCISES["03.bound"].wrong(*args)

    for answer in (lambda *args: alias(*args), discarding):
        verdict = exercises.check("03.bound", answer)
        assert verdict.status == "wrong" and "your answer calls ssog_lab.lipschitz.ssog_lipschitz_bound" in \
            verdict.message


def test_the_mechanism_judges_numbers_sets_and_functions():
    import torch

    assert exercises.close(0.01)(1.005, 1.0) and not exercises.close(0.01)(1.02, 1.0)
    assert exercises.same_set("a, C", {"a", "c"}) and not exercises.same_set({"a"}, {"a", "c"})
    judge = exercises.same_function(lambda: (torch.arange(4.0),))
    assert judge(lambda x: x * 2, lambda x: 2 * x) and not judge(lambda x: x + 2, lambda x: 2 * x)
    with pytest.raises(ValueError, match="no exercise"):
        exercises.check("99.none", 1)


# --- the notebooks' side: check cells are bare calls, and every worked solution is accepted -----------------

import json  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CHECK_CALL = re.compile(r'exercises\.check\("(?P<key>(?P<nb>\d\d)\.\w+)", (?P<var>\w+)\)')


def cells(path: Path, kind: str) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == kind]


def check_calls(path: Path) -> list[re.Match]:
    return [CHECK_CALL.fullmatch(source.strip()) for source in cells(path, "code") if "exercises.check(" in source]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_check_cells_hold_only_the_call_to_their_own_notebooks_exercises(path):
    calls = check_calls(path)
    assert all(calls), "a cell that calls exercises.check must hold exactly `exercises.check(\"NN.name\", answer)`"
    assert all(call["nb"] == path.name[:2] for call in calls)
    registered = {key for key in exercises.EXERCISES if key.startswith(path.name[:2] + ".")}
    assert registered <= {call["key"] for call in calls}, "every registered exercise has its check cell"


# Notebooks whose every checked exercise has its worked solution as code (00–04 solve their implementation
# exercises in code and some recall questions in words).
FULLY_SOLVED = {"05", "06", "07", "08"}


def notebook_namespace(number: str) -> dict:
    """What a notebook's solution code may use: the names its first cells import or define."""
    import math
    import statistics

    import torch

    from ssog_lab import bench, learned, lipschitz, models, ops, train
    from ssog_lab.results.benchmarks import host_label, stored_sources
    from ssog_lab.results.ledger import claims_ledger

    namespace = {"math": math, "statistics": statistics, "torch": torch, "ops": ops, "viz": viz, "ode_cost": ode_cost,
                 "lipschitz": lipschitz, "learned": learned, "bench": bench, "models": models, "train": train,
                 "RESULTS": ROOT / "docs" / "results", "claims_ledger": claims_ledger, "host_label": host_label,
                 "stored_sources": stored_sources}
    if number == "06":  # the shipped checkpoint, as notebook 06 loads it
        model, _ = train.load_model(ROOT / "data" / "checkpoints" / "nano_ssog_steered_mnist5k.pt")
        namespace.update(model=model, mixers=learned.ssog_mixers(model))
    return namespace


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_worked_solutions_in_the_notebook_are_accepted(path):
    """Run every ```python block of the collapsed solutions, then check each answer variable they set."""
    namespace = notebook_namespace(path.name[:2])
    for source in cells(path, "markdown"):
        if "<summary>Solution</summary>" in source:
            for block in re.findall(r"```python\n(.*?)```", source, flags=re.S):
                exec(block, namespace)  # noqa: S102 — the notebook's own solution code
    calls = check_calls(path)
    solved = [call for call in calls if call["var"] in namespace]
    for call in solved:
        assert exercises.check(call["key"], namespace[call["var"]]).status == "correct", call["key"]
    implementations = {key for key in IMPLEMENTATIONS if key.startswith(path.name[:2])}
    assert implementations <= {call["key"] for call in solved}, "every implementation has a worked solution"
    assert solved or path.name[:2] in {"00"}, "implementation exercises come with solution code"
    if path.name[:2] in FULLY_SOLVED:
        assert {c["var"] for c in calls} <= set(namespace), "every check has its worked solution as code"


def test_registered_wrong_functions_fail_by_their_mistake_not_by_crashing():
    """A wrong function answer of 01–03 runs and returns the right shape: it is rejected for its slip (finite
    but different values, or NaN where the slip is the naive formula), not for an error."""
    import torch

    from ssog_lab.exercises import nb01, nb02, nb03

    cases = {"02.two_stage": [nb02._inputs()], "03.bound": [nb03._inputs()], "03.exact": [nb03._inputs()],
             "03.picard": [nb03._picard_inputs()]}
    for key, inputs in cases.items():
        item = exercises.EXERCISES[key]
        for args in inputs:
            got, want = item.wrong(*args), item.solution()(*args)
            assert got.shape == want.shape and bool(torch.isfinite(got).all()), key
            assert not torch.allclose(got, want, rtol=1e-5, atol=1e-6), key
    # the naive exp / sum agrees on ordinary atoms and breaks (0/0) only for the centre far off the axis
    item = exercises.EXERCISES["01.matrix"]
    for mu, sigma, n in nb01._MATRIX_CASES:
        args = torch.tensor(mu, dtype=torch.float64), torch.tensor(sigma, dtype=torch.float64), n
        got, want = item.wrong(*args), item.solution()(*args)
        assert got.shape == want.shape
        assert torch.allclose(got, want) if abs(mu) < 100 else bool(torch.isnan(got).all())


def test_the_nfe_figures_in_notebook_03s_solution_are_what_its_cell_measures():
    """Exercise 7's solution quotes dopri5's NFE on the tied-score ray; the reader's cell must print them."""
    solution = next(text for text in cells(ROOT / "notebooks/03_lipschitz_and_picard_lindelof.ipynb", "markdown")
                    if "ode_cost.dopri5_nfe_along_ray(f, x, s)" in text)
    answer = solution.split("<summary>Solution</summary>")[-1]  # exercise 7's, after its code cell
    quoted = [[float(n) for n in group.split(", ")] for group in re.findall(r"(\d+(?:, \d+){3})[;)]", answer)]
    x = lipschitz.ray_point(tied=True)
    mixers = lipschitz.ray_mixers()
    measured = {name: [ode_cost.dopri5_nfe_along_ray(mixers[name], x, s) for s in (1, 4, 16, 64)]
                for name in ("SDPA (dense attention)", "fixed SSoG")}
    assert quoted == [measured["SDPA (dense attention)"], measured["fixed SSoG"]]


# --- the verdicts and the plain judges (check_number, check_choices, check_edge_detector) -------------


def test_edge_detector_check():
    assert exercises.check_edge_detector(None, None, None).status == "unanswered"
    good = exercises.check_edge_detector([0, 0], [1, 3], [1, -1])
    assert good and good.status == "correct"
    assert exercises.check_edge_detector([0, 0], [1, 3], [1, -0.5]).status == "wrong"  # Σα ≠ 0: flat ≠ 0
    assert exercises.check_edge_detector([0, 0], [3, 1], [1, -1]).status == "wrong"  # surround narrower
    assert exercises.check_edge_detector([0], [1], [1]).status == "wrong"  # one atom
    assert exercises.check_edge_detector([0, 0], [0.3, 0.6], [1, -1]).status == "wrong"  # both within a token
    assert exercises.check_edge_detector([0, 0], [1, 1.2], [1, -1]).status == "wrong"  # surround barely wider
    assert exercises.check_edge_detector([0, 0], [1, 1.6], [1, -1])  # the classic ratio passes
    assert exercises.check_edge_detector([0, 0], [3, 8], [1, -1]).status == "wrong"  # the response spreads far
    assert exercises.check_edge_detector([0, 0], [1, 3], "x").status == "wrong"  # unreadable


def test_check_number_tolerance_and_placeholder():
    assert exercises.check_number(None, 8).status == "unanswered"
    assert exercises.check_number(8, 8, rel=0.0)
    assert exercises.check_number(8.1, 8, rel=0.02)
    assert exercises.check_number(9, 8, rel=0.02).status == "wrong"
    assert exercises.check_number("eight", 8).status == "wrong"
    assert "8" not in exercises.check_number(9, 8, rel=0.02, what="the value").message  # never the expected value


def test_verdicts_are_plain_text():
    for status in ("correct", "wrong", "unanswered"):
        text = str(exercises.Check(status, "m")) + exercises.Check(status, "m")._repr_html_()
        assert text.isascii() or all(ord(ch) < 0x2000 for ch in text), text  # no emoji (no font in Chromium)


def test_check_choices():
    options = {"a": "x", "b": "y", "c": "z"}
    assert exercises.check_choices(None, {"a"}, options).status == "unanswered"
    assert exercises.check_choices({"a", "c"}, {"a", "c"}, options)
    assert exercises.check_choices("a, c", {"a", "c"}, options)
    assert exercises.check_choices({"a"}, {"a", "c"}, options).status == "wrong"
    assert exercises.check_choices({"q"}, {"a"}, options).status == "wrong"
