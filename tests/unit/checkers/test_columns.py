"""The offset maps and :func:`disagreements`, against their definitions written plainly:
a dict per map, every offset visited."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faultline.checkers import columns
from faultline.checkers.columns import NONE, OffsetMap, disagreements

# Offsets near 0, near the arrays' reach (MAX_GROW is made small below), far out and
# negative, so that a map holds some in its array and some in its dict, and an offset
# one map keeps in its dict may lie inside another's array.
offsets = st.one_of(st.integers(0, 40), st.integers(-5, -1), st.integers(60, 80),
                    st.sampled_from([2**40, 2**40 + 1]))
# Values small, and values an int32 cell cannot hold (the maps keep those in their dict).
values = st.one_of(st.integers(0, 3), st.sampled_from([columns.EMPTY, columns.WIDE, 2**40]))
puts = st.lists(st.tuples(st.sampled_from([0, 1, 2]), offsets, values), max_size=60)


def agree(a: int, p: int, d: int) -> bool:
    return (a == d and p in (d, NONE)) or (a == NONE and p == d)


@settings(max_examples=300, deadline=None)
@given(puts=puts, also=st.sets(offsets, max_size=4), block=st.sampled_from([1, 3, 1 << 20]))
def test_disagreements_are_every_offset_where_the_maps_differ(
        puts: list[tuple[int, int, int]], also: set[int], block: int) -> None:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(columns, "MAX_GROW", 16)
        m.setattr(columns, "BLOCK", block)
        maps = [OffsetMap(), OffsetMap(), OffsetMap()]
        plain: list[dict[int, int]] = [{}, {}, {}]
        for which, off, value in puts:
            before = plain[which].get(off, NONE)
            if before == NONE:
                plain[which][off] = value
            assert maps[which].put(off, value) == before  # first value wins
        got = list(disagreements(*maps, also))
    rows = {o: tuple(p.get(o, NONE) for p in plain)
            for o in set().union(*plain, also)}
    want = {o: r for o, r in rows.items() if o in also or not agree(*r)}
    assert dict(got) == want
    assert len(got) == len(want)  # each once
    # ascending, but offsets only a dict holds past the arrays' end come last
    end = max(len(m.arr) for m in maps)
    assert [o for o, _ in got] == (sorted(o for o in want if 0 <= o < end)
                                   + sorted(o for o in want if not 0 <= o < end))


@pytest.mark.parametrize("polled_first", [False, True])
def test_an_offset_another_map_keeps_in_its_dict_is_compared_by_its_value(
        polled_first: bool, monkeypatch: Any) -> None:
    """A polled value at an offset inside the acks' and drains' arrays, but kept in the
    polls' dict (past its own array's reach), is a disagreement."""
    monkeypatch.setattr(columns, "MAX_GROW", 4)
    acks, polls, drains = OffsetMap(), OffsetMap(), OffsetMap()
    for o in range(2000):
        acks.put(o, o)
        drains.put(o, o)
    if polled_first:
        polls.put(0, 0)  # its array: the first 1024 offsets
    polls.put(1500, 99)  # beyond its array's reach: its dict
    assert 1500 in polls.extras()
    assert list(disagreements(acks, polls, drains, ())) == [(1500, (1500, 99, 1500))]


def test_what_the_dict_held_moves_into_the_array_that_grows_over_it(monkeypatch: Any) -> None:
    monkeypatch.setattr(columns, "MAX_GROW", 4)
    m = OffsetMap()
    m.put(0, 10)
    m.put(1500, 7)  # past the array's reach: the dict
    assert m.extras() == {1500: 7}
    for o in range(1, 1600):
        m.put(o, 10 + o)
    assert m.extras() == {} and m.get(1500) == 7 and m.put(1500, 8) == 7


def test_a_value_the_dict_holds_is_reported_when_its_own_put_grows_the_array(monkeypatch: Any) -> None:
    """The growth is for the very offset the dict holds: the put finds the value there."""
    monkeypatch.setattr(columns, "MAX_GROW", 4)
    m = OffsetMap()
    m.put(0, 10)  # the array: offsets 0 to 1023
    m.put(2178, 7)  # past its reach: the dict
    m.put(1025, 11)  # the array grows to 2176 offsets
    assert len(m.arr) < 2178 < len(m.arr) + 4 and m.extras() == {2178: 7}
    assert m.put(2178, 8) == 7  # the array grows over it: 7 is there, and stays
    assert m.get(2178) == 7 and m.extras() == {}


@pytest.mark.parametrize("value", [columns.EMPTY, columns.WIDE, columns.NARROW_MAX + 1, 2**62, -(2**40)])
def test_a_value_an_int32_cell_cannot_hold_is_kept_whole(value: int) -> None:
    m = OffsetMap()
    assert m.put(3, value) == NONE and m.put(3, 1) == value
    assert m.put(4, 1) == NONE  # beside it, an ordinary value in its cell
    assert m.get(3) == value and list(m.items()) == [(3, value), (4, 1)]
    assert m.any_between(0, 10) == [3, 4]
    assert m.view(2, 6).tolist() == [NONE, value, 1, NONE]
    other = OffsetMap()
    other.put(3, 1)
    other.put(4, 1)
    assert list(disagreements(m, OffsetMap(), other, ())) == [(3, (value, NONE, 1))]


# Steps between successive times: equal, small, past an int32 cell (3 s of ns, 2**40),
# and backwards (a history given as ops is not checked for order).
steps = st.lists(st.sampled_from([0, 5, 3 * 10**9, 2**40, -7, -(3 * 10**9)]), max_size=300)


@settings(max_examples=200, deadline=None)
@given(first=st.sampled_from([0, 10**18, -(2**62)]), steps=steps, data=st.data())
def test_rising_times_read_back_whole_one_at_a_time_and_as_a_view(
        first: int, steps: list[int], data: st.DataObject) -> None:
    """A Rising column (a base per run of cells, int32 differences, a dict for the rest)
    gives back every time stored, by index and as any view that starts a run."""
    times, t = [], first
    for step in steps:
        t += step
        times.append(t)
    col = columns.Rising()
    col.grow(len(times))
    for i, t in enumerate(times):
        col.put(i, t)
    assert [col[i] for i in range(len(times))] == times
    run = 1 << columns.RUN_BITS
    lo = data.draw(st.integers(0, len(times) // run)) * run
    hi = data.draw(st.integers(lo, len(times)))
    assert col.view(lo, hi).tolist() == times[lo:hi]


def test_a_narrow_column_holds_values_that_fit_and_values_that_do_not() -> None:
    col = columns.Narrow()
    col.grow(5)
    for i, value in enumerate((5, -1, 2**40, columns.EMPTY)):
        col[i] = value
    assert [col[i] for i in range(5)] == [5, -1, 2**40, columns.EMPTY, columns.NONE]
    assert col.extras() == {2: 2**40, 3: columns.EMPTY}
