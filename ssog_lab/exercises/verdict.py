"""A self-check's verdict (`Check`: correct, wrong or not answered yet, shown as text or coloured HTML) and the two
plain judges that give one without a registered exercise: a number within a tolerance, a set of option letters."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass


@dataclass
class Check:
    """The verdict of an exercise self-check: `status` is "correct", "wrong" or "unanswered"."""

    status: str
    message: str

    def __bool__(self) -> bool:
        return self.status == "correct"

    def __str__(self) -> str:
        # Plain-text verdicts: no emoji (a browser without an emoji font shows them as empty boxes).
        mark = {"correct": "Correct", "wrong": "Not yet", "unanswered": "Not answered yet"}[self.status]
        return f"{mark}: {self.message}"

    def _repr_html_(self) -> str:
        colour = {"correct": "#1a7f37", "wrong": "#cf222e", "unanswered": "#6e7781"}[self.status]
        text = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(str(self)))  # `name` is code, as in Markdown
        return f'<div style="color:{colour};font-weight:600">{text}</div>'


def unanswered(hint: str) -> Check:
    return Check("unanswered", f"replace the None with your answer and run this cell again. Hint: {hint}")


def check_number(answer, expected: float, rel: float = 0.02, what: str = "the value", hint: str = "") -> Check:
    """Compare a numeric answer with the expected value up to a relative tolerance; None = not answered.
    A wrong answer gets the hint, never the expected value (`check`, the registry's, is the newer mechanism)."""
    if answer is None:
        return unanswered(hint or f"compute {what}")
    try:
        value = float(answer)
    except (TypeError, ValueError):
        return Check("wrong", f"expected a number for {what}, got {answer!r}")
    if abs(value - expected) <= rel * max(abs(expected), 1e-12):
        return Check("correct", f"{what} = {expected:.4g}")
    return Check("wrong", f"{what} is not {value:.4g} yet. {hint}")


def check_choices(answer, expected: set[str], options: dict[str, str]) -> Check:
    """Multiple choice: `answer` is a set (or list/string) of option letters; None = not answered."""
    if answer is None:
        return unanswered("give the set of letters, e.g. {\"a\", \"c\"}")
    chosen = {str(a).strip().lower() for a in (answer if not isinstance(answer, str) else answer.replace(",", " ")
                                                .split())}
    unknown = chosen - set(options)
    if unknown:
        return Check("wrong", f"unknown option(s) {sorted(unknown)}; choose among {sorted(options)}")
    if chosen == expected:
        return Check("correct", "; ".join(f"{k}) {options[k]}" for k in sorted(expected)))
    missing, extra = sorted(expected - chosen), sorted(chosen - expected)
    return Check("wrong", (f"{len(missing)} right option(s) missing" if missing else "")
                 + ("; " if missing and extra else "") + (f"{len(extra)} wrong option(s) chosen" if extra else ""))
