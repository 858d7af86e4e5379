"""`make run`'s path, shortened: kills and partitions on a real 3-node cluster through the
runner, the drain and the checker. Every fault is journaled and healed, the cluster
recovers, every partition drains, every file of the run directory validates, and with
acks=all, min.insync=2 and idempotence Kafka's guarantees hold (see
:func:`test_the_guarantees_hold` for the one client anomaly a run may show)."""

from __future__ import annotations

import io
import json

import orjson
import pytest
from rich.console import Console

from faultline.checkers.stored import check_stored
from faultline.history import read_history
from faultline.run.runner import RunOutcome, run_test
from faultline.rundir import GROUP_FILE, PLAIN_HISTORY_FILE, find_history, history_identity
from faultline.spec import KafkaSpec, NemesisSpec, TestSpec, WorkloadSpec
from tests.schemas import RUN_FILES, validate_run_dir
from tests.verdicts import assert_kafka_held

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
#: seed 3: a kill at 8.6 s, a partition isolating a leader at 16.7 s, a kill at 23.7 s
SPEC = TestSpec(name="it-kill-partition", seed=3, time_limit_s=30.0,
                kafka=KafkaSpec(heap_mb=384, replica_lag_time_max_ms=4000, broker_session_timeout_ms=6000),
                workload=WorkloadSpec(rate=200.0),
                nemesis=NemesisSpec(faults=("kill", "partition"), interval_s=6.0))
HEALS = {"kill": "start", "partition": "heal"}


@pytest.fixture(scope="module")
def outcome(local_backend: None, tmp_path_factory: pytest.TempPathFactory) -> RunOutcome:
    print(f"faulted run: seed {SPEC.seed}, faults {','.join(SPEC.nemesis.faults)}")
    return run_test(SPEC, results=tmp_path_factory.mktemp("results"), console=Console(file=io.StringIO()))


def test_every_fault_is_journaled_and_healed(outcome: RunOutcome) -> None:
    assert outcome.error is None
    nemesis = [op for op in read_history(outcome.run_dir) if op.process == "nemesis"]
    done = [op for op in nemesis if "result" in (op.value or {})]
    faults = [op for op in done if op.f in HEALS]
    print(f"faults: {[(op.f, op.value['result']) for op in faults]}")
    assert {op.f for op in faults} == {"kill", "partition"}, "both fault families ran"
    for fault in faults:
        assert any(op.f == HEALS[fault.f] and op.index > fault.index for op in done), f"never healed: {fault}"


def test_the_cluster_recovers_and_every_partition_drains(outcome: RunOutcome) -> None:
    assert outcome.recovered
    assert sorted(d.partition for d in outcome.drains) == [0, 1, 2]
    assert all(d.complete and d.error is None for d in outcome.drains), outcome.drains
    assert outcome.stats.ok > 0


def test_the_run_directory_validates(outcome: RunOutcome) -> None:
    expected = [n for n in RUN_FILES if n not in (PLAIN_HISTORY_FILE, GROUP_FILE)]
    assert validate_run_dir(outcome.run_dir) == expected


def test_the_guarantees_hold(outcome: RunOutcome) -> None:
    """Kafka's guarantees hold: nothing acknowledged is lost, no read is lost, and the
    broker's invariants held. The one violation a real run may show here is the client's,
    not Kafka's (:func:`~tests.verdicts.assert_kafka_held`)."""
    results = json.loads((outcome.run_dir / "results.json").read_text())
    assert_kafka_held(results)
    info = {op.value["value"] for op in read_history(outcome.run_dir)
            if op.f == "send" and op.type == "info"}
    duplicated = {e["value"] for e in results["anomalies"].get("duplicate", [])}
    print(f"duplicates: {len(duplicated)}, of sends that ended info: {len(duplicated & info)}")
    assert outcome.valid == results["valid"]
    assert results["white_box"]["valid"] is True, results["white_box"]["summary"]


def test_the_check_made_while_the_run_went_on_is_the_stored_runs(outcome: RunOutcome) -> None:
    """The runner checks while the run goes on, in a child following the history: its
    results.json is exactly what checking the stored run afterwards gives, and it did not
    fall back to checking after the run."""
    stored = orjson.loads(orjson.dumps(check_stored(outcome.run_dir).to_json()))
    written = json.loads((outcome.run_dir / "results.json").read_text())
    # and it names the history it judged, as the run closed it
    assert written.pop("history") == history_identity(find_history(outcome.run_dir))
    assert written == stored
    assert stored["stats"]["send"]["ok"] == outcome.stats.ok > 0
    assert "checking while the run went on failed" not in (outcome.run_dir / "faultline.log").read_text()
