"""Moved to planner.frameworks.torchtitan.config_cli (planner/frameworks/torchtitan/config_cli.py); import it from there.

This path is kept for one release only. It names the very same module object, so attributes,
monkeypatches and private names agree whichever path a caller used."""

import sys

from planner.frameworks.torchtitan import config_cli as _moved

sys.modules[__name__] = _moved
