"""Exercises of notebook 00 (registered with `@exercise`; see the package docstring)."""

from . import exercise  # noqa: F401
