"""The clock nemesis against the in-memory fake cluster: what it tells each clock, what
it journals, that a strobe moves the clock and ends true, and that the checker counts it
as a fault that permits nothing."""

from __future__ import annotations

import time
from collections.abc import Collection
from pathlib import Path

import pytest

from faultline.checkers.faults_seen import faults_of
from faultline.checkers.measures import HEALS, HELD
from faultline.errors import NemesisError
from faultline.history import HistoryWriter, Op, read_history
from faultline.nemeses.clock import BUMPS_S, STROBES_S, TOLERANCE_S, ClockNemesis, believed, offset
from faultline.nemeses.package import NemesisPackage
from faultline.nemeses.schedule import ScheduledFault
from faultline.spec import NemesisSpec, TestSpec
from tests.unit.nemeses.test_package import FakeCluster, _wait_for


def test_offsets_are_reproducible_and_drawn_from_the_pick() -> None:
    assert {offset("bump", p) for p in range(80)} == set(BUMPS_S)
    assert {offset("strobe", p) for p in range(80)} == set(STROBES_S)
    assert offset("bump", 5) == offset("bump", 5)
    with pytest.raises(NemesisError, match="unknown clock fault"):
        offset("drift", 0)


def test_a_belief_is_read_again_until_the_broker_follows_what_its_clock_was_told() -> None:
    answers = iter([{1: 0.02, 2: 0.01}, {1: 299.98, 2: 0.03}, {2: -59.5}])
    asked: list[list[int]] = []

    def read(nodes: Collection[int], timeout: float) -> dict[int, float | None]:
        asked.append(sorted(nodes))
        return next(answers)

    assert believed(read, {1: 300, 2: -60}, 10) == {1: 299.98, 2: -59.5}
    assert asked == [[1, 2], [1, 2], [2]], "a node that follows is not asked again"


def test_a_belief_that_never_follows_is_the_last_answer_and_a_silent_broker_none() -> None:
    answers = iter([{1: 0.0, 2: 0.0}, *[{1: None, 2: 0.0}] * 1000])

    def read(nodes: Collection[int], timeout: float) -> dict[int, float | None]:
        return next(answers)

    t0 = time.monotonic()
    assert believed(read, {1: 60, 2: 60, 3: 60}, 0.3) == {1: 0.0, 2: 0.0, 3: None}
    assert time.monotonic() - t0 < 0.3 + 1, "the wait outlived its bound"
    calls: list[int] = []
    edge = 60 + TOLERANCE_S
    assert believed(lambda n, t: calls.append(1) or {1: edge}, {1: 60}, 5) == {1: edge}
    assert calls == [1], "a belief within the tolerance was read again"


def test_a_bump_is_journaled_with_what_the_clock_was_told_and_reset(tmp_path: Path) -> None:
    spec = TestSpec(seed=3, time_limit_s=2.0, nemesis=NemesisSpec(faults=("clock",)))
    cluster = FakeCluster(spec, tmp_path)
    pkg = NemesisPackage.from_spec(spec, cluster)  # type: ignore[arg-type]
    pkg.schedule = [ScheduledFault(0.0, "clock", "bump", 0.1, 4)]
    with HistoryWriter(tmp_path / "h.jsonl") as h:
        pkg.run(time.monotonic() + 0.5, h)
        pkg.heal_all(h)
    ops = list(read_history(tmp_path / "h.jsonl"))
    assert [o.f for o in ops] == ["clock", "clock", "reset-clock", "reset-clock"]
    told = offset("bump", 4)
    assert ops[0].value["nodes"] == [2] and ops[0].value["offset_s"] == told
    assert ops[1].value["clocks"] == {"2": told} and ops[1].value["believed"] == {"2": told}
    assert ops[3].value["clocks"] == {"1": 0, "2": 0, "3": 0}
    assert ops[3].value["believed"] == {"1": 0, "2": 0, "3": 0}
    assert ("set_clock", (2, told)) in cluster.calls and cluster.clean()
    assert faults_of(ops).families == {"clock"}
    assert "clock" in HELD and HEALS["reset-clock"] == ("clock",)


def test_a_strobe_moves_the_clock_back_and_forth_and_ends_true_after_its_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("faultline.nemeses.clock.STROBE_PERIOD_S", 0.02)
    cluster = FakeCluster(TestSpec(nemesis=NemesisSpec(faults=("clock",))), tmp_path)
    nemesis = ClockNemesis()
    nemesis.setup(cluster)  # type: ignore[arg-type]
    done = nemesis.invoke(Op(0, 0, "nemesis", "info", "clock",
                             {"kind": "strobe", "nodes": [1, 3], "offset_s": 30, "for_s": 0.3}))
    assert done.value["clocks"] == {"1": 30, "3": 30}
    _wait_for(lambda: not nemesis.strobing, "the strobe ending after its 0.3 s")
    told = [arg for name, arg in cluster.calls if name == "set_clock" and arg[0] == 1]
    assert told.count((1, 30)) >= 2 and told.count((1, 0)) >= 2 and told[-1] == (1, 0)
    assert cluster.clean()


def test_teardown_ends_a_strobe_and_resets_every_clock(tmp_path: Path) -> None:
    cluster = FakeCluster(TestSpec(nemesis=NemesisSpec(faults=("clock",))), tmp_path)
    nemesis = ClockNemesis()
    nemesis.setup(cluster)  # type: ignore[arg-type]
    nemesis.invoke(Op(0, 0, "nemesis", "info", "clock", {"kind": "strobe", "nodes": [2], "offset_s": 5}))
    cluster.set_clock(1, -60)  # set behind the nemesis's back
    _wait_for(lambda: (2, 5) in [a for n, a in cluster.calls if n == "set_clock"], "the strobe's first jump")
    nemesis.teardown()
    assert not nemesis.strobing and cluster.clean()
