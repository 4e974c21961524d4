"""Exercises of notebook 07 (registered with `@exercise`; see the package docstring)."""

from . import exercise  # noqa: F401
