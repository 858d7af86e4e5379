"""Grudge builders: the shapes of docs/design.md's partitions."""

from __future__ import annotations

from collections.abc import Collection, Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from faultline.errors import NemesisError
from faultline.nemeses.base import choose
from faultline.nemeses.partition import (
    bridge,
    complete,
    halves,
    isolate,
    nodes_of,
    ring,
    to_json,
)


def _sees(grudge: Mapping[int, Collection[int]], a: int, b: int) -> bool:
    """a and b can talk both ways."""
    return b not in grudge.get(a, ()) and a not in grudge.get(b, ())


def test_isolate_is_symmetric_and_total() -> None:
    g = isolate([1, 2, 3], 1)
    assert g == {1: {2, 3}, 2: {1}, 3: {1}}
    assert to_json(g) == {"1": [2, 3], "2": [1], "3": [1]}  # docs/history.md's example
    with pytest.raises(NemesisError, match="not one of"):
        isolate([1, 2, 3], 4)


def test_complete_leaves_out_nodes_with_nothing_to_drop() -> None:
    assert complete([[1, 2, 3]]) == {}
    assert complete([[1], [2], [3]]) == {1: {2, 3}, 2: {1, 3}, 3: {1, 2}}


@given(st.sampled_from([2, 3, 4, 5, 7]), st.integers(0, 2**32))
def test_halves_split_minority_from_majority(n: int, pick: int) -> None:
    nodes = list(range(1, n + 1))
    g = halves(nodes, pick)
    minority = [a for a in nodes if sum(_sees(g, a, b) for b in nodes) == n // 2]
    assert len(minority) == (n if n % 2 == 0 else n // 2)
    for a in nodes:
        side = sum(_sees(g, a, b) for b in nodes)
        assert side in (n // 2, n - n // 2)
    assert halves(nodes, pick) == halves(list(reversed(nodes)), pick)


@given(st.sampled_from([3, 4, 5, 7]), st.integers(0, 2**32))
def test_bridge_keeps_one_node_in_touch_with_all(n: int, pick: int) -> None:
    nodes = list(range(1, n + 1))
    g = bridge(nodes, pick)
    hubs = [a for a in nodes if all(_sees(g, a, b) for b in nodes)]
    assert len(hubs) == 1
    rest = [a for a in nodes if a != hubs[0]]
    # the others split into two sides that cannot see each other
    cut = [(a, b) for a in rest for b in rest if a < b and not _sees(g, a, b)]
    assert cut


def test_bridge_on_three_nodes_cuts_one_link() -> None:
    g = bridge([1, 2, 3], 0)
    assert len(g) == 2
    (a, da), (b, db) = sorted(g.items())
    assert da == {b} and db == {a}


@given(st.integers(0, 2**32))
def test_ring_of_five_gives_everyone_a_different_majority(pick: int) -> None:
    nodes = [1, 2, 3, 4, 5]
    g = ring(nodes, pick)
    views = set()
    for a in nodes:
        view = frozenset(b for b in nodes if _sees(g, a, b))
        assert len(view) == 3
        views.add(view)
    assert len(views) == 5


def test_too_few_nodes() -> None:
    with pytest.raises(NemesisError):
        ring([1, 2, 3], 0)
    with pytest.raises(NemesisError):
        bridge([1, 2], 0)
    with pytest.raises(NemesisError):
        halves([1], 0)


def test_nodes_of_and_choose() -> None:
    assert nodes_of({1: {2, 3}, 2: {1}}) == [1, 2, 3]
    assert choose([3, 1, 2], 4) == 2
    assert choose([1, 2, 3], 4) == choose([2, 3, 1], 4)
    with pytest.raises(NemesisError):
        choose([], 1)
