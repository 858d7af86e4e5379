"""Compact storage for the queue checker: int64 columns, offset-indexed maps, and what the
history says of each topic-partition (:class:`Part`).

Memory must grow with the number of distinct values, not with the history's size,
and a Python object per value costs ~10x an array slot; so per-value facts live in
parallel ``array('q')`` columns indexed by a slot number, and per-offset facts in
:class:`OffsetMap`, an array indexed by offset (offsets of a fresh topic are dense
from 0) with a dict for the rare offset far outside it. :data:`NONE` marks an
empty cell; it is the one int64 a history's value or offset may not be.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping
from itertools import zip_longest
from typing import Any

#: The empty cell of every int64 column (values and offsets must differ from it).
NONE = -(1 << 63)
#: How far past its end an OffsetMap's array may grow for one offset; beyond, a dict.
MAX_GROW = 1 << 20


def nones(n: int) -> array[int]:
    """An int64 array of ``n`` empty cells."""
    return array("q", [NONE]) * n


class OffsetMap:
    """offset -> int64 value, first value wins; :meth:`put` reports what was there."""

    __slots__ = ("arr", "extra")

    def __init__(self) -> None:
        self.arr: array[int] = array("q")
        self.extra: dict[int, int] = {}

    def put(self, offset: int, value: int) -> int:
        """Store ``value`` at ``offset`` unless something is there; return what was there
        before (:data:`NONE` if nothing)."""
        arr = self.arr
        n = len(arr)
        if 0 <= offset < n:
            cur = arr[offset]
            if cur == NONE:
                arr[offset] = value
            return cur
        if n <= offset < n + MAX_GROW:
            # an eighth more: the maps hold one cell per offset (value), and slack is memory
            arr.extend(nones(max(offset + 1 - n, n // 8 + 1024)))
            arr[offset] = value
            return NONE
        cur = self.extra.get(offset, NONE)
        if cur == NONE:
            self.extra[offset] = value
        return cur

    def get(self, offset: int) -> int:
        """The value at ``offset``, or :data:`NONE`."""
        if 0 <= offset < len(self.arr):
            return self.arr[offset]
        return self.extra.get(offset, NONE)

    def items(self) -> Iterator[tuple[int, int]]:
        """(offset, value) for every filled cell, offsets ascending."""
        for o, v in enumerate(self.arr):
            if v != NONE:
                yield o, v
        for o in sorted(self.extra):
            yield o, self.extra[o]

    def any_between(self, lo: int, hi: int) -> list[int]:
        """Filled offsets strictly between ``lo`` and ``hi``, ascending."""
        arr = self.arr
        out = [o for o in range(max(lo + 1, 0), min(hi, len(arr))) if arr[o] != NONE]
        out += sorted(o for o in self.extra if lo < o < hi)
        return out


def aligned(*maps: OffsetMap) -> Iterator[tuple[int, tuple[int, ...]]]:
    """(offset, (value in each map)) for every offset below the longest array, then
    every offset only a dict holds; ascending.

    Empty cells are :data:`NONE`. The arrays are walked in C by ``zip_longest``; the
    caller's loop should skip the common case cheaply.
    """
    end = max(len(m.arr) for m in maps)
    rows = enumerate(zip_longest(*(m.arr for m in maps), fillvalue=NONE))
    patch = {o for m in maps for o in m.extra if 0 <= o < end}
    if patch:  # an offset in one map's dict but inside another's array: look it up
        for o, row in rows:
            yield (o, tuple(m.get(o) for m in maps)) if o in patch else (o, row)
    else:
        yield from rows
    for o in sorted({o for m in maps for o in m.extra if not 0 <= o < end}):
        yield o, tuple(m.get(o) for m in maps)


class Part:
    """What the history says about one topic-partition, offsets-wise."""

    __slots__ = ("acks", "agreed", "complete", "drain_time", "drained", "drains", "hw", "lso",
                 "partition", "polled", "polls", "replicas", "sends", "topic")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.acks = OffsetMap()  # offset -> value acknowledged there (first)
        self.polls = OffsetMap()  # offset -> value polled there (first)
        self.drains = OffsetMap()  # offset -> value drained there (first)
        self.complete = False
        self.hw: int | None = None
        self.lso: int | None = None
        self.drain_time: int | None = None
        self.drained = 0
        self.polled = 0
        self.sends = [0, 0, 0, 0]  # open, ok, fail, info; counted from the columns after a feed
        self.replicas: list[Mapping[str, Any]] = []  # its replicas.jsonl lines, by node
        self.agreed: int | None = None  # every replica holds the same batches below it

    @property
    def short(self) -> int | None:
        """:attr:`agreed`, when the complete drain stopped below it (it stopped short);
        else None."""
        if self.complete and self.agreed is not None and self.hw is not None and self.agreed > self.hw:
            return self.agreed
        return None
