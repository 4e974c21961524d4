"""Exercises of notebook 03 (registered with `@exercise`; see the package docstring)."""

from . import exercise  # noqa: F401
