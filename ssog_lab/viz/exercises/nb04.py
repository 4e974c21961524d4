"""Exercises of notebook 04 (registered with `@exercise`; see the package docstring)."""

from . import exercise  # noqa: F401
