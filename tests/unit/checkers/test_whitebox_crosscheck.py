"""The verdict cross-checked against the brokers' own state (found by a review): where
the history and the brokers disagree the verdict is unknown, and a white-box invariant
does not report what Kafka does by design, or what collection left half-done, as a
violation. Each test fails before its fix."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from faultline.checkers.guarantees import GuaranteeConfig, committed_loss_reason
from faultline.checkers.partition_faults import PartitionFaults
from faultline.checkers.result import UNKNOWN
from faultline.checkers.stored import check_stored
from faultline.checkers.verdict import PartitionFacts, QueueFacts
from faultline.checkers.whitebox import BrokerFiles, check_white_box
from faultline.spec import TestSpec
from tests.unit.checkers.queue_hist import TOPIC, H, make_spec
from tests.unit.checkers.test_stored import replica, run_dir

FIXTURE = Path(__file__).parents[2] / "e2e" / "data" / "kill-partition"


def fixture_copy(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    (run / "results.json").unlink()  # judged afresh from the files
    return run


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_the_fixture_run_is_valid_and_its_white_box_held(tmp_path: Path) -> None:
    result = check_stored(fixture_copy(tmp_path))
    assert result.valid is True and result.extra["white_box"]["valid"] is True


def test_replicas_that_disagree_below_the_hw_make_a_valid_run_unknown(tmp_path: Path) -> None:
    """The history shows nothing wrong, but one replica holds another batch (CRC) far below
    the HW: the brokers and the history disagree, so the run is not known valid."""
    run = fixture_copy(tmp_path)
    reps = lines(run / "replicas.jsonl")
    victim = next(r for r in reps if r["partition"] == 0)
    victim["batches"][1][3] ^= 1  # batch 7..7, below every HW of the run
    write(run / "replicas.jsonl", reps)
    result = check_stored(run)
    assert result.extra["white_box"]["valid"] is False
    assert result.valid == UNKNOWN
    (entry,) = [u for u in result.unknown if u["kind"] == "broker-state-disagrees"]
    assert entry["affects_verdict"] is True and "replicas-agree-below-hw" in entry["why"]


def test_an_unclean_election_the_config_forbids_makes_a_valid_run_unknown(tmp_path: Path) -> None:
    run = fixture_copy(tmp_path)
    md = lines(run / "metadata.jsonl")
    last = max(x["offset"] for x in md)
    p0 = [x for x in md if x.get("topic") == TOPIC and x.get("partition") == 0][-1]
    outsider = next(n for n in p0["replicas"] if n != p0["leader"])
    md += [{**p0, "offset": last + 1, "type": "partition-change", "leader": None, "isr": [], "elr": [],
            "last_known_elr": [], "leader_epoch": p0["leader_epoch"] + 1},
           {**p0, "offset": last + 2, "type": "partition-change", "leader": outsider, "isr": [outsider],
            "elr": [], "last_known_elr": [], "leader_epoch": p0["leader_epoch"] + 2}]
    write(run / "metadata.jsonl", md)
    result = check_stored(run)
    assert result.extra["white_box"]["invariants"][0]["violations"] == 1
    assert result.valid == UNKNOWN
    assert any(u["kind"] == "broker-state-disagrees" for u in result.unknown)


def test_a_lost_write_every_replica_holds_below_the_hw_is_unknown(tmp_path: Path) -> None:
    """The drain read offsets 0, 1, 3, 4 below its HW 5 and skipped 2, which every replica
    holds (batch 0..2, same CRC): the history says the write at 2 was lost, the brokers
    that it is there. Not a loss to report: unknown."""
    h = H()
    for off in range(5):
        h.send(0, 100 + off, offset=off)
    h.drain([(o, 100 + o) for o in (0, 1, 3, 4)], hw=5)
    held = "".join(json.dumps(replica(n)) + "\n" for n in (1, 2, 3))
    result = check_stored(run_dir(tmp_path / "held", h, **{"replicas.jsonl": held}))
    assert result.valid == UNKNOWN and result.violations == []
    (entry,) = [u for u in result.unknown if u["kind"] == "drain-missed-held"]
    assert entry["count"] == 1 and entry["affects_verdict"] is True
    # where the replicas do not all hold the same batch there, the drain still skipped
    # offset 2 below its HW (offsets are dense): a missed read, not a loss (issue 33)
    split = [replica(1), replica(2), {**replica(3), "batches": [[0, 2, 1, 70], [3, 4, 1, 80]]}]
    text = "".join(json.dumps(r) + "\n" for r in split)
    result = check_stored(run_dir(tmp_path / "split", h, **{"replicas.jsonl": text}))
    assert result.valid == UNKNOWN and result.violations == []
    (entry,) = [u for u in result.unknown if u["kind"] == "drain-missed"]
    assert entry["count"] == 1


def facts(spec: TestSpec, hw: int, faults: PartitionFaults | None = None) -> QueueFacts:
    """What the queue checker judged partition 0 by: ``faults`` (none by default), and a
    drain to ``hw``."""
    return QueueFacts(GuaranteeConfig.from_spec(spec),
                      {(TOPIC, 0): PartitionFacts(faults or PartitionFaults(), hw)}, {})


def _state(node: int, batches: list[list[int]], ckpt: int) -> dict[str, Any]:
    return {"topic": TOPIC, "partition": 0, "node": node, "log_start_offset": 0,
            "log_end_offset": batches[-1][1] + 1, "hw_checkpoint": ckpt, "batches": batches}


def _meta(isr: list[int]) -> list[dict[str, Any]]:
    return [{"offset": 1, "time": 0, "type": "partition", "topic": TOPIC, "partition": 0, "leader": 1,
             "isr": isr, "elr": [], "last_known_elr": [], "replicas": [1, 2, 3], "leader_epoch": 2,
             "raw": {}}]


def test_a_divergent_tail_on_a_replica_outside_the_isr_is_no_violation() -> None:
    """Node 3 led in epoch 0, appended 5..9 that never committed (its HW: 5), and was
    collected before it rejoined and truncated (a run that did not quiesce): the ISR's
    replicas agree below the HW 10; node 3's tail above its own HW is Kafka's design."""
    good = [[0, 4, 0, 11], [5, 9, 1, 22]]
    reps = [_state(1, good, 10), _state(2, good, 10), _state(3, [[0, 4, 0, 11], [5, 9, 0, 99]], 5)]
    spec = make_spec(acks="all", min_insync=2)
    results = facts(spec, hw=10)
    out = check_white_box(spec, BrokerFiles(metadata=_meta([1, 2]), replicas=reps, present=True), results)
    assert out is not None
    agree = out["invariants"][3]
    assert agree["violations"] == 0 and agree["checked"] > 0, agree
    # outside the ISR with no checkpoint read (null), none of node 3's log is compared
    blind = [*reps[:2], {**reps[2], "hw_checkpoint": None}]
    out = check_white_box(spec, BrokerFiles(metadata=_meta([1, 2]), replicas=blind, present=True), results)
    assert out is not None and out["invariants"][3]["violations"] == 0, out["invariants"][3]
    # in the ISR, the same log is a violation
    out = check_white_box(spec, BrokerFiles(metadata=_meta([1, 2, 3]), replicas=reps, present=True), results)
    assert out is not None and out["invariants"][3]["violations"] == 2  # n1-n3, n2-n3


def test_a_checkpoint_above_the_leo_after_a_permitted_loss_is_permitted() -> None:
    """Unclean election permitted: node 2 truncates below its HW to the new leader's log,
    its checkpoint file (written every replica.high.watermark.checkpoint.interval.ms)
    still says the old HW. That is the permitted loss, as hw-monotonic counts it."""
    obs = [{"time": 1, "topic": TOPIC, "partition": 0, "hw": 10, "leo": {"2": 10},
            "hw_checkpoint": {"2": 10}},
           {"time": 2, "topic": TOPIC, "partition": 0, "hw": 6, "leo": {"2": 6},
            "hw_checkpoint": {"2": 10}}]
    spec = make_spec(acks="1", min_insync=1, unclean=True)
    results = facts(spec, hw=6, faults=PartitionFaults(frozenset({"kill"}), True, faulted=3, fenced=3))
    assert committed_loss_reason(results.config, results.partitions[(TOPIC, 0)].faults) is not None
    out = check_white_box(spec, BrokerFiles(observations=obs, present=True), results)
    assert out is not None
    le, mono = out["invariants"][1], out["invariants"][2]
    assert (mono["violations"], mono["permitted"]) == (0, 1)
    assert (le["violations"], le["permitted"]) == (0, 1), le
