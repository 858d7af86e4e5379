"""Property tests: histories of a correct log pass; each single mutation is caught by name.

The histories come from :mod:`faultline.checkers.synthetic` (a log that keeps every
promise). A failure prints the Shape (seed included) and the mutation drawn, which
replays the case exactly.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

from faultline.checkers.queue import check_rows
from faultline.checkers.result import Result
from faultline.checkers.synthetic import Shape, generate
from tests.unit.checkers.queue_hist import make_spec

Rows = list[dict[str, Any]]
SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

shapes = st.builds(
    Shape,
    seed=st.integers(0, 2**32 - 1),
    partitions=st.integers(1, 3),
    producers=st.integers(1, 3),
    consumers=st.integers(1, 2),
    values=st.integers(10, 80),
    in_flight=st.integers(1, 5),
    poll_batch=st.integers(1, 8),
    fail=st.sampled_from([0.0, 0.05, 0.2]),
    info=st.sampled_from([0.0, 0.05, 0.2]),
    faults=st.integers(0, 2),
    drain_batch=st.integers(3, 50),
)


def verdict(rows: Rows, partitions: int) -> Result:
    return check_rows(make_spec(partitions=partitions), rows)


def seen(r: Result) -> set[str]:
    return {k for k, n in r.anomaly_counts.items() if n}


@SETTINGS
@given(shapes)
def test_a_correct_log_passes_with_no_anomaly(shape: Shape) -> None:
    r = verdict(list(generate(shape)), shape.partitions)
    assert seen(r) == set()
    assert r.valid is True, r.unknown


# -- the history, indexed for mutations ------------------------------------------------

class Index:
    def __init__(self, rows: Rows) -> None:
        self.rows = rows
        self.ok_sends: dict[int, dict[str, Any]] = {}  # value -> ok row
        self.failed: list[int] = []
        self.drains: dict[int, list[dict[str, Any]]] = defaultdict(list)  # part -> ok rows
        self.polls: list[dict[str, Any]] = []
        self.invoked_at: dict[int, int] = {}  # value -> index of its send's invoke
        for r in rows:
            if r["f"] == "send" and r["type"] == "invoke":
                self.invoked_at[r["value"]["value"]] = r["index"]
            if r["f"] == "send" and r["type"] == "ok":
                self.ok_sends[r["value"]["value"]] = r
            elif r["f"] == "send" and r["type"] == "fail":
                self.failed.append(r["value"]["value"])
            elif r["f"] == "drain" and r["type"] == "ok":
                self.drains[r["value"]["partition"]].append(r)
            elif r["f"] == "poll" and r["type"] == "ok" and r["value"]["records"]:
                self.polls.append(r)

    def drained(self) -> list[tuple[int, dict[str, Any], int]]:
        """(partition, drain row, record index) of every drained record."""
        return [(p, row, i) for p, rows in sorted(self.drains.items()) for row in rows
                for i in range(len(row["value"]["records"]))]

    def append_to_drain(self, part: int, value: int) -> None:
        last = self.drains[part][-1]["value"]
        last["records"].append([last["high_watermark"], value])
        last["high_watermark"] += 1
        for row in self.drains[part]:
            row["value"]["high_watermark"] = last["high_watermark"]


Mutation = Callable[[Index, st.DataObject], None]


def drop_acked(ix: Index, data: st.DataObject) -> None:
    """Cut the drain's log at an acked value: what a loss leaves (offsets stay dense, so
    a record dropped from the middle is a missed read, not a loss)."""
    acked = [(p, row, i) for p, row, i in ix.drained()
             if row["value"]["records"][i][1] in ix.ok_sends]
    assume(acked)
    p, row, i = data.draw(st.sampled_from(acked))
    cut = row["value"]["records"][i][0]
    for r in ix.drains[p]:
        r["value"]["records"] = [rec for rec in r["value"]["records"] if rec[0] < cut]
        r["value"]["high_watermark"] = cut


def move_to_second_offset(ix: Index, data: st.DataObject) -> None:
    """Store a drained value at a second offset too."""
    assume(ix.drained())
    p, row, i = data.draw(st.sampled_from(ix.drained()))
    ix.append_to_drain(p, row["value"]["records"][i][1])


def offset_two_values(ix: Index, data: st.DataObject) -> None:
    """A poll sees another value of the same partition (already sent) at an offset."""
    row = data.draw(st.sampled_from(ix.polls))
    rec = data.draw(st.sampled_from(row["value"]["records"]))
    others = [r[1] for _, d, j in ix.drained() if d["value"]["partition"] == rec[1]
              for r in [d["value"]["records"][j]]
              if r[1] != rec[3] and ix.invoked_at.get(r[1], row["index"]) < row["index"]]
    assume(others)
    rec[3] = data.draw(st.sampled_from(others))


def read_failed(ix: Index, data: st.DataObject) -> None:
    """A failed send's value shows in the drain."""
    assume(ix.failed)
    value = data.draw(st.sampled_from(ix.failed))
    part = next(r["value"]["partition"] for r in ix.rows
                if r["f"] == "send" and r["value"]["value"] == value)
    ix.append_to_drain(part, value)


def read_never_sent(ix: Index, data: st.DataObject) -> None:
    """A value nobody sent shows in the drain."""
    assume(ix.drains)
    ix.append_to_drain(data.draw(st.sampled_from(sorted(ix.drains))), 10**12)


def swap_producer_offsets(ix: Index, data: st.DataObject) -> None:
    """Two ok sends of one producer to one partition trade places in the log."""
    by: dict[tuple[Any, int], list[int]] = defaultdict(list)
    for v, r in ix.ok_sends.items():
        by[(r["process"], r["value"]["partition"])].append(v)
    pairs = [(k, vs) for k, vs in sorted(by.items(), key=str) if len(vs) >= 2]
    assume(pairs)
    (_, part), values = data.draw(st.sampled_from(pairs))
    v1, v2 = data.draw(st.lists(st.sampled_from(sorted(values)), min_size=2, max_size=2,
                                unique=True))
    o1, o2 = ix.ok_sends[v1]["value"]["offset"], ix.ok_sends[v2]["value"]["offset"]
    # both sent before any poll of either offset, or the swap reads a value before its send
    first_read = min((row["index"] for row in ix.polls for rec in row["value"]["records"]
                      if rec[1] == part and rec[2] in (o1, o2)), default=len(ix.rows))
    assume(max(ix.invoked_at[v1], ix.invoked_at[v2]) < first_read)
    swap = {(o1, v1): v2, (o2, v2): v1}
    ix.ok_sends[v1]["value"]["offset"], ix.ok_sends[v2]["value"]["offset"] = o2, o1
    for row in ix.polls:
        for rec in row["value"]["records"]:
            if rec[1] == part:
                rec[3] = swap.get((rec[2], rec[3]), rec[3])
    for row in ix.drains[part]:
        for rec in row["value"]["records"]:
            rec[1] = swap.get((rec[0], rec[1]), rec[1])


def consumer_goes_back(ix: Index, data: st.DataObject) -> None:
    """A poll repeats its last record of a partition at its end."""
    row = data.draw(st.sampled_from(ix.polls))
    recs = row["value"]["records"]
    recs.append(list(recs[-1]))


def consumer_skips(ix: Index, data: st.DataObject) -> None:
    """A poll leaves out a record between two others of the same partition."""
    middles = [(row, i) for row in ix.polls for i in range(1, len(row["value"]["records"]) - 1)
               if row["value"]["records"][i - 1][1] == row["value"]["records"][i][1]
               == row["value"]["records"][i + 1][1]]
    assume(middles)
    row, i = data.draw(st.sampled_from(middles))
    del row["value"]["records"][i]


#: mutation -> (the anomaly it must be caught as, other anomalies it may also cause)
MUTATIONS: dict[str, tuple[Mutation, str, set[str]]] = {
    "drop-acked": (drop_acked, "lost-write", {"phantom-read"}),
    "second-offset": (move_to_second_offset, "duplicate", set()),
    "offset-two-values": (offset_two_values, "inconsistent-offsets", {"phantom-read"}),
    "read-failed": (read_failed, "aborted-read", set()),
    "read-never-sent": (read_never_sent, "unexpected-value", set()),
    "swap-producer-offsets": (swap_producer_offsets, "nonmonotonic-send", set()),
    "consumer-goes-back": (consumer_goes_back, "nonmonotonic-poll", set()),
    "consumer-skips": (consumer_skips, "poll-skip", set()),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
@SETTINGS
@given(shape=shapes, data=st.data())
def test_each_single_mutation_is_caught_under_its_own_name(name: str, shape: Shape,
                                                           data: st.DataObject) -> None:
    rows = copy.deepcopy(list(generate(shape)))
    ix = Index(rows)
    assume(ix.polls)
    mutate, expected, also = MUTATIONS[name]
    mutate(ix, data)
    note(f"mutation {name} on {shape}")
    r = verdict(rows, shape.partitions)
    assert expected in seen(r)
    assert seen(r) <= {expected} | also
    assert r.valid is False and expected in r.violations
