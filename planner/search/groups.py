"""Candidates as the search handles them: grouped by the stage splits a framework's partitioner fixes,
filtered by a `keep` predicate (over the whole space, or over an earlier search's kept candidates), and
handed to the costing loop in the order of their exact step-time bound, priced lazily.
"""

from __future__ import annotations

import dataclasses
import heapq
from operator import attrgetter
from dataclasses import dataclass
from typing import Callable, Optional

from planner.search.costing import Coster
from planner.search.memo import FieldMemo, mark_split_free, split_free  # noqa: F401 (re-exported)
from planner.search.space import Candidate, Refused, Refuses, SpaceOptions, fixed_splits

Keep = Callable[[Candidate], bool]


@dataclass(frozen=True)
class Group:
    """Candidates that differ only in the stage split a framework's partitioner imposes: one bound
    serves them all (bounds hold for every split), tables are built per member."""

    base: Candidate  # fixed_stages None
    splits: tuple  # (None,): the search splits the layers; else the partitioner's splits

    @property
    def members(self) -> list[Candidate]:
        """The candidates of the group, one per split."""
        if self.splits == (None,):
            return [self.base]
        head = _ALL_BUT_SPLIT(self.base)  # fixed_stages is Candidate's last field: the same as
        return [Candidate(*head, s) for s in self.splits]  # dataclasses.replace, a fifth of its time


_ALL_BUT_SPLIT = attrgetter(*[f.name for f in dataclasses.fields(Candidate)][:-1])
assert dataclasses.fields(Candidate)[-1].name == "fixed_stages"


def split_groups(coster: Coster, opts: SpaceOptions, keep: Optional[Keep], refuses: Optional[Refuses] = None):
    """(split-free candidate, splits whose candidates `keep` accepts, how many it rejected) over the space.
    With a framework's fixed splits `keep` is a FieldMemo: while no call has read fixed_stages, its answer
    for the base holds for every split (planner.search.memo). What `refuses`, the rule keep declares
    (planner.search.memo.refusals_of), turns down comes as Refused counts (planner.search.space.enumerate_counted),
    every split of them rejected."""
    free = dataclasses.replace(opts, stage_splits=None)
    L = coster.model.num_layers
    by_degree: dict[tuple[int, int], tuple] = {}  # (pp, vpp) -> fixed_splits: thousands of splits at pp=16
    for base in coster.layouts(free, refuses):
        splits = by_degree.get((base.pp, base.vpp))
        if splits is None:
            splits = by_degree[(base.pp, base.vpp)] = fixed_splits(L, base.pp, base.vpp, opts)
        if not splits:
            continue
        if type(base) is Refused:
            yield base, (), base.count * len(splits)
            continue
        if keep is None:
            yield base, splits, 0
            continue
        ok = keep(base)
        if split_free(keep):
            yield (base, splits, 0) if ok else (base, (), len(splits))
            continue
        if splits != (None,) and "fixed_stages" in keep.read:
            kept = tuple(s for s in splits if keep(Group(base, (s,)).members[0]))
            yield base, kept, len(splits) - len(kept)
        else:
            yield (base, splits, 0) if ok else (base, (), len(splits))


def by_exact_bound(coster: Coster, kept: list):
    """(exact layers' bound, group) of `kept` ((floor, enumeration index, group) sorted by floor) in the order
    of their exact bound, ties in enumeration order, as a generator told the threshold past which nothing
    is wanted (gen.send(limit)): the exact bound (Coster.layers_bound_s) is priced only for candidates whose
    floor is not past it. Yields (None, rest) when it stops: the groups never yielded."""
    pending: list = []  # heap of (exact bound, enumeration index, group)
    i, limit = 0, float("inf")
    while i < len(kept) or pending:
        if i < len(kept) and (not pending or kept[i][0] <= pending[0][0]):
            floor, n, group = kept[i]
            if floor > limit:
                break
            heapq.heappush(pending, (coster.layers_bound_s(group.base), n, group))
            i += 1
            continue
        lb, _, group = heapq.heappop(pending)
        if lb > limit:
            pending.append((lb, 0, group))
            break
        limit = yield lb, group
    yield None, [g for _, _, g in pending] + [g for _, _, g in kept[i:]]


def restrict(among: list, keep: Optional[Keep], stats) -> list[tuple[float, Group]]:
    """The (floor, group) of `among` whose candidates `keep` accepts (each split of a group asked apart),
    in the same order; those it rejects count in stats.filtered_out. As in split_groups, a FieldMemo answers for
    every split of a group at once while `keep` has read no fixed_stages."""
    out = []
    memo = None if keep is None else (keep if split_free(keep) else FieldMemo(keep))  # for groups of several
    # splits only (as in _candidates)
    for floor, n, group in among:
        count = len(group.splits)
        stats.layouts_considered += count
        if memo is None:
            out.append((floor, n, group))
            continue
        if group.splits == (None,):
            ok = group.splits if keep(group.base) else ()
        else:
            ok = group.splits if memo(group.base) else ()
        if group.splits != (None,) and not split_free(keep) and "fixed_stages" in memo.read:
            ok = tuple(s for s in group.splits if memo(Group(group.base, (s,)).members[0]))
        stats.filtered_out += count - len(ok)
        if ok:
            out.append((floor, n, group if len(ok) == count else Group(group.base, ok)))
    return out
