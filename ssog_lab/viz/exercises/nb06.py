"""Exercises of notebook 06 (registered with `@exercise`; see the package docstring)."""

from . import exercise  # noqa: F401
