"""Moved to planner.frameworks.deepspeed.export (planner/frameworks/deepspeed/export.py); import it from there.

This path is kept for one release only. It names the very same module object, so attributes,
monkeypatches and private names agree whichever path a caller used."""

import sys

from planner.frameworks.deepspeed import export as _moved

sys.modules[__name__] = _moved
