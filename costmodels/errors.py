"""Errors the cost model raises for specs that are well-formed but inconsistent."""


class SpecError(ValueError):
    """A spec or layout breaks a rule; the message names the fields and the numbers."""
