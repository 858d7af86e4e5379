"""The pure parts of the aggregates: the Wilson interval, the exact percentile and what
the guarantee table expects of a cell (faultline/analysis/aggregate.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from faultline.analysis.aggregate import expected_loss, percentile, wilson, worst_case_faults
from faultline.checkers.partition_faults import PartitionFaults
from faultline.spec import NemesisSpec, TestSpec
from tests.unit.checkers.queue_hist import make_spec as _spec


def make_spec(acks: str, min_insync: int, unclean: bool = False, faults: tuple[str, ...] = (),
              schedule: tuple[str, ...] = ()) -> TestSpec:
    return dataclasses.replace(_spec(acks, min_insync, unclean),
                               nemesis=NemesisSpec(faults=faults, schedule=schedule))


@pytest.mark.parametrize(("k", "n", "lo", "hi"), [
    (0, 10, 0.0, 0.2775),  # Wilson 1927 / Newcombe 1998 worked values
    (5, 10, 0.2366, 0.7634),
    (10, 10, 0.7225, 1.0),
    (1, 3, 0.0615, 0.7923),
])
def test_wilson_interval(k: int, n: int, lo: float, hi: float) -> None:
    low, high = wilson(k, n)
    assert low == pytest.approx(lo, abs=5e-4) and high == pytest.approx(hi, abs=5e-4)


@pytest.mark.parametrize(("values", "p", "expected"), [
    ([0, 10], 0.3, 3.0),  # Spark's documented example
    ([7], 0.99, 7.0),
    ([4, 1, 3, 2], 0.5, 2.5),
    ([9, 1, 1, 1], 0.5, 1.0),
    (list(range(101)), 0.99, 99.0),
    (list(range(100)), 0.99, 98.01),  # 99 * 0.99: between the ranks 98 and 99
])
def test_percentile_is_linear_between_the_ranks_around_it(values: list[int], p: float,
                                                          expected: float) -> None:
    assert percentile(np.array(values, np.int64), p) == pytest.approx(expected, rel=1e-15)


def test_expected_loss_follows_the_guarantee_table() -> None:
    assert expected_loss(make_spec("1", 1, faults=("kill",)))[0] is True
    assert expected_loss(make_spec("0", 1, faults=()))[0] is True
    permitted, why = expected_loss(make_spec("all", 2, faults=("kill",)))
    assert permitted is False and "min.insync.replicas=2" in why
    assert expected_loss(make_spec("1", 1, faults=()))[0] is False  # no fault, no leader change
    assert expected_loss(make_spec("all", 2, unclean=True, faults=("kill",)))[0] is True
    assert expected_loss(make_spec("all", 2, faults=("toxics",)))[0] is False


#: A targeted run's schedule (the model's leader-crash-followers-held recipe): no seeded faults.
HELD_CRASH = ("pause followers of 0 as held", "wait for 1 s", "crash leader of 0 as old", "resume held",
              "wait until 0 has a new leader within 30 s", "restart old")


def test_a_targeted_schedule_is_expected_by_its_own_faults() -> None:
    """A targeted run has no seeded faults: its schedule's steps decide what it may lose."""
    assert expected_loss(make_spec("1", 1, schedule=HELD_CRASH))[0] is True
    assert expected_loss(make_spec("1", 1, schedule=("delay node 1 by 100 ms",)))[0] is False  # no new leader
    assert expected_loss(make_spec("1", 1, schedule=("crash node 1",)))[0] is True
    assert expected_loss(make_spec("all", 2, schedule=HELD_CRASH))[0] is False
    assert worst_case_faults(make_spec("all", 2, schedule=HELD_CRASH)).families == {"pause", "kill"}
    # data destroyed on as many replicas as the destroying steps may touch, not max_concurrent's
    assert expected_loss(make_spec("all", 2, schedule=("wipe follower of 0",)))[0] is False
    assert expected_loss(make_spec("all", 2, schedule=("wipe followers of 0",)))[0] is True
    two = ("wipe node 1", "lose-unflushed node 2")
    assert worst_case_faults(make_spec("all", 2, schedule=two)).data_loss == 2
    assert worst_case_faults(make_spec("all", 2, faults=("wipe",))).data_loss == 1
    # a hold cuts replication only: its nodes stay unfenced, so no unclean election follows it
    assert expected_loss(make_spec("all", 2, unclean=True, schedule=("hold followers of 0",)))[0] is False
    assert expected_loss(make_spec("all", 2, unclean=True, schedule=("isolate followers of 0",)))[0] is True


def test_worst_case_faults() -> None:
    worst = worst_case_faults(make_spec("all", 2, faults=("kill", "wipe")))
    assert {"kill", "wipe"} <= worst.families and worst.leader_fault
    assert worst.faulted >= 3 and worst.data_loss >= 1
    toxics = worst_case_faults(make_spec("all", 2, faults=("toxics",)))
    assert toxics == PartitionFaults(frozenset({"toxics"}))
