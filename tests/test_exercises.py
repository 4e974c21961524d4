"""Every registered exercise accepts its solution, rejects its registered wrong answer, and never shows the
expected answer to a learner who has not found it."""

import pytest

from ssog_lab import viz
from ssog_lab.viz import exercises


@pytest.mark.parametrize("key", sorted(exercises.EXERCISES))
def test_solution_is_accepted_and_the_wrong_answer_rejected(key):
    item = exercises.EXERCISES[key]
    assert viz.check(key, item.solution()).status == "correct"
    verdict = viz.check(key, item.wrong)
    assert verdict.status == "wrong"
    assert viz.check(key, None).status == "unanswered"
    expected = item.solution()
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        for shown in (verdict.message, viz.check(key, None).message):
            assert f"{expected:.3g}" not in shown and f"{expected:.4g}" not in shown, shown


def test_the_mechanism_judges_numbers_sets_and_functions():
    import torch

    assert exercises.close(0.01)(1.005, 1.0) and not exercises.close(0.01)(1.02, 1.0)
    assert exercises.same_set("a, C", {"a", "c"}) and not exercises.same_set({"a"}, {"a", "c"})
    judge = exercises.same_function(lambda: (torch.arange(4.0),))
    assert judge(lambda x: x * 2, lambda x: 2 * x) and not judge(lambda x: x + 2, lambda x: 2 * x)
    with pytest.raises(ValueError, match="no exercise"):
        viz.check("99.none", 1)
