"""Errors the cost model raises for specs that are well-formed but inconsistent."""


from typing import Annotated

from pydantic import AfterValidator

MAX_NAME_CHARS = 200  # a name is a label in tables and file headers; 10,000 characters of it is a mistake


def _bounded_name(name: str) -> str:
    if len(name) > MAX_NAME_CHARS:
        raise ValueError(f"String should have at most {MAX_NAME_CHARS} characters (got {len(name):,})")
    return name


# A spec's name: any text (a lone surrogate included: it is shown escaped), at most MAX_NAME_CHARS long.
# A validator, not max_length, which would make pydantic refuse text that is not valid UTF-8.
Name = Annotated[str, AfterValidator(_bounded_name)]


class SpecError(ValueError):
    """A spec or layout breaks a rule; the message names the fields and the numbers."""
