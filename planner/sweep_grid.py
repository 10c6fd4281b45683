"""The options of `parplan sweep` read into numbers: the node grid, the cluster list, the deadline,
the budget and the price per GPU-hour (per cluster), and the global batch rule. Pure functions; each
mistake is a UserError (exit 2) naming the option and the value.

`--nodes` forms (items separated by commas, merged, sorted, duplicates dropped):
- `64`: one node count;
- `8..256`: powers of two times the start, up to the end (8,16,32,64,128,256), the same as `8..256:x2`;
- `8..256:x4`: a geometric step (8,32,128); `8..64:+8`: an arithmetic step (8,16,...,64).
"""

from __future__ import annotations

import math
import re
from typing import Optional

from planner.errors import UserError

MAX_POINTS = 512  # node counts per cluster: a sweep of more is a typo, not a question
MAX_NODES = 1_000_000  # ClusterSpec.num_nodes' bound
DEFAULT_BATCH = 512  # sequences per step when --global-batch is not given (see default_batch): plan's default too
# (planner.cli_common.DEFAULT_PLAN_BATCH), so a sweep point and `plan` at that size agree
_RANGE = re.compile(r"^(\d{1,18})\.\.(\d{1,18})(?::(x|\+)?(\d{1,18}))?$", re.ASCII)  # ASCII: int() reads '٨' too
_DURATION = re.compile(r"^(\d+(?:\.\d*)?(?:e\d+)?)\s*(w|d|h|m|s)$", re.IGNORECASE | re.ASCII)
_NUMBER = re.compile(r"[0-9]+\.?[0-9]*(e[+-]?[0-9]+)?|\.[0-9]+(e[+-]?[0-9]+)?", re.IGNORECASE | re.ASCII)
SECONDS_PER = {"w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1}
_MONEY_SUFFIX = {"k": 1e3, "m": 1e6, "b": 1e9}


def parse_nodes(text: str) -> list[int]:
    """The node counts of `--nodes` (module docstring), ascending."""
    items = [part.strip() for part in str(text).split(",")]
    if not text or not all(items):
        raise UserError(f"--nodes {text!r}: expected counts or ranges like 8..256, 8..256:x2, 8..64:+8, 8,16,64")
    found: set[int] = set()
    for item in items:
        found |= set(_nodes_item(item, text))
        if len(found) > MAX_POINTS:
            raise UserError(f"--nodes {text!r}: more than {MAX_POINTS} node counts")
    return sorted(found)


def _nodes_item(item: str, text: str) -> list[int]:
    if item.isascii() and item.isdigit() and len(item) <= 18:
        return [_node_count(int(item), text)]
    m = _RANGE.match(item)
    if not m:
        raise UserError(f"--nodes {text!r}: {item!r} is not a count or a range like 8..256, 8..256:x2, 8..64:+8")
    start, end = _node_count(int(m[1]), text), _node_count(int(m[2]), text)
    kind, step = m[3] or "x", int(m[4] or 2)
    if end < start:
        raise UserError(f"--nodes {text!r}: range {item!r} ends before it starts")
    if (kind == "x" and step < 2) or step < 1:
        raise UserError(f"--nodes {text!r}: step {kind}{step} never advances (use x2 or more, +1 or more)")
    if kind == "+" and (end - start) // step + 1 > MAX_POINTS:
        raise UserError(f"--nodes {text!r}: more than {MAX_POINTS} node counts")
    if end > start and (start * step if kind == "x" else start + step) > end:
        raise UserError(f"--nodes {text!r}: step {kind}{step} jumps past {end} from {start} (a range of one count; "
                        f"give {start} alone or a smaller step)")
    return _geometric(start, end, step) if kind == "x" else list(range(start, end + 1, step))


def _geometric(start: int, end: int, factor: int) -> list[int]:
    out, n = [], start
    while n <= end:
        out.append(n)
        n *= factor
    return out


def _node_count(n: int, text: str) -> int:
    if not 1 <= n <= MAX_NODES:
        raise UserError(f"--nodes {text!r}: node counts run from 1 to {MAX_NODES:,} (got {n})")
    return n


def parse_clusters(text: str) -> list[str]:
    """`--cluster A,B`: preset names or spec files, in order, without repeats."""
    names = [c.strip() for c in str(text or "").split(",")]
    if not text or not all(names):
        raise UserError(f"--cluster {text!r}: expected presets or spec files separated by commas, "
                        "e.g. dgx-h100,dgx-b200")
    return list(dict.fromkeys(names))


def parse_duration_s(text: Optional[str], option: str = "--deadline") -> Optional[float]:
    """`30d`, `720h`, `4w`, `90m`, `3600s` in seconds (None when not given)."""
    if text is None:
        return None
    m = _DURATION.match(str(text).strip())
    value = float(m[1]) * SECONDS_PER[m[2].lower()] if m else 0.0
    if not m or not 0 < value < 1e12:
        raise UserError(f"{option} {text!r}: expected a positive duration with a unit, e.g. 30d, 720h, 4w")
    return value


def parse_money(text: Optional[str], option: str = "--budget") -> Optional[float]:
    """`2e6`, `$2,000,000`, `2M`, `500k` in dollars (None when not given)."""
    if text is None:
        return None
    raw = str(text).strip().lstrip("$").replace(",", "").replace("_", "")
    scale = _MONEY_SUFFIX.get(raw[-1:].lower(), 1.0) if raw else 1.0
    number = raw[:-1] if scale != 1.0 else raw
    value = float(number) * scale if _NUMBER.fullmatch(number) else -1.0
    if not (0 < value < 1e15):
        raise UserError(f"{option} {text!r}: expected a positive amount in dollars, e.g. 2e6, $2,000,000, 2M")
    return value


def parse_prices(text: Optional[str], clusters: dict[str, tuple[str, ...]]) -> dict[str, Optional[float]]:
    """`--price-per-gpu-hour`: one number for every cluster, or `KEY=USD,...` where KEY names a
    cluster by its argument, its name, its GPU's name, or a dash-separated part of one of them
    (h100 for dgx-h100). `clusters` maps each --cluster argument to those names. Every cluster then
    needs exactly one price; without the option, None for each."""
    if text is None:
        return {arg: None for arg in clusters}
    if "=" not in text:
        price = _price(text, text)
        return {arg: price for arg in clusters}
    prices: dict[str, Optional[float]] = {arg: None for arg in clusters}
    for pair in text.split(","):
        key, _, value = pair.partition("=")
        key = key.strip().lower()
        hits = [arg for arg, names in clusters.items() if _names_match(key, names)]
        if not key or not hits:
            raise UserError(f"--price-per-gpu-hour {text!r}: {key!r} names none of the clusters "
                            f"({', '.join(clusters)}) nor their GPUs")
        for arg in hits:
            if prices[arg] is not None:
                raise UserError(f"--price-per-gpu-hour {text!r}: two prices for cluster {arg}")
            prices[arg] = _price(value, text)
    missing = [arg for arg, p in prices.items() if p is None]
    if missing:
        raise UserError(f"--price-per-gpu-hour {text!r}: no price for cluster {', '.join(missing)}")
    return prices


def _names_match(key: str, names: tuple[str, ...]) -> bool:
    return any(key == n.lower() or key in n.lower().split("-") for n in names)


def _price(value: str, text: str) -> float:
    number = str(value).strip().lstrip("$")
    price = float(number) if _NUMBER.fullmatch(number) else -1.0  # ASCII: float() reads '２' as 2
    if not (0 < price < 1e6):
        raise UserError(f"--price-per-gpu-hour {text!r}: {value!r} is not a positive price in dollars per GPU-hour")
    return price


def default_batch(num_gpus: int, base: int = DEFAULT_BATCH) -> int:
    """The global batch (sequences) of a point when --global-batch is not given: `base` when the GPU
    count is a power of two; else its odd factor f times the power of two nearest base / f, so that
    every data-parallel degree the point can use (its GPUs over powers of two) divides the batch."""
    odd = num_gpus
    while odd % 2 == 0:
        odd //= 2
    power = 2 ** max(0, round(math.log2(max(base / odd, 1))))
    return odd * power
