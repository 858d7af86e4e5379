"""The seeded nemesis schedule: reproducible, bounded, and never over capacity."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faultline.errors import SpecError
from faultline.faults import FAMILIES, PARTITION_KINDS
from faultline.nemeses.schedule import ScheduledFault, build_schedule, kinds
from faultline.spec import FAULTS, NemesisSpec

ALL = ("kill", "pause", "partition", "toxics", "wipe", "lose-unflushed")


def _held_at(steps: tuple[ScheduledFault, ...], t: float) -> list[ScheduledFault]:
    return [s for s in steps if s.at_s <= t < s.end_s]


def test_same_seed_same_schedule() -> None:
    spec = NemesisSpec(faults=ALL, interval_s=10.0, max_concurrent=2)
    a = build_schedule(spec, seed=42, time_limit_s=300, nodes=3)
    b = build_schedule(spec, seed=42, time_limit_s=300, nodes=3)
    assert a == b
    assert len(a) > 10


def test_different_seed_different_schedule() -> None:
    spec = NemesisSpec(faults=ALL, interval_s=10.0)
    assert build_schedule(spec, 1, 300, 3) != build_schedule(spec, 2, 300, 3)


def test_no_faults_no_schedule() -> None:
    assert build_schedule(NemesisSpec(), 7, 60, 3) == ()


def test_every_family_and_kind_appears() -> None:
    spec = NemesisSpec(faults=ALL, interval_s=5.0, max_concurrent=3)
    steps = build_schedule(spec, 3, 3000, 5)
    assert {s.family for s in steps} == set(ALL)
    assert {s.kind for s in steps if s.family == "partition"} == set(PARTITION_KINDS)


def test_a_group_workloads_schedule_also_aims_faults_at_the_groups_coordinator() -> None:
    """With ``coordinated``, each family with a ``coordinator_kind`` draws it too; without, the
    kinds (and so every schedule of the other workloads) are as they were."""
    spec = NemesisSpec(faults=ALL, interval_s=5.0, max_concurrent=3)
    drawn = {s.kind for s in build_schedule(spec, 3, 3000, 5, coordinated=True)}
    assert {"kill-coordinator", "pause-coordinator", "isolate-coordinator"} <= drawn
    assert not any(k.endswith("-coordinator") for s in build_schedule(spec, 3, 3000, 5) for k in [s.kind])
    assert kinds("kill", 3) == ("kill",)
    assert kinds("kill", 3, coordinated=True) == ("kill", "kill-coordinator")
    assert kinds("toxics", 3, coordinated=True) == kinds("toxics", 3)
    assert kinds("partition", 1, coordinated=True) == ()


def test_a_group_or_txn_workloads_schedule_also_aims_client_faults_at_its_own_clients() -> None:
    """In a group workload's run the clients family draws a consumer crashed or paused
    beside a producer crashed, in a txn workload's a producer paused too; in a queue
    workload's only the producer crash, so its schedules are as they were."""
    spec = NemesisSpec(faults=("clients", "kill"), interval_s=5.0)
    group = build_schedule(spec, 3, 600, 3, coordinated=True, workload="group")
    assert {s.kind for s in group if s.family == "clients"} == {"crash", "crash-consumer", "pause-consumer"}
    txn = build_schedule(spec, 3, 600, 3, coordinated=True, workload="txn")
    assert {s.kind for s in txn if s.family == "clients"} == {"crash", "pause-producer"}
    for coordinated in (False, True):
        assert {s.kind for s in build_schedule(spec, 3, 600, 3, coordinated) if s.family == "clients"} \
            == {"crash"}
    assert kinds("clients", 3, workload="group") == ("crash", "crash-consumer", "pause-consumer")
    assert kinds("clients", 3, workload="txn") == ("crash", "pause-producer")
    assert kinds("kill", 3, workload="group") == kinds("kill", 3)


@settings(max_examples=100, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    faults=st.lists(st.sampled_from(FAULTS), min_size=1, max_size=7, unique=True),
    interval=st.floats(1.0, 30.0),
    max_concurrent=st.integers(1, 4),
    time_limit=st.floats(1.0, 600.0),
    nodes=st.sampled_from([3, 5]),
)
def test_schedule_invariants(seed: int, faults: list[str], interval: float, max_concurrent: int,
                             time_limit: float, nodes: int) -> None:
    spec = NemesisSpec(faults=tuple(faults), interval_s=interval, max_concurrent=max_concurrent)
    steps = build_schedule(spec, seed, time_limit, nodes)
    assert list(steps) == sorted(steps, key=lambda s: s.at_s)
    for s in steps:
        assert s.family in faults
        assert s.kind in kinds(s.family, nodes)
        assert s.hold_s > 0
        assert s.at_s > 0
        assert s.end_s <= time_limit + 1e-6
        held = _held_at(steps, s.at_s)
        assert len(held) <= max_concurrent
        assert len([h for h in held if h.family == s.family]) == 1


def test_quiet_period_between_faults_when_one_at_a_time() -> None:
    spec = NemesisSpec(faults=("kill",), interval_s=10.0, max_concurrent=1)
    steps = build_schedule(spec, 5, 600, 3)
    for a, b in itertools.pairwise(steps):
        assert b.at_s - a.end_s >= 10.0 * 0.2 - 1e-3


def test_interval_sets_the_pace() -> None:
    spec = NemesisSpec(faults=("pause",), interval_s=10.0, max_concurrent=4)
    steps = build_schedule(spec, 9, 1000, 3)
    # one per family at a time: a start every ~interval plus hold
    assert 25 <= len(steps) <= 100


def test_ring_and_bridge_need_nodes() -> None:
    assert "ring" not in kinds("partition", 3)
    assert "bridge" in kinds("partition", 3)
    assert "ring" in kinds("partition", 5)
    assert kinds("partition", 1) == ()
    with pytest.raises(SpecError, match="at least 2 nodes"):
        build_schedule(NemesisSpec(faults=("partition",)), 0, 60, 1)
    with pytest.raises(SpecError, match="unknown fault"):
        kinds("clock-skew", 3)


def test_action_names_follow_history_md() -> None:
    assert [FAMILIES[f].fault for f in FAULTS] == [
        "kill", "pause", "stop", "partition", "toxic", "wipe", "lose-unflushed", "degrade",
        "crash-client", "clock"]
    assert [FAMILIES[f].heal for f in FAULTS] == [
        "start", "resume", "start", "heal", "clear-toxics", "start", "start", "restore",
        "restart-client", "reset-clock"]


def test_every_family_has_a_nemesis_and_every_capability_it_needs_a_check() -> None:
    from faultline.nemeses.base import CAPABILITIES
    from faultline.nemeses.package import NEMESES

    assert set(NEMESES) == set(FAMILIES) == set(FAULTS)
    for family in FAMILIES.values():
        assert family.kinds and set(family.needs) <= set(CAPABILITIES), family.name
        assert NEMESES[family.name]().family == family.name
