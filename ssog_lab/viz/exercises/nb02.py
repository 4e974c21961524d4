"""Exercises of notebook 02 (registered with `@exercise`; see the package docstring)."""

from . import exercise  # noqa: F401
