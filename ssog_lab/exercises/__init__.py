"""Self-checked exercises that never show their answer.

A notebook's check cell is one call, `exercises.check("01.peak", answer)`: the expected answer is computed by the
exercise's `solution` (with the library, never typed into the notebook), a wrong answer gets the exercise's
hint (never the expected value), and only a correct one gets the explanation. Each notebook's exercises
live in their own module (`nb01.py`, …) and register themselves with `@exercise`. The tests call every
solution, check that it is accepted, that the registered wrong answer is rejected, and that no check cell
of a notebook holds more than the call.

Kinds of answer, each with its judge: a number (`close(rel)`), a set of option letters (`same_set`), and a
function the student writes, run beside the library's on the same inputs (`same_function(inputs, forbid=…)`).
An implementation exercise forbids the library functions it asks for: an answer that is one of them, or calls
one while it runs, is refused, so its registered solution (the library) is refused too and the notebook's
worked solution is the implementation the tests accept.

Files: `_registry` (the registry, the judges, `check`), `verdict` (`Check`, what a learner sees, and the plain
judges `check_number` and `check_choices`), `nb00` … `nb08` (each notebook's exercises; `nb01` also holds
`check_edge_detector`, notebook 01's open centre–surround check). The exercises draw nothing: notebooks show a
`Check` as coloured text.
"""

from . import nb00, nb01, nb02, nb03, nb04, nb05, nb06, nb07, nb08  # noqa: F401  (each registers its exercises)
from ._registry import EXERCISES, Exercise, check, close, exercise, same_function, same_set
from .nb01 import check_edge_detector
from .verdict import Check, check_choices, check_number

__all__ = ["EXERCISES", "Check", "Exercise", "check", "check_choices", "check_edge_detector", "check_number", "close",
           "exercise", "same_function", "same_set"]
