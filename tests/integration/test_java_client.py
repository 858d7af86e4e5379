"""The Java client (org.apache.kafka:kafka-clients of the broker's version) as the client
under test, on a real 3-node cluster with a kill: its history validates, the same checker
judges it from its files (acknowledged values drained at their offsets, each once), and
its producers' log reaches client-log.jsonl."""

from __future__ import annotations

import io
import json
from collections import defaultdict

import pytest
from rich.console import Console

from faultline.checkers.stored import check_stored
from faultline.history import ReadResult, read_history
from faultline.run.runner import RunOutcome, run_test
from faultline.rundir import find_history
from faultline.spec import KafkaSpec, NemesisSpec, TestSpec, WorkloadSpec
from tests.schemas import valid_lines

pytestmark = pytest.mark.integration
#: 1,000 sends/s: every line of the history is validated against its schema here, which
#: at the Java client's full speed (about 630,000 lines) took 90-220 s of the suite.
SPEC = TestSpec(name="it-java-client", time_limit_s=20.0, kafka=KafkaSpec(heap_mb=384),
                workload=WorkloadSpec(client="java", rate=1000),
                nemesis=NemesisSpec(faults=("kill",), interval_s=6.0))


@pytest.fixture(scope="module")
def outcome(local_backend: None, tmp_path_factory: pytest.TempPathFactory) -> RunOutcome:
    return run_test(SPEC, results=tmp_path_factory.mktemp("results"), console=Console(file=io.StringIO()))


def test_the_java_clients_history_is_checked_by_the_same_checker(outcome: RunOutcome) -> None:
    assert outcome.error is None and outcome.recovered
    assert json.loads((outcome.run_dir / "test.json").read_text())["workload"]["client"] == "java"
    valid_lines(find_history(outcome.run_dir), "history.schema.json")
    acked: dict[int, tuple[int, int]] = {}
    drained: dict[int, list[tuple[int, int]]] = defaultdict(list)
    senders: set[int] = set()
    polled = 0
    kills = 0
    result = ReadResult()
    for op in read_history(outcome.run_dir, result):  # validates pairing
        v = op.value
        if op.f == "send" and op.type == "ok":
            acked[v["value"]] = (v["partition"], v["offset"])
            senders.add(op.process)  # type: ignore[arg-type]
        elif op.f == "poll" and op.type == "ok":
            polled += len(v["records"])
        elif op.f == "drain" and op.type == "ok":
            for offset, value in v["records"]:
                drained[value].append((v["partition"], offset))
        elif op.f == "kill" and op.value.get("result"):
            kills += 1
    assert not result.truncated and kills >= 1
    assert len(acked) > 1000 and polled > 0 and {0, 1} <= senders
    wrong = {value: (where, drained.get(value)) for value, where in acked.items()
             if drained.get(value) != [where]}
    assert not wrong, f"{len(wrong)} acknowledged values misplaced, e.g. {list(wrong.items())[:5]}"
    checked = check_stored(outcome.run_dir)
    assert checked.valid == outcome.valid and checked.stats["send"]["ok"] == len(acked) == outcome.stats.ok
    assert checked.valid is True, checked.to_json()["anomaly_counts"]


def test_the_java_producers_log_reaches_the_client_log(outcome: RunOutcome) -> None:
    lines = [json.loads(x) for x in (outcome.run_dir / "client-log.jsonl").read_text().splitlines()]
    assert any(x["process"] in (0, 1) and "ProducerId set to" in x["message"] for x in lines), lines[:5]
