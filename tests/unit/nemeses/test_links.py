"""The links nemesis against the in-memory fake cluster: what it degrades, what it
journals, and that the checker counts it as a fault on the degraded node."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from faultline.checkers.faults_seen import faults_of
from faultline.checkers.measures import HEALS, HELD
from faultline.errors import NemesisError
from faultline.history import HistoryWriter, read_history
from faultline.nemeses.links import LOSSES, RATES_KBIT, degradation
from faultline.nemeses.package import NemesisPackage
from faultline.nemeses.schedule import ScheduledFault
from faultline.spec import NemesisSpec, TestSpec
from tests.unit.nemeses.test_package import FakeCluster


def test_degradations_are_reproducible_and_drawn_from_the_pick() -> None:
    assert {degradation("loss", p)["loss"] for p in range(60)} == set(LOSSES)
    assert {degradation("bandwidth", p)["rate_kbit"] for p in range(60)} == set(RATES_KBIT)
    assert degradation("loss", 5) == degradation("loss", 5)
    with pytest.raises(NemesisError, match="unknown link degradation"):
        degradation("latency", 0)


@pytest.mark.parametrize(("kind", "call"), [("loss", "drop_on_links"), ("bandwidth", "limit_links")])
def test_a_degraded_node_is_journaled_restored_with_counters_and_seen(
        tmp_path: Path, kind: str, call: str) -> None:
    spec = TestSpec(seed=3, time_limit_s=2.0, nemesis=NemesisSpec(faults=("links",)))
    cluster = FakeCluster(spec, tmp_path)
    pkg = NemesisPackage.from_spec(spec, cluster)  # type: ignore[arg-type]
    pkg.schedule = [ScheduledFault(0.0, "links", kind, 0.1, 4)]
    with HistoryWriter(tmp_path / "h.jsonl") as h:
        pkg.run(time.monotonic() + 0.5, h)
        pkg.heal_all(h)
    ops = list(read_history(tmp_path / "h.jsonl"))
    assert [o.f for o in ops] == ["degrade", "degrade", "restore", "restore"]
    node, peers = ops[0].value["nodes"], ops[0].value["peers"]
    assert node == [2] and peers == [1, 3]
    assert (call, (2, (1, 3), degradation(kind, 4).popitem()[1])) in cluster.calls
    assert "links of node 2" in ops[1].value["result"]
    did = {"loss": {"dropped": 7, "shaped_packets": 0, "overlimits": 0},
           "bandwidth": {"dropped": 0, "shaped_packets": 9, "overlimits": 4}}[kind]
    assert ops[3].value["counters"] == {"2": did}
    assert cluster.clean()
    # a fault on the node's replicas, band drawn until the restore
    assert "links" in faults_of(ops).families
    assert "degrade" in HELD and HEALS["restore"] == ("degrade",)


def test_teardown_restores_whatever_is_in_effect(tmp_path: Path) -> None:
    spec = TestSpec(nemesis=NemesisSpec(faults=("links",)))
    cluster = FakeCluster(spec, tmp_path)
    pkg = NemesisPackage.from_spec(spec, cluster)  # type: ignore[arg-type]
    pkg.setup()
    cluster.drop_on_links(1, [2, 3], 0.5)  # degraded behind the package's back
    pkg.heal_all()
    assert cluster.clean() and cluster.calls[-1] == ("restore_links", None)
