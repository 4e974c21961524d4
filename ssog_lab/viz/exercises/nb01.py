"""Exercises of notebook 01 (registered with `@exercise`; see the package docstring)."""

from . import exercise  # noqa: F401
