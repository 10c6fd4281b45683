"""Caches keyed on the candidate fields a cost function actually reads, found by watching it run.

A hand-written cache key is a second statement of what a cost function depends on, and it goes stale
when the function changes: the per-layer cache once keyed on (tp, sp, cp, ep, etp, mbs, recompute) and
left out `cp_comm`, so with several context-parallel algorithms allowed two layouts shared one
algorithm's layer time and the search ranked its "optimal" plans out of order.

`FieldMemo(fn)` calls fn(candidate) through a `_Reads` proxy that records every Candidate field read
(directly, or inside a property such as `dense_shards`), and keys the cache on the values of the union
of the fields read so far. That is exact for a deterministic fn of the candidate (the problem — model,
cluster, train — is fixed per cache): a candidate that agrees with a cached one on every field the
cached call read makes fn take the same path and return the same value. When a call reads a field not
yet in the key (a branch taken for the first time, e.g. cp_comm once cp > 1), the key grows and the
cache restarts; that happens a handful of times per search.
"""

from __future__ import annotations

from dataclasses import fields
from operator import attrgetter
from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")


class _Reads:
    """Stands in for a candidate and records the names of the fields read through it."""

    __slots__ = ("_obj", "_cls", "_names", "_read")

    def __init__(self, obj: Any, names: frozenset[str]):
        object.__setattr__(self, "_obj", obj)  # a candidate, or another _Reads (a memo called inside one)
        object.__setattr__(self, "_cls", obj._cls if isinstance(obj, _Reads) else type(obj))
        object.__setattr__(self, "_names", names)
        object.__setattr__(self, "_read", set())

    def __getattr__(self, name: str) -> Any:
        if name in self._names:
            self._read.add(name)
            return getattr(self._obj, name)
        attr = getattr(self._cls, name, None)
        if isinstance(attr, property):  # evaluate it on the proxy, so that the fields it reads count
            return attr.fget(self)
        if callable(attr):
            return attr.__get__(self)
        return getattr(self._obj, name)  # absent attributes raise AttributeError, as on the candidate

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{self._cls.__name__} is read-only here")


def field_names(obj: Any) -> frozenset[str]:
    """The dataclass fields of a candidate (or of the candidate a _Reads stands in for)."""
    return obj._names if isinstance(obj, _Reads) else frozenset(f.name for f in fields(obj))


class FieldMemo(Generic[T]):
    """fn(candidate), cached on the values of the candidate fields fn reads (module docstring)."""

    def __init__(self, fn: Callable[[Any], T]):
        self.fn = fn
        self.fields: tuple[str, ...] = ()
        self.cache: dict = {}
        self.calls = 0  # misses: how often fn ran
        self._key: Callable[[Any], Any] = lambda _: ()

    def __call__(self, lay: Any) -> T:
        key = self._key(lay)
        try:
            return self.cache[key]
        except KeyError:
            pass
        probe = _Reads(lay, field_names(lay))
        value = self.fn(probe)
        self.calls += 1
        if not probe._read <= set(self.fields):
            self._grow(probe._read)
            key = self._key(lay)
        self.cache[key] = value
        return value

    def _grow(self, read: set[str]) -> None:
        """Add the newly read fields to the key; entries under the old key cannot be re-keyed, so drop them."""
        self.fields = tuple(sorted(set(self.fields) | read))
        self._key = attrgetter(*self.fields) if len(self.fields) > 1 else (lambda lay, f=self.fields[0]: getattr(lay, f))
        self.cache = {}
