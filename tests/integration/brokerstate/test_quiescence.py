"""The drain after a late kill, on a real cluster: the run waits for quiescence and
drains every partition to the log end its replicas agree on.

The race (issue 10): with acks=1 a follower killed shortly before the main phase ends
stays in the ISR the controller reports until its broker session times out; the heal
restarts it inside that window. The leader's high watermark is frozen below its log
end, where acks=1 writes were acknowledged, until the follower catches up or leaves
the ISR. A run that waits only for "a full ISR in the metadata" passes at once and
drains to the frozen HW, reporting every write above it as lost.

Here the kill is aimed (not drawn by the seeded schedule): on a topic of two
partitions over three nodes, the node that leads neither, :data:`KILL_BEFORE_END_S`
before the main phase ends, held until the heal. Killing a node that leads nothing
matters: no send waits for a new leader, so the run gets from the heal to the drain
in about a second, well inside the session timeout. (A killed leader holds its
partition's sends until it is fenced, which also takes it out of every ISR.)
"""

from __future__ import annotations

import io
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from faultline.cluster.protocol import Cluster
from faultline.history import read_history
from faultline.nemeses.kill import KillNemesis
from faultline.nemeses.package import NemesisPackage
from faultline.nemeses.schedule import ScheduledFault
from faultline.run.runner import RunOutcome, run_test
from faultline.spec import KafkaSpec, NemesisSpec, ProducerSpec, TestSpec, TopicSpec
from tests.schemas import valid_lines

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

#: Well inside the broker session timeout (6 s), so the heal restarts the node while
#: the controller still lists it in the ISR.
KILL_BEFORE_END_S = 1.5
SPEC = TestSpec(
    name="it-late-kill", time_limit_s=12.0,
    kafka=KafkaSpec(heap_mb=384),
    topic=TopicSpec(partitions=2, min_insync_replicas=1),
    producer=ProducerSpec(acks="1", enable_idempotence=False),
    nemesis=NemesisSpec(faults=("kill",)),
)  # fmt: skip
TOPIC = SPEC.topic.name


def late_follower_kill(spec: TestSpec, cluster: Cluster) -> NemesisPackage:
    """One kill of the node that leads no partition, ``KILL_BEFORE_END_S`` before the
    main phase ends, held past it: the runner's heal restarts it."""
    leaders = {s.leader for s in cluster.leaders(spec.topic.name).values()}
    ids = sorted(n.id for n in cluster.nodes)
    (target,) = set(ids) - leaders
    step = ScheduledFault(at_s=spec.time_limit_s - KILL_BEFORE_END_S, family="kill", kind="kill",
                hold_s=3600.0, pick=ids.index(target))
    return NemesisPackage(cluster, (step,), {"kill": KillNemesis()})


@pytest.fixture(scope="module")
def outcome(local_backend: None, tmp_path_factory: pytest.TempPathFactory) -> RunOutcome:
    return run_test(SPEC, results=tmp_path_factory.mktemp("results"),
                    console=Console(file=io.StringIO()), nemesis_factory=late_follower_kill)


def _kill(run_dir: Path) -> dict[str, Any]:
    """The value of the kill's completion op."""
    kills = [op.value for op in read_history(run_dir)
             if op.process == "nemesis" and op.f == "kill" and "result" in op.value]
    assert len(kills) == 1 and kills[0].get("leaders"), kills
    return kills[0]


def test_the_kill_hit_a_follower_and_froze_the_hws(outcome: RunOutcome) -> None:
    """The scenario happened: after the kill, the observer saw each partition with the
    killed follower still in the ISR and the HW below the leader's log end."""
    assert outcome.error is None, outcome.error
    kill = _kill(outcome.run_dir)
    killed = kill["nodes"][0]
    assert killed not in kill["leaders"].values()
    frozen = {o["partition"]
              for o in valid_lines(outcome.run_dir / "observations.jsonl", "observations.schema.json")
              if killed in o["isr"] and o["hw"] is not None and o["leader"] is not None
              and (o["leo"].get(str(o["leader"])) or 0) > o["hw"]}
    assert frozen == {0, 1}, "a HW frozen by the killed ISR member on every partition"


def test_the_drain_reaches_the_log_end_every_replica_holds(outcome: RunOutcome) -> None:
    replicas = valid_lines(outcome.run_dir / "replicas.jsonl", "replicas.schema.json")
    log_ends: dict[int, set[int]] = defaultdict(set)
    for r in replicas:
        log_ends[r["partition"]].add(r["log_end_offset"])
    assert len(replicas) == 6 and all(len(ends) == 1 for ends in log_ends.values()), log_ends
    drained = {d.partition: (d.complete, d.high_watermark, d.error) for d in outcome.drains}
    assert drained == {p: (True, ends.pop(), None) for p, ends in log_ends.items()}
    assert outcome.recovered


def test_no_lost_write_where_the_leader_was_never_faulted(outcome: RunOutcome) -> None:
    kill = _kill(outcome.run_dir)
    unfaulted = {int(tp.rsplit("/", 1)[1]) for tp, leader in kill["leaders"].items()
                 if leader not in kill["nodes"]}
    assert unfaulted == {0, 1}
    acked: dict[int, dict[int, int]] = defaultdict(dict)  # partition -> value -> offset
    drained: dict[int, set[int]] = defaultdict(set)
    for op in read_history(outcome.run_dir):
        if op.f == "send" and op.type == "ok":
            acked[op.value["partition"]][op.value["value"]] = op.value["offset"]
        elif op.f == "drain" and op.type == "ok":
            drained[op.value["partition"]].update(v for _, v in op.value["records"])
    for p in sorted(unfaulted):
        assert len(acked[p]) > 1000, "the workload made progress"
        lost = sorted((off, v) for v, off in acked[p].items() if v not in drained[p])
        assert not lost, f"partition {p}: {len(lost)} acknowledged writes not drained, from {lost[0]}"
    results = json.loads((outcome.run_dir / "results.json").read_text())
    reported = {a["partition"] for a in results["anomalies"].get("lost-write", [])}
    assert not reported & unfaulted, results["anomaly_counts"]
