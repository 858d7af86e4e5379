"""A stored run whose broker-state files are there but cannot be read (found by a review):
its verdict is unknown, whatever the check found without them. Each test fails before.
And the checkers a workload names, composed into one verdict."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from faultline.checkers.guarantees import PROCESSED_TWICE
from faultline.checkers.result import UNKNOWN, Result, Valid
from faultline.checkers.stored import Checked, Checker, StoredRun, check_stored, compose
from faultline.history import ReadResult
from faultline.spec import KafkaSpec, TestSpec
from faultline.targeted import coordinator_partition
from tests.unit.checkers.queue_hist import TOPIC, H, make_spec
from tests.unit.checkers.test_transactions import SECOND, committed_pair
from tests.unit.checkers.test_transactions import H as TxnH
from tests.unit.checkers.test_transactions import spec as txn_spec
from tests.unit.checkers.test_transactions_rpw import twice, wipe


def run_dir(path: Path, h: H, **files: str) -> Path:
    """A run directory: an acks=1 spec, ``h`` as its history, and ``files`` by name."""
    path.mkdir()
    (path / "test.json").write_text(json.dumps(make_spec(acks="1", min_insync=1).to_json()))
    (path / "history.jsonl").write_text("".join(json.dumps(o.to_dict()) + "\n" for o in h.ops))
    for name, text in files.items():
        (path / name).write_text(text)
    return path


def replica(node: int) -> dict[str, Any]:
    return {"topic": TOPIC, "partition": 0, "node": node, "log_start_offset": 0, "log_end_offset": 5,
            "hw_checkpoint": 5, "batches": [[0, 2, 0, 7], [3, 4, 0, 8]]}


def test_an_unreadable_replicas_file_makes_a_loss_unknown(tmp_path: Path) -> None:
    """Read, it shows the drain stopped short (unknown); cut mid-write, the check counted
    the unread offsets as lost writes: a definite fail."""
    h = H()
    for off in range(5):
        h.send(0, 100 + off, offset=off)
    h.drain([(o, 100 + o) for o in range(3)], hw=3)
    good = "".join(json.dumps(replica(n)) + "\n" for n in (1, 2, 3))
    assert check_stored(run_dir(tmp_path / "ok", h, **{"replicas.jsonl": good})).valid == UNKNOWN
    bad = check_stored(run_dir(tmp_path / "bad", h, **{"replicas.jsonl": good[:-20] + "\n"}))
    assert bad.valid == UNKNOWN and bad.violations == ["lost-write"]
    (entry,) = [u for u in bad.unknown if u["kind"] == "broker-state-unreadable"]
    assert entry["affects_verdict"] is True and "replicas.jsonl" in entry["why"]


def follower_killed() -> tuple[H, str]:
    """acks=1: a follower (node 2) killed, offset 4 not drained; and a metadata log whose
    one line shows node 1 leading with a full ISR all along."""
    h = H()
    h.t = 2_000_000_000
    for off in range(5):
        h.send(0, 100 + off, offset=off)
    h.fault("kill", [2])
    h.drain([(o, 100 + o) for o in range(4)], hw=4)
    line = {"offset": 5, "time": -1_000_000_000, "type": "partition", "topic": TOPIC, "partition": 0,
            "leader": 1, "isr": [1, 2, 3], "elr": [], "last_known_elr": [], "replicas": [1, 2, 3],
            "leader_epoch": 0, "raw": {}}
    return h, json.dumps(line) + "\n"


def test_an_unreadable_metadata_log_does_not_let_a_loss_pass(tmp_path: Path) -> None:
    """acks=1, a follower (node 2) killed: read, the metadata log shows node 1 led all along,
    so the lost write is a violation; with one bad line, the permissive reading (the kill
    may have hit the leader) passed the run."""
    h, good = follower_killed()
    ok = check_stored(run_dir(tmp_path / "ok", h, **{"metadata.jsonl": good}))
    assert ok.valid is False and ok.violations == ["lost-write"]
    broken = good + '{"offset": 6, "type": "partition", "topic": "fl-queue"}\n'
    bad = check_stored(run_dir(tmp_path / "bad", h, **{"metadata.jsonl": broken}))
    assert bad.valid == UNKNOWN
    assert any(u["kind"] == "broker-state-unreadable" for u in bad.unknown)


def test_a_metadata_log_written_while_clocks_were_set_apart_witnesses_no_order(tmp_path: Path) -> None:
    """The history of the test above, its metadata log read: node 1 led all along, so the
    lost write is a violation. With clock faults in the spec, the log's times are the
    active controller's skewed clock, so it places nothing among the history's ops: the
    kill may have hit the leader (no other witness), and the verdict is unknown."""
    h, line = follower_killed()
    metadata = {"metadata.jsonl": line}
    assert check_stored(run_dir(tmp_path / "true", h, **metadata)).valid is False
    skewed = run_dir(tmp_path / "skewed", h, **metadata)
    spec = make_spec(acks="1", min_insync=1)
    spec = dataclasses.replace(spec, nemesis=dataclasses.replace(spec.nemesis, faults=("kill", "clock")))
    (skewed / "test.json").write_text(json.dumps(spec.to_json()))
    result = check_stored(skewed)
    assert result.valid == UNKNOWN and result.violations == []


def test_a_missing_broker_state_file_changes_nothing(tmp_path: Path) -> None:
    h = H()
    h.send(0, 100, offset=0)
    h.drain([(0, 100)])
    assert check_stored(run_dir(tmp_path / "run", h)).valid is True


@pytest.mark.parametrize(("said", "valid"), [
    ([], True),
    (["metadata log: DumpLogSegments failed: timed out"], UNKNOWN),
    (["the collection did not finish"], UNKNOWN),
    (None, True),  # a run from before cluster.json said
])
def test_a_broker_state_cluster_json_says_was_not_collected_makes_the_verdict_unknown(
        tmp_path: Path, said: list[str] | None, valid: Any) -> None:
    """A collection that failed, or that a Ctrl-C or a crash cut, left no metadata log: read
    as a run that never had one, the check permitted a loss on assumption."""
    h = H()
    h.send(0, 100, offset=0)
    h.drain([(0, 100)])
    cluster = {"kafka_version": "4.3.1", "dump_log_segments": None, "features": {},
               "eligible_leader_replicas": None}
    if said is not None:
        cluster["broker_state_errors"] = said
    r = check_stored(run_dir(tmp_path / "run", h, **{"cluster.json": json.dumps(cluster)}))
    assert r.valid == valid
    assert any(u["kind"] == "broker-state-unreadable" for u in r.unknown) == (valid == UNKNOWN)


def test_an_unreadable_cluster_json_makes_the_verdict_unknown(tmp_path: Path) -> None:
    h = H()
    h.send(0, 100, offset=0)
    h.drain([(0, 100)])
    assert check_stored(run_dir(tmp_path / "run", h, **{"cluster.json": "{cut"})).valid == UNKNOWN


@pytest.mark.parametrize("mistyped", [{"broker_state_errors": "metadata log: DumpLogSegments failed"},
                                      {"broker_state_errors": {"metadata log": "failed"}},
                                      {"eligible_leader_replicas": "false"}])
def test_a_mistyped_cluster_json_makes_the_verdict_unknown(tmp_path: Path, mistyped: dict[str, Any]) -> None:
    """Found by review: errors given as a string (or an object), or eligible leader
    replicas as no boolean, were read as none said, and the run passed as one whose broker
    state was all collected."""
    h = H()
    h.send(0, 100, offset=0)
    h.drain([(0, 100)])
    cluster = {"kafka_version": "4.3.1", "dump_log_segments": None, "features": {},
               "eligible_leader_replicas": None, "broker_state_errors": [], **mistyped}
    r = check_stored(run_dir(tmp_path / "run", h, **{"cluster.json": json.dumps(cluster)}))
    assert r.valid == UNKNOWN
    (u,) = [u for u in r.unknown if u["kind"] == "broker-state-unreadable"]
    assert f"cluster.json could not be read: {next(iter(mistyped))}" in u["why"]


@pytest.mark.parametrize(("said", "valid"), [(None, False), (True, False), (False, UNKNOWN)])
def test_eligible_leader_replicas_the_cluster_did_not_have_make_the_verdict_unknown(
        tmp_path: Path, said: bool | None, valid: Any) -> None:
    """Kafka 4.3.1 is judged with eligible leader replicas (a new cluster has them): a
    lost write after wiping one replica (the leader) is then forbidden at acks=all,
    min.insync=2, as two replicas hold every committed record. Without them the ISR may
    shrink to the leader alone and one wipe may lose it: where cluster.json says the
    metadata log finalized features without ELR, the broker's state and the judgement
    disagree, and the violation is not known."""
    h = H()
    h.send(0, 100, offset=0)
    h.fault("wipe", [1], leaders={f"{TOPIC}/0": 1})
    h.drain([])
    cluster = {"kafka_version": "4.3.1", "dump_log_segments": None, "broker_state_errors": [],
               "features": {} if said is None else {"metadata.version": 27},
               "eligible_leader_replicas": said}
    run = run_dir(tmp_path / "run", h, **{"cluster.json": json.dumps(cluster)})
    (run / "test.json").write_text(json.dumps(make_spec(acks="all", min_insync=2).to_json()))
    r = check_stored(run)
    assert r.valid == valid and r.violations == ["lost-write"]
    disagree = [u for u in r.unknown if u["kind"] == "broker-state-disagrees"]
    assert bool(disagree) == (valid == UNKNOWN)
    if disagree:
        assert "eligible leader replicas" in disagree[0]["why"]


def test_a_run_without_anomalies_stays_valid_whatever_the_cluster_said_of_eligible_leader_replicas(
        tmp_path: Path) -> None:
    """The same run with nothing lost: no anomaly was judged either way, so a cluster.json
    that says the cluster ran without ELR leaves nothing to disagree with."""
    h = H()
    h.send(0, 100, offset=0)
    h.fault("wipe", [1], leaders={f"{TOPIC}/0": 1})
    h.drain([(0, 100)])
    cluster = {"kafka_version": "4.3.1", "dump_log_segments": None, "broker_state_errors": [],
               "features": {"metadata.version": 27}, "eligible_leader_replicas": False}
    run = run_dir(tmp_path / "run", h, **{"cluster.json": json.dumps(cluster)})
    (run / "test.json").write_text(json.dumps(make_spec(acks="all", min_insync=2).to_json()))
    r = check_stored(run)
    assert r.valid is True and not any(u["kind"] == "broker-state-disagrees" for u in r.unknown), r.unknown


@pytest.mark.parametrize("name", ["metadata.jsonl", "replicas.jsonl", "cluster.json"])
def test_a_broker_state_file_that_is_no_file_makes_the_verdict_unknown(tmp_path: Path, name: str) -> None:
    """Found by review: a broker-state file that is there but no regular file (a directory)
    was taken for one the run never had, and the run passed on the history alone."""
    h = H()
    h.send(0, 100, offset=0)
    h.drain([(0, 100)])
    d = run_dir(tmp_path / "run", h)
    (d / name).mkdir()
    r = check_stored(d)
    assert r.valid == UNKNOWN
    (entry,) = [u for u in r.unknown if u["kind"] == "broker-state-unreadable"]
    assert name in entry["why"]


@pytest.mark.parametrize(("verdicts", "merged"), [
    ((True, True), True), ((True, UNKNOWN), UNKNOWN), ((UNKNOWN, True), UNKNOWN),
    ((True, False), False), ((False, UNKNOWN), False), ((UNKNOWN, False, True), False)])
def test_composed_checkers_merge_validity_false_over_unknown_over_true(
        tmp_path: Path, verdicts: tuple[Valid, ...], merged: Valid) -> None:
    """Checkers composed by name: the run's verdict is false if any checker's is, else
    unknown if any is, else true; every checker's reasons and fields are kept, the first's
    result is the run's."""
    def checker(i: int, valid: Valid) -> Checker:
        def check(run: StoredRun, earlier: Sequence[Checked]) -> Checked:
            assert len(earlier) == i  # each is given what those before it found
            return Checked(Result(valid=valid, unknown=[{"kind": f"from-{i}"}], extra={f"field-{i}": i}))
        return check

    names = [f"checker-{i}" for i in range(len(verdicts))]
    checkers = {name: checker(i, v) for i, (name, v) in enumerate(zip(names, verdicts, strict=True))}
    run = StoredRun(tmp_path, make_spec(), [], ReadResult(), "history")
    result = compose(names, run, checkers).result
    assert result.valid == merged
    assert [u["kind"] for u in result.unknown] == [f"from-{i}" for i in range(len(verdicts))]
    assert result.extra == {f"field-{i}": i for i in range(len(verdicts))}


def txn_run(path: Path, spec: TestSpec, h: TxnH, cluster: dict[str, Any]) -> Path:
    """A txn run directory: ``spec``, ``h``'s history and ``cluster`` as cluster.json."""
    path.mkdir()
    (path / "test.json").write_text(json.dumps(spec.to_json()))
    (path / "history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in h.rows))
    (path / "cluster.json").write_text(json.dumps(cluster))
    return path


def cluster_json(elr: bool, errors: list[str]) -> dict[str, Any]:
    return {"kafka_version": "4.0.0", "dump_log_segments": "kafka.tools.DumpLogSegments",
            "features": {"metadata.version": 21}, "eligible_leader_replicas": elr,
            "transaction_version": 2, "broker_state_errors": errors}


def test_a_txn_run_whose_broker_state_was_not_all_collected_is_unknown(tmp_path: Path) -> None:
    """Found by a review: the txn checker reads the metadata log and the replicas' logs as
    witnesses, so a collection that did not finish leaves its verdict unknown, as the
    queue's (docs/history.md, cluster.json); it passed."""
    h = TxnH()
    committed_pair(h)
    h.drain(10, 0, (0, 1))
    h.drain(11, 1, (0, 2))
    assert check_stored(txn_run(tmp_path / "ok", txn_spec(), h, cluster_json(True, []))).valid is True
    cut = check_stored(txn_run(tmp_path / "cut", txn_spec(), h,
                               cluster_json(True, ["the collection did not finish"])))
    assert cut.valid == UNKNOWN and [u["kind"] for u in cut.unknown] == ["broker-state-unreadable"]


def test_a_txn_loss_judged_without_eligible_leader_replicas_the_cluster_had_is_unknown(
        tmp_path: Path) -> None:
    """Found by a review: Kafka 4.0.0 is judged without ELR, and with it a wipe of partition
    1's leader and clean stops of both followers may lose its committed record; the
    cluster's metadata log saying ELR was on contradicts that excuse, so the verdict is
    unknown (``broker-state-disagrees``), as for the queue; it passed."""
    spec = dataclasses.replace(txn_spec(version="4.0.0"), kafka=KafkaSpec(version="4.0.0"))
    h = TxnH()
    h.wait(SECOND)
    h.begin(0, (0, 1), (1, 2))
    h.op("nemesis", "info", "wipe", {"nodes": [1], "leaders": {f"{TOPIC}/1": 1, f"{TOPIC}/0": 2}})
    h.op("nemesis", "info", "wipe", {"nodes": [1], "result": "done"})
    h.fault("start", (1,))
    h.fault("stop", (2, 3))
    h.fault("start", (2, 3))
    h.end(0, "ok", (0, 1, 0), (1, 2, 0))
    h.drain(10, 0, (0, 1))
    h.drain(11, 1)
    assert check_stored(txn_run(tmp_path / "off", spec, h, cluster_json(False, []))).valid is True
    on = check_stored(txn_run(tmp_path / "on", spec, h, cluster_json(True, [])))
    assert on.valid == UNKNOWN and [u["kind"] for u in on.unknown] == ["broker-state-disagrees"]


@pytest.mark.parametrize(("replicas", "isr", "permitted"), [
    ([1, 2, 3], [1], True), ([1, 2, 3], [1, 2, 3], False), ([2, 3, 4], [2], False)])
def test_a_stored_txn_runs_processed_twice_is_judged_by_the_rpw_groups_offsets_replicas_in_its_metadata_log(
        tmp_path: Path, replicas: list[int], isr: list[int], permitted: bool) -> None:
    """A wipe of node 1 between two committed transactions that read one record: permitted
    where the metadata log gives node 1 the rpw group's __consumer_offsets partition
    (coordinator_partition over the five it records) and shows it that partition's ISR
    alone; a violation where the other replicas stayed in the ISR (they kept the commit),
    or where it gives node 1 none of it."""
    spec = txn_spec()
    at = coordinator_partition(spec.rpw_group_id, 5)
    d = txn_run(tmp_path / "run", spec, twice(wipe(1)), cluster_json(True, []))
    lines = [{"offset": p, "time": 0, "type": "partition", "topic": "__consumer_offsets", "partition": p,
              "leader": r[0], "isr": r, "replicas": r}
             for p in range(5) for r in [replicas if p == at else [4, 5, 6]]]
    lines.append({**lines[at], "offset": 5, "time": 1, "isr": isr})
    (d / "metadata.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = check_stored(d)
    assert result.anomaly_counts[PROCESSED_TWICE] == 1
    assert (PROCESSED_TWICE in result.violations) is not permitted
