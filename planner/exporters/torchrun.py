"""Moved to planner.frameworks.fsdp.export (planner/frameworks/fsdp/export.py); import it from there.

This path is kept for one release only. It names the very same module object, so attributes,
monkeypatches and private names agree whichever path a caller used."""

import sys

from planner.frameworks.fsdp import export as _moved

sys.modules[__name__] = _moved
