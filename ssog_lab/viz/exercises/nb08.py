"""Exercises of notebook 08 (registered with `@exercise`; see the package docstring)."""

from . import exercise  # noqa: F401
