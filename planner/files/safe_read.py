"""One guarded way in for every file parplan reads: spec files, plan files, stack files, Hugging Face
config.json, DeepSpeed JSON, torchtitan TOML and launch scripts.

Why each guard: a FIFO or device would block or never end (regular files only, checked on the open
descriptor); a huge file would exhaust memory (a size cap checked while reading); deep nesting
overflows the parsers' recursion or makes PyYAML's scanner quadratic (a depth limit, checked on
the YAML event stream before anything is built, and on every parsed tree); millions of values would
take minutes to build and validate (at most MAX_NODES values, MAX_ITEMS per list or mapping, counted
on the YAML event stream and on every parsed tree); a key given twice would
silently lose one value (refused in JSON, YAML and TOML); a 5,000-digit integer, 1e400 or NaN would
overflow or poison the arithmetic (integers of at most 18 digits, finite floats). Every refusal is
a UserError naming the file and, where there is one, the key path.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any, Optional

import yaml

from planner.errors import UserError

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    tomllib = None

MAX_FILE_BYTES = 4 * 2**20
MAX_DEPTH = 64
MAX_NODES = 100_000  # a saved plan file has about a thousand
MAX_ITEMS = 10_000  # per list or mapping
MAX_PURE_YAML_CHARS = 2**20
MAX_INT_DIGITS = 18
MAX_KEY_SHOWN = 40
SPEC_SUFFIXES = (".json", ".yaml", ".yml")  # a spec file's suffixes (a name without one is a preset's)


class _BigInt(str):
    """The text of an integer literal too long to convert; check_tree names where it stands."""


def read_capped(path: Path) -> bytes:
    """The bytes of a regular file of at most MAX_FILE_BYTES, the cap enforced while reading. The file
    is opened non-blocking and checked on the descriptor, so a FIFO swapped in after a check cannot
    block. Errors name the path as given (never a symlink's target)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as err:
        raise UserError(f"cannot read {str(path)!r}: {err.strerror or err}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UserError(f"{path}: not a regular file (a directory, FIFO or device); give a spec file")
    with os.fdopen(fd, "rb") as fh:
        try:
            raw = fh.read(MAX_FILE_BYTES + 1)
        except OSError as err:
            raise UserError(f"cannot read {str(path)!r}: {err.strerror or err}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise UserError(f"{path}: file is over {MAX_FILE_BYTES} bytes; spec files are limited to {MAX_FILE_BYTES} bytes")
    return raw


def first_file(places: list, what: str) -> Optional[Path]:
    """The first regular file among `places` (the folders a tool would open a named file from, in its order);
    None when none exists; a UserError naming the first that exists but is a directory, FIFO or device (a
    lookup that skipped it said "not found" of a path that is there)."""
    found = next((p for p in places if p.is_file()), None)
    if found is not None:
        return found
    there = next((p for p in places if os.path.lexists(p)), None)
    if there is not None:
        raise UserError(f"{what}: {there} is not a regular file (a directory, FIFO or device)")
    return None


def read_text(path: Path) -> str:
    """read_capped, decoded as UTF-8."""
    try:
        return read_capped(path).decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a UTF-8 text file (binary?)") from None


# ---- the parsed tree ----------------------------------------------------------------------------

def key_text(key: Any) -> str:
    """A key as a message may show it: printable, at most MAX_KEY_SHOWN characters."""
    text = "".join(c if c.isprintable() else "?" for c in str(key))
    return text if len(text) <= MAX_KEY_SHOWN else text[:MAX_KEY_SHOWN - 3] + "..."


def _join(where: str, key: Any) -> str:
    return f"{where}[{key}]" if isinstance(key, int) else (f"{where}.{key_text(key)}" if where else key_text(key))


def check_tree(data: Any, where: str) -> Any:
    """`data` unchanged when it nests at most MAX_DEPTH levels, its integers have at most
    MAX_INT_DIGITS digits and its floats are finite; else a UserError naming the key path."""
    stack, count = [(data, "", 0)], 0
    while stack:
        node, at, depth = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise UserError(f"{where}: more than {MAX_NODES} values; spec files are far smaller")
        if isinstance(node, (dict, list)):
            if depth >= MAX_DEPTH:
                raise UserError(f"{where}: nested deeper than {MAX_DEPTH} levels (at {at or 'the top'})")
            if len(node) > MAX_ITEMS:
                raise UserError(f"{where}: {at or 'the top level'} has {len(node)} items (at most {MAX_ITEMS})")
            items = node.items() if isinstance(node, dict) else enumerate(node)
            stack.extend((v, _join(at, k), depth + 1) for k, v in items)
        else:
            _check_scalar(node, at, where)
    return data


def _check_scalar(value: Any, at: str, where: str) -> None:
    name = at or "value"
    if isinstance(value, _BigInt) or (isinstance(value, int) and abs(value) >= 10**MAX_INT_DIGITS):
        digits = len(str(value).lstrip("+-").replace("_", ""))
        raise UserError(f"{where}: {name}: an integer of {digits} digits is out of range (it must be less than "
                        f"10**{MAX_INT_DIGITS} in size)")
    if isinstance(value, float) and not math.isfinite(value):
        raise UserError(f"{where}: {name}: {value} is not a finite number")


def _int_literal(text: str) -> Any:
    digits = text.lstrip("+-").replace("_", "")
    return _BigInt(text) if len(digits) > MAX_INT_DIGITS else int(text)


# ---- JSON ---------------------------------------------------------------------------------------

def _unique_pairs(pairs: list) -> dict:
    """json object_pairs_hook: a mapping, refusing a key given twice (the last would silently win)."""
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {key_text(key)!r} is given twice")
        out[key] = value
    return out


def parse_json(text: str, where: str) -> Any:
    """JSON with duplicate keys refused, integers and depth bounded, NaN/Infinity refused by name."""
    try:
        data = json.loads(text, object_pairs_hook=_unique_pairs, parse_int=_int_literal)
    except json.JSONDecodeError as err:
        raise UserError(f"{where}: invalid JSON at line {err.lineno} column {err.colno}: {err.msg}") from None
    except RecursionError:
        raise UserError(f"{where}: nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as err:
        raise UserError(f"{where}: {err}") from None
    return check_tree(data, where)


# ---- YAML ---------------------------------------------------------------------------------------

class _Guards:
    """Constructor overrides for a SafeLoader: a mapping key given twice is refused, over-long integers
    are left unconverted (check_tree names them)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                repeated = key in seen
            except TypeError:  # an unhashable key: SafeLoader names it below
                break
            if repeated:
                raise yaml.constructor.ConstructorError(None, None, f"key {key_text(key)!r} is given twice",
                                                        key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)

    def construct_yaml12_float(self, node):
        """A YAML 1.2 float (YAML12_FLOAT) as a number, unless it overflows: '3e45678' (an Axolotl
        revision_of_model commit hash) stays the text it was under YAML 1.1."""
        text = self.construct_scalar(node)
        value = self.construct_yaml_float(node)
        return value if math.isfinite(value) else text

    def construct_yaml_int(self, node):
        text = self.construct_scalar(node)
        if len(text.lstrip("+-").replace("_", "")) > MAX_INT_DIGITS:
            return _BigInt(text)
        return super().construct_yaml_int(node)


class _GuardedLoader(_Guards, yaml.SafeLoader):
    """The pure-Python SafeLoader with the guards."""


# libyaml's C parser is some twenty times faster; its constructor is still SafeConstructor (Python).
_CGuardedLoader = type("_CGuardedLoader", (_Guards, yaml.CSafeLoader), {}) if yaml.__with_libyaml__ else None
LOADER = _CGuardedLoader or _GuardedLoader
PARSER = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader
# YAML 1.2 floats that YAML 1.1 (PyYAML) reads as strings: 4.5e2, 1e30, 5E-3 (1.1 wants a dot and a signed exponent,
# 4.5e+2); the same numbers are numbers in JSON, so a cluster file's scale_up_gb_per_s: 4.5e2 was refused as text
YAML12_TAG = "tag:parplan,2026:yaml12-float"  # its own tag: YAML 1.1 floats keep SafeLoader's constructor
YAML12_FLOAT = re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")
for _loader in filter(None, (_GuardedLoader, _CGuardedLoader)):
    _loader.add_constructor("tag:yaml.org,2002:int", _Guards.construct_yaml_int)
    _loader.add_implicit_resolver(YAML12_TAG, YAML12_FLOAT, list("-+0123456789"))
    _loader.add_constructor(YAML12_TAG, _Guards.construct_yaml12_float)


def _yaml_prescan(text: str, where: str) -> None:
    """Walk the event stream (nothing built yet): refuse aliases, nesting past MAX_DEPTH and more than
    MAX_NODES events early, before the recursive composer or the constructor get to run away."""
    depth = 0
    for count, event in enumerate(yaml.parse(text, Loader=PARSER)):
        if count > 2 * MAX_NODES:  # a value is one event, a list or mapping two
            raise UserError(f"{where}: more than {MAX_NODES} values; spec files are far smaller")
        if isinstance(event, yaml.AliasEvent):
            raise UserError(f"{where}: YAML aliases (*name) are not accepted in spec files")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise UserError(f"{where}: nested deeper than {MAX_DEPTH} levels (line {event.start_mark.line + 1})")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _yaml_user_error(err: yaml.YAMLError, where: str) -> UserError:
    """The user's message for a YAML error. The libyaml in PyYAML 6.0.4's wheels (0.2.6) stops its scanner at
    1,000 levels before an event reaches the prescan, so its nesting error says what ours says."""
    mark = getattr(err, "problem_mark", None)
    at = f" at line {mark.line + 1}" if mark else ""
    problem = " ".join(str(getattr(err, "problem", None) or err).split())  # one line (a ReaderError has two)
    if "nesting depth" in problem:  # worded as the prescan words it
        line = f" (line {mark.line + 1})" if mark else ""
        return UserError(f"{where}: nested deeper than {MAX_DEPTH} levels{line}")
    return UserError(f"{where}: invalid YAML{at}: {problem}")


def parse_yaml(text: str, where: str) -> Any:
    """YAML (safe loading only) with aliases and duplicate keys refused, integers and depth bounded.
    Without libyaml the pure-Python scanner needs seconds per MiB, so YAML is then limited to 1 MiB."""
    if PARSER is yaml.SafeLoader and len(text) > MAX_PURE_YAML_CHARS:
        raise UserError(f"{where}: YAML files are limited to {MAX_PURE_YAML_CHARS} characters here (PyYAML "
                        "without libyaml); write JSON or install PyYAML with libyaml")
    try:
        _yaml_prescan(text, where)
        data = yaml.load(text, Loader=LOADER)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as err:
        raise _yaml_user_error(err, where) from None
    except RecursionError:
        raise UserError(f"{where}: nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as err:  # a constructor's conversion (e.g. a malformed date)
        raise UserError(f"{where}: invalid YAML value: {str(err)[:80]}") from None
    return check_tree(data, where)


# ---- TOML ---------------------------------------------------------------------------------------

def parse_toml(text: str, where: str) -> Any:
    """TOML (tomllib refuses keys and tables given twice) with integers and depth bounded."""
    if tomllib is None:  # pragma: no cover
        raise UserError("reading TOML needs Python 3.11 or newer (tomllib)")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise UserError(f"{where}: invalid TOML: {err}") from None
    except RecursionError:
        raise UserError(f"{where}: nested deeper than {MAX_DEPTH} levels") from None
    except ValueError:  # int() of a literal past Python's digit limit
        raise UserError(f"{where}: invalid TOML: a number is out of range (at most {MAX_INT_DIGITS} digits)") from None
    return check_tree(data, where)


def parse_mapping(text: str, path: Path) -> dict:
    """A JSON (by suffix) or YAML document holding one mapping."""
    if not text.strip():
        raise UserError(f"{path}: file is empty")
    parse = parse_json if path.suffix.lower() == ".json" else parse_yaml
    data = parse(text, str(path))
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data
