"""The exercise registry: `@exercise` registers a notebook's exercise, the judges compare an answer with the
solution, and `check` gives the verdict (the package docstring says how they are used)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from .verdict import Check, unanswered

Judge = Callable[[object, object], bool]


def close(rel: float = 0.02, abs_tol: float = 0.0) -> Judge:
    """A numeric answer within `rel` (relative) or `abs_tol` (absolute) of the expected value."""
    def judge(answer, expected) -> bool:
        value, target = float(answer), float(expected)
        return abs(value - target) <= max(rel * abs(target), abs_tol)
    return judge


def same_set(answer, expected) -> bool:
    """A set of option letters (a set, list or space/comma separated string), case-insensitive."""
    chosen = answer.replace(",", " ").split() if isinstance(answer, str) else answer
    return {str(a).strip().lower() for a in chosen} == {str(e).lower() for e in expected}


class CallsTheLibrary(Exception):
    """An implementation exercise's answer that is, or calls, the library function it asks the learner to write."""


@contextmanager
def _watching(functions: tuple[Callable, ...]):
    """Inside: the forbidden `functions` that run are recorded in the yielded list, by their code objects (a
    profile hook on this thread), so every alias, closure or stored reference to them is seen; the caller's hook is
    restored after."""
    codes = {f.__code__: f for f in functions}
    called: list[Callable] = []

    def hook(frame, event, _):
        if event == "call" and frame.f_code in codes:
            called.append(codes[frame.f_code])

    previous = sys.getprofile()
    sys.setprofile(hook)
    try:
        yield called
    finally:
        sys.setprofile(previous)


def same_function(inputs: Callable[[], tuple], rtol: float = 1e-5, atol: float = 1e-6,
                  forbid: tuple[Callable, ...] = ()) -> Judge:
    """A function the student wrote, called on `inputs()` beside the expected (library) function. `forbid`: the
    library functions the exercise asks the learner to write; an answer that is one of them, or runs one (under any
    name, even inside a try block), is refused (CallsTheLibrary)."""
    def judge(answer, expected) -> bool:
        args = inputs()
        want = expected(*args)
        itself = next((f for f in forbid if getattr(answer, "func", answer) is f), None)  # or a partial of it
        if itself is not None:
            raise CallsTheLibrary(f"your answer is {itself.__module__}.{itself.__name__}, the library's function: "
                                  "this exercise asks you to write it")
        with _watching(forbid) as called:
            try:
                got = answer(*args)
            finally:
                if called:  # refused even when the answer failed, or swallowed an error, after the call
                    raise CallsTheLibrary(f"your answer calls {called[0].__module__}.{called[0].__name__}, the "
                                          "function this exercise asks you to write")
        got = torch.as_tensor(got, dtype=torch.as_tensor(want).dtype)
        return got.shape == torch.as_tensor(want).shape and bool(torch.allclose(got, torch.as_tensor(want),
                                                                              rtol=rtol, atol=atol))
    return judge


@dataclass(frozen=True)
class Exercise:
    """One exercise: `solution()` computes the expected answer, `judge(answer, expected)` compares, `hint`
    is what a learner sees while unanswered or wrong, `explain` what they see once right (a text, or a function
    of the expected answer when the explanation depends on measured data), and `wrong` is a plausible wrong
    answer (the tests check that it is rejected)."""

    key: str
    solution: Callable[[], object]
    judge: Judge
    hint: str
    wrong: object
    explain: str | Callable[[object], str] = ""


EXERCISES: dict[str, Exercise] = {}


def exercise(key: str, *, hint: str, wrong: object, judge: Judge | None = None,
             explain: str | Callable[[object], str] = ""):
    """Decorator: register the decorated zero-argument solution function as exercise `key` ("NN.name")."""
    def register(solution: Callable[[], object]) -> Callable[[], object]:
        if key in EXERCISES:
            raise ValueError(f"exercise {key!r} is registered twice")
        EXERCISES[key] = Exercise(key, solution, judge or close(), hint, wrong, explain)
        return solution
    return register


def check(key: str, answer) -> Check:
    """The verdict on `answer` to exercise `key`; None means not answered yet. Never reveals the answer."""
    if key not in EXERCISES:
        raise ValueError(f"no exercise {key!r}; known: {sorted(EXERCISES)}")
    item = EXERCISES[key]
    if answer is None:
        return unanswered(item.hint)
    try:
        expected = item.solution()
        right = item.judge(answer, expected)
    except CallsTheLibrary as refusal:
        return Check("wrong", f"{refusal}. {item.hint}")
    except Exception as error:  # a learner's function that fails is a wrong answer, with the reason
        return Check("wrong", f"your answer could not be checked ({type(error).__name__}: {error}). {item.hint}")
    if not right:
        return Check("wrong", item.hint)
    explain = item.explain(expected) if callable(item.explain) else item.explain  # shown only once it is found
    return Check("correct", explain or "well done.")
