"""Caches keyed on the candidate fields a cost function actually reads, found by watching it run.

A hand-written cache key is a second statement of what a cost function depends on, and it goes stale
when the function changes: the per-layer cache once keyed on (tp, sp, cp, ep, etp, mbs, recompute) and
left out `cp_comm`, so with several context-parallel algorithms allowed two layouts shared one
algorithm's layer time and the search ranked its "optimal" plans out of order.

`FieldMemo(fn)` calls fn(candidate) through a `_Reads` proxy that records, in order, every Candidate
field read and its value (directly, or inside a property such as `dense_shards`), and files the result
in a decision tree: each inner node names the field read next and branches on its value. That is exact
for a deterministic fn of the candidate (the problem — model, cluster, train — is fixed per cache): two
candidates that agree on the first k fields fn reads make it read the same field next, so a lookup walks
the tree reading the candidate's fields, and a leaf is reached only when the candidate agrees with the
cached one on every field the cached call read. Each path keys on its own fields: the ZeRO-3 group of a
layer's collectives is read only on ZeRO-3 paths, the cp algorithm only where cp > 1.
"""

from __future__ import annotations

from dataclasses import fields
from operator import attrgetter
from typing import Any, Callable, Generic, Optional, TypeVar

T = TypeVar("T")


class _Reads:
    """Stands in for a candidate and records the names of the fields read through it."""

    __slots__ = ("_obj", "_cls", "_names", "_read")

    def __init__(self, obj: Any, names: frozenset[str]):
        object.__setattr__(self, "_obj", obj)  # a candidate, or another _Reads (a memo called inside one)
        object.__setattr__(self, "_cls", obj._cls if isinstance(obj, _Reads) else type(obj))
        object.__setattr__(self, "_names", names)
        object.__setattr__(self, "_read", {})  # field -> value, in the order first read

    def __getattr__(self, name: str) -> Any:
        if name in self._names:
            value = getattr(self._obj, name)
            self._read.setdefault(name, value)
            return value
        attr = getattr(self._cls, name, None)
        if isinstance(attr, property):  # evaluate it on the proxy, so that the fields it reads count
            return attr.fget(self)
        if callable(attr):
            return attr.__get__(self)
        return getattr(self._obj, name)  # absent attributes raise AttributeError, as on the candidate

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{self._cls.__name__} is read-only here")


def _recorder(name: str) -> property:
    """A property of a probe class: read `name` from the candidate (or outer probe) and record it."""

    def read(self: _Reads) -> Any:
        value = getattr(self._obj, name)
        self._read.setdefault(name, value)
        return value

    return property(read)


def _on_probe(prop: property) -> property:
    """A candidate's property evaluated on the probe, so that the fields it reads are recorded."""
    return property(lambda self: prop.fget(self))


_PROBES: dict[type, type] = {}


def probe(lay: Any) -> _Reads:
    """A _Reads for `lay` whose class has a property per recorded name and per property of the
    candidate's class (faster than __getattr__, which stays for methods and absent names)."""
    cls = lay._cls if isinstance(lay, _Reads) else type(lay)
    kind = _PROBES.get(cls)
    if kind is None:
        names = field_names(lay)
        ns: dict[str, Any] = {"__slots__": ()}
        for klass in reversed(cls.__mro__):
            ns.update({k: _on_probe(v) for k, v in vars(klass).items() if isinstance(v, property)})
        ns.update({n: _recorder(n) for n in names})
        kind = _PROBES[cls] = type(f"Reads{cls.__name__}", (_Reads,), ns)
    return kind(lay, field_names(lay))


def field_names(obj: Any) -> frozenset[str]:
    """The names a _Reads records for a candidate: its dataclass fields and the properties its class lists
    in ATOMIC (recorded as their value: a cost function that depends on zero only through
    zero3_per_microbatch then keys on a bool, not on the ZeRO stage)."""
    if isinstance(obj, _Reads):
        return obj._names
    cls = type(obj)
    if cls not in _NAMES:
        _NAMES[cls] = frozenset(f.name for f in fields(obj)) | getattr(cls, "ATOMIC", frozenset())
    return _NAMES[cls]


_NAMES: dict[type, frozenset[str]] = {}


class _Branch:
    """An inner node: the field fn reads next, and a child per value."""

    __slots__ = ("field", "children")

    def __init__(self, field: str, children: dict):
        self.field, self.children = field, children


class _Leaf:
    """A cached result."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value


_MISSING = object()


def _getter(names: tuple[str, ...]) -> Callable[[Any], Any]:
    """A key function reading `names` (a tuple of values; a single value for one name)."""
    return attrgetter(*names) if names else (lambda _: ())


def _chain(path: list[tuple[str, Any]], value: Any):
    """The branch nodes of `path` (field, value) down to a leaf holding `value`."""
    node: Any = _Leaf(value)
    for name, v in reversed(path):
        node = _Branch(name, {v: node})
    return node


class FieldMemo(Generic[T]):
    """fn(candidate), cached on the values of the candidate fields fn reads (module docstring)."""

    def __init__(self, fn: Callable[[Any], T]):
        self.fn = fn
        self.root: Any = None
        self.calls = 0  # misses: how often fn ran (= cached results)
        self.read: set[str] = set()  # every field any call read
        # in front of the tree, a flat cache keyed on every field any call read (a superset of each path's
        # fields, so equal keys mean equal paths): one C-level attrgetter instead of a walk
        self._flat: dict = {}
        self._key: Callable[[Any], Any] = lambda _: ()

    @property
    def fields(self) -> tuple[str, ...]:
        """Every field some call of fn read, sorted."""
        return tuple(sorted(self.read))

    def __call__(self, lay: Any) -> T:
        if isinstance(lay, _Reads):  # called inside another memo's call: only the walk reads fields in the
            return self._walk(lay)  # order the function does (the outer memo records that order)
        value = self._flat.get(self._key(lay), _MISSING)
        if value is not _MISSING:
            return value
        value = self._walk(lay)
        self._flat[self._key(lay)] = value  # the key again: a miss may have widened it
        return value

    def _walk(self, lay: Any) -> T:
        node = self.root
        while type(node) is _Branch:
            node = node.children.get(getattr(lay, node.field))
        if node is not None:
            return node.value
        watched = probe(lay)
        value = self.fn(watched)
        self.calls += 1
        self._insert(list(watched._read.items()), value)
        return value

    def _insert(self, path: list[tuple[str, Any]], value: Any) -> None:
        if not self.read.issuperset(name for name, _ in path):
            self.read.update(name for name, _ in path)
            self._key = _getter(self.fields)
            self._flat = {}
        if self.root is None:
            self.root = _chain(path, value)
            return
        node = self.root
        for i, (name, v) in enumerate(path):
            if type(node) is not _Branch or node.field != name:
                raise RuntimeError(f"{self.fn!r} read {name} where an earlier call read "
                                   f"{getattr(node, 'field', 'nothing more')}: not a deterministic function "
                                   "of the candidate")
            child = node.children.get(v)
            if child is None:
                node.children[v] = _chain(path[i + 1:], value)
                return
            node = child
        raise RuntimeError(f"{self.fn!r}: a cached path was missed")


def split_free(keep: Optional[Callable[[Any], bool]]) -> bool:
    """`keep` declares (mark_split_free) that it never reads fixed_stages: its answer for a split-free
    candidate holds for every split a partitioner fixes, so it is asked once per base, plainly (a FieldMemo
    watching it for fixed_stages costs more than the predicate: 42k distinct keys in 108k torchtitan bases)."""
    return keep is not None and getattr(keep, "split_free", False)


def mark_split_free(keep: Callable[[Any], bool]) -> Callable[[Any], bool]:
    """Declare that `keep` reads no fixed_stages (tests/test_search_memo.py checks each predicate marked so)."""
    keep.split_free = True  # type: ignore[attr-defined]
    return keep


def refusals_of(keep: Optional[Callable[[Any], bool]]) -> Optional[Callable[..., bool]]:
    """The rule `keep` declares (mark_refusals) it refuses whole choices by: (tp, cp, cp_comm, pp, ep, etp, zero)
    -> True where it rejects every candidate with them (planner.search.space.enumerate_counted then counts those
    instead of building them); None when it declares none."""
    return getattr(keep, "refuses", None) if keep is not None else None


def mark_refusals(keep: Callable[[Any], bool], refuses: Optional[Callable[..., bool]]) -> Callable[[Any], bool]:
    """Declare that `keep` rejects every candidate `refuses` turns down (planner.search.frameworks.refuses;
    tests/test_search_refusals.py checks each predicate marked so); None declares nothing."""
    if refuses is not None:
        keep.refuses = refuses  # type: ignore[attr-defined]
    return keep
