"""Compact storage for the queue checker: columns, offset-indexed maps, and what the
history says of each topic-partition (:class:`Part`).

Memory must grow with the number of distinct values, not with the history's size,
and a Python object per value costs ~10x an array slot; so per-value facts live in
parallel ``array('q')`` columns indexed by a slot number, or in int32 cells
(:class:`Narrow`) where the values are small (offsets, processes), with a dict for
the rare one that is not; and per-offset facts in :class:`OffsetMap`, int32 cells
indexed by offset (offsets of a fresh topic are dense from 0), with a dict for the
rare offset far outside them. :data:`NONE` marks an empty int64 cell; it is the one
int64 a history's value or offset may not be.
"""

from __future__ import annotations

from array import array
from collections.abc import Collection, Iterator, Mapping
from typing import Any

import numpy as np

from faultline.checkers import kernel

# The cells' marks, defined once, with the compiled feed that writes them
# (:mod:`.kernel`): NONE, the empty cell of every int64 column (values and offsets must
# differ from it); EMPTY, an empty int32 cell of a :class:`Narrow` column (an
# OffsetMap's too), WIDE one whose value is in its dict (a value fits when
# ``WIDE < value <= NARROW_MAX``); MAX_GROW, how far past its end an OffsetMap's array
# may grow for one offset (beyond, its dict); a :class:`Rising` column's runs of
# ``1 << RUN_BITS`` cells, a cell's place in its run its index's ``RUN_MASK`` bits.
from faultline.checkers.kernel import EMPTY as EMPTY
from faultline.checkers.kernel import MAX_GROW as MAX_GROW
from faultline.checkers.kernel import NARROW_MAX as NARROW_MAX
from faultline.checkers.kernel import NONE as NONE
from faultline.checkers.kernel import RUN_BITS as RUN_BITS
from faultline.checkers.kernel import RUN_MASK as RUN_MASK
from faultline.checkers.kernel import WIDE as WIDE


def nones(n: int) -> array[int]:
    """An int64 array of ``n`` empty cells."""
    return array("q", [NONE]) * n


class Narrow:
    """int64 cells kept in int32 ones, indexed from 0: the value at ``i`` is ``self[i]``
    (:data:`NONE` when empty). A value that does not fit a cell goes to the dict
    :attr:`extra`, its cell saying :data:`WIDE`. The cells are a numpy array and the
    dict a numba one, so that the compiled feed (:mod:`.kernel`) stores in them as
    ``self[i] = value`` does (:func:`.kernel.narrow_set`)."""

    __slots__ = ("arr", "extra")

    def __init__(self) -> None:
        self.arr: np.ndarray[Any, np.dtype[np.int32]] = np.zeros(0, np.int32)
        self.extra: Any = kernel.new_extra()

    def __getitem__(self, i: int) -> int:
        cur = int(self.arr[i])
        return NONE if cur == EMPTY else kernel.extra_get(self.extra, i, NONE) if cur == WIDE else cur

    def extras(self) -> dict[int, int]:
        """What the dict :attr:`extra` holds, as a Python dict."""
        keys, values = kernel.extra_items(self.extra)
        return dict(zip(keys.tolist(), values.tolist(), strict=True))

    def __setitem__(self, i: int, value: int) -> None:
        kernel.narrow_set(self.arr, self.extra, i, value)

    def grow(self, n: int) -> None:
        """``n`` more empty cells. The cells are resized in place (no copy where the
        allocator can extend them), so nothing may hold a view of them: the compiled
        feed's list of maps (:attr:`faultline.checkers.queue.Engine.maps`) is given the
        grown array at once."""
        had = len(self.arr)
        self.arr.resize(had + n, refcheck=False)
        self.arr[had:] = EMPTY

    def cut(self, n: int) -> None:
        """Keep the first ``n`` cells only (in place, as :meth:`grow`)."""
        self.arr.resize(n, refcheck=False)

    def view(self, lo: int, hi: int) -> np.ndarray[Any, np.dtype[np.int64]]:
        """The values at ``lo`` to ``hi`` - 1 as int64, :data:`NONE` past the end."""
        out = np.full(hi - lo, NONE, dtype=np.int64)
        if lo < len(self.arr):
            cells = self.arr[lo:hi]
            head = out[:len(cells)]
            head[:] = cells
            head[cells == EMPTY] = NONE
            for k in np.flatnonzero(cells == WIDE).tolist():
                head[k] = kernel.extra_get(self.extra, lo + k, NONE)
        return out


class Rising(Narrow):
    """int64 values that rise with their index, such as invoke times, stored in index
    order: each is kept as its difference from the first of its run of
    ``1 << RUN_BITS`` cells (:attr:`bases`, one int64 a run), in the int32 cells; a
    difference that does not fit goes to the dict, as any value of a :class:`Narrow`.
    So 4 B a value, where differences are below ~2.1 s of nanoseconds within a run.
    The compiled feed stores the base of a run's first cell, then each cell's
    difference from it; :attr:`bases` has room for every run the cells can hold."""

    __slots__ = ("bases",)

    def __init__(self) -> None:
        super().__init__()
        self.bases: np.ndarray[Any, np.dtype[np.int64]] = np.zeros(0, np.int64)

    def __getitem__(self, i: int) -> int:
        return int(self.bases[i >> RUN_BITS]) + super().__getitem__(i)

    def put(self, i: int, value: int) -> None:
        """Store ``value`` in cell ``i``, the cell after the last one stored."""
        kernel.rising_put(self.arr, self.extra, self.bases, i, value)

    def grow(self, n: int) -> None:
        super().grow(n)
        self.bases.resize((len(self.arr) >> RUN_BITS) + 1, refcheck=False)

    def view(self, lo: int, hi: int) -> np.ndarray[Any, np.dtype[np.int64]]:
        """The values in cells ``lo`` to ``hi`` - 1 as int64: cells that were stored, ``lo``
        the first of a run."""
        out = super().view(lo, hi)
        run = 1 << RUN_BITS
        whole = len(out) // run * run
        if len(out):
            bases = self.bases[lo >> RUN_BITS:]
            runs = out[:whole].reshape(-1, run)  # a view: added to in place
            runs += bases[:whole // run, None]
            out[whole:] += bases[whole // run:whole // run + 1]
        return out


class OffsetMap(Narrow):
    """offset -> int64 value, first value wins; :meth:`put` reports what was there.

    Offsets index the cells (4 B an offset: a workload's values fit one); any offset
    outside them (negative, or far past their end) goes to the dict :attr:`extra` too.
    """

    __slots__ = ()

    def put(self, offset: int, value: int) -> int:
        """Store ``value`` at ``offset`` unless something is there; return what was there
        before (:data:`NONE` if nothing)."""
        self.reserve(offset)
        return int(kernel.omap_put(self.arr, self.extra, offset, value))

    def reserve(self, offset: int) -> bool:
        """Grow the cells to hold ``offset`` if it is within :data:`MAX_GROW` of their end
        (by an eighth at least: the maps hold one cell per offset, and slack is memory);
        what the dict held that the cells now cover moves into them. Whether they grew."""
        arr = self.arr
        n = len(arr)
        if not n <= offset < n + MAX_GROW:
            return False
        self.grow(max(offset + 1 - n, n // 8 + 1024))
        for o in [o for o in self.extras() if n <= o < len(self.arr)]:
            self[o] = kernel.extra_pop(self.extra, o)
        return True

    def get(self, offset: int) -> int:
        """The value at ``offset``, or :data:`NONE`."""
        if 0 <= offset < len(self.arr):
            return self[offset]
        return kernel.extra_get(self.extra, offset, NONE)

    def items(self) -> Iterator[tuple[int, int]]:
        """(offset, value) for every filled cell: the cells' offsets ascending, then the
        others (negative or far out), sorted."""
        extra = self.extras()
        for o in np.flatnonzero(self.arr != EMPTY).tolist():
            v = int(self.arr[o])
            yield o, extra[o] if v == WIDE else v
        for o in sorted(self.far()):
            yield o, extra[o]

    def any_between(self, lo: int, hi: int) -> list[int]:
        """Filled offsets strictly between ``lo`` and ``hi``, ascending."""
        first, end = max(lo + 1, 0), min(hi, len(self.arr))
        out = (first + np.flatnonzero(self.arr[first:end] != EMPTY)).tolist() if end > first else []
        out += sorted(o for o in self.far() if lo < o < hi)
        return out

    def far(self) -> Iterator[int]:
        """The offsets outside the cells (negative, or far past their end) that the dict
        holds; it also holds the values of cells that say :data:`WIDE`."""
        n = len(self.arr)
        return (o for o in self.extras() if not 0 <= o < n)


def disagreements(acks: OffsetMap, polls: OffsetMap, drains: OffsetMap,
                  also: Collection[int]) -> Iterator[tuple[int, tuple[int, int, int]]]:
    """(offset, (value acknowledged, polled, drained there)) for every offset where the
    three do not simply agree, and every offset in ``also``; empty cells are :data:`NONE`.

    They simply agree when every value there is the same, or the ack and the drain
    agree and nothing was polled. The arrays are compared with numpy, :data:`BLOCK`
    offsets at a time; the few other offsets are visited one by one. Offsets come
    ascending, but those only a dict holds past the arrays' end (and any negative ones)
    come after the rest, sorted.
    """
    maps = (acks, polls, drains)
    end = max(len(m.arr) for m in maps)
    # an offset one map holds in its dict, outside its cells but inside another's
    patch = {o for m in maps for o in m.far() if 0 <= o < end}
    looked_up = patch | set(also)  # visited whatever the cells say

    def row(o: int) -> tuple[int, int, int]:
        return acks.get(o), polls.get(o), drains.get(o)

    for lo in range(0, end, BLOCK):
        hi = min(end, lo + BLOCK)
        a, p, d = (m.view(lo, hi) for m in maps)
        odd = ~(((a == d) & ((p == d) | (p == NONE))) | ((a == NONE) & (p == d)))
        for o in sorted({*(lo + np.flatnonzero(odd)).tolist(),
                         *(o for o in looked_up if lo <= o < hi)}):
            r = row(o)
            if o in also or not _agree(r):
                yield o, r
    for o in sorted({o for m in maps for o in m.far() if not 0 <= o < end}
                    | {o for o in also if not 0 <= o < end}):
        r = row(o)
        if o in also or not _agree(r):
            yield o, r


#: How many offsets :func:`disagreements` compares at a time (its memory: ~27 B each), and
#: how many sends the queue checker's decisions take at a time (~150 B each).
BLOCK = 1 << 16


def _agree(row: tuple[int, int, int]) -> bool:
    a, p, d = row
    return (a == d and p in (d, NONE)) or (a == NONE and p == d)


class Part:
    """What the history says about one topic-partition, offsets-wise."""

    __slots__ = ("acks", "agreed", "complete", "drain_start", "drain_time", "drained", "drains",
                 "hw", "last_poll", "lso", "partition", "polled", "polls", "replicas", "sends",
                 "topic")

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
        self.drain_start: int | None = None  # its first drain invoke: the HW it reads to is older
        self.last_poll: int | None = None  # the last poll ok that read a record of it
        self.drained = 0
        self.polled = 0
        self.sends = [0, 0, 0, 0]  # open, ok, fail, info; counted from the columns after a feed
        self.replicas: list[Mapping[str, Any]] = []  # its replicas.jsonl lines, by node
        self.agreed: int | None = None  # every replica holds the same batches below it

    @property
    def log_end(self) -> int | None:
        """The greatest log end of its replicas (``replicas.jsonl``): no replica holds a
        record at or past it. None unless every replica's line says its end."""
        ends = [r.get("log_end_offset") for r in self.replicas]
        if not ends or not all(e.__class__ is int for e in ends):
            return None
        return max(ends)  # type: ignore[type-var]

    def missed(self, offset: int) -> bool:
        """Whether the complete drain read nothing at ``offset`` where every replica holds
        the same batch (:attr:`agreed`) below its HW: there it had a record to read."""
        if (not self.complete or self.agreed is None or self.hw is None or not self.replicas
                or self.drains.get(offset) != NONE):
            return False
        start = max(int(r["log_start_offset"]) for r in self.replicas)
        return start <= offset < min(self.agreed, self.hw)

    def gap(self, offset: int) -> bool:
        """Whether the complete drain read nothing at ``offset``, between its log start and
        its HW: offsets there are dense (no compaction, no transaction markers in these
        tests), so it skipped a record it should have read."""
        return (self.complete and self.hw is not None and (self.lso or 0) <= offset < self.hw
                and self.drains.get(offset) == NONE)

    def late(self, t: int | None) -> bool:
        """Whether an op that ended at ``t`` (None: when is not known) may have ended once the
        drain had begun: past what the drain reads (its HW was taken before it began), so
        the drain cannot say whether what it acknowledged or read is there."""
        return self.drain_start is not None and (t is None or t >= self.drain_start)

    @property
    def short(self) -> int | None:
        """:attr:`agreed`, when the complete drain stopped below it (it stopped short);
        else None."""
        if self.complete and self.agreed is not None and self.hw is not None and self.agreed > self.hw:
            return self.agreed
        return None
