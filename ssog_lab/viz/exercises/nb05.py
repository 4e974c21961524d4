"""Exercises of notebook 05 (registered with `@exercise`; see the package docstring)."""

from . import exercise  # noqa: F401
