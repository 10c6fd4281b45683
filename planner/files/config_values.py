"""Values read from a framework's config file, checked alike by every framework's reader: whole numbers
of sane size and a value quoted short in an error line.

Used by planner.frameworks.deepspeed.config_json and planner.frameworks.torchtitan.config_values (the
readers of their JSON and TOML settings); types are strict (a bool is no number).
"""

from __future__ import annotations

MAX_COUNT = 10**8  # degrees, batch sizes and sequence lengths beyond this are no real run


def short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
