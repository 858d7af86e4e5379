"""A run whose topic another producer also writes to, on a real cluster: the workload's
consumers and the drain journal the records it wrote as they read them (text, a null),
and the checker counts each as an unexpected-value, so the verdict is invalid, with the
values named, where a history it could not read would have made it unknown."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Sequence

import pytest
from confluent_kafka import Producer
from rich.console import Console

from faultline.cluster.protocol import Cluster
from faultline.history import HistoryWriter, iter_rows
from faultline.nemeses.schedule import ScheduledFault
from faultline.run.runner import RunOutcome, run_test
from faultline.spec import KafkaSpec, TestSpec
from tests.schemas import validator

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SPEC = TestSpec(name="it-foreign", time_limit_s=8.0, kafka=KafkaSpec(heap_mb=384))
#: What the other producer writes to partition 0, and how the history holds each.
FOREIGN: dict[bytes | None, str | None] = {
    b"hello": "hello", None: None, b"007": "007",
    b"9223372036854775808": "9223372036854775808",  # digits past every send's value
}
FOREIGN_AT_S = 3.0


class ForeignProducer:
    """In the nemesis's place: once, :data:`FOREIGN_AT_S` into the main phase, writes
    :data:`FOREIGN`'s records to partition 0 with a producer of its own (acks=all)."""

    def __init__(self, spec: TestSpec, cluster: Cluster) -> None:
        self.topic = spec.topic.name
        self.bootstrap = cluster.bootstrap_servers()
        self.stopped = threading.Event()
        self.written = 0

    @property
    def active(self) -> Sequence[ScheduledFault]:
        return ()

    main_phase_over = False

    def setup(self) -> None:
        pass

    def run(self, until: float, history: HistoryWriter) -> None:
        if self.stopped.wait(FOREIGN_AT_S):
            return
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all"})
        for raw in FOREIGN:
            producer.produce(self.topic, value=raw, partition=0)
        assert producer.flush(30) == 0
        self.written = len(FOREIGN)

    def heal_all(self, history: HistoryWriter | None = None) -> None:
        self.stopped.set()


@pytest.fixture(scope="module")
def outcome(local_backend: None, tmp_path_factory: pytest.TempPathFactory) -> RunOutcome:
    made: list[ForeignProducer] = []

    def foreign(spec: TestSpec, cluster: Cluster) -> ForeignProducer:
        made.append(ForeignProducer(spec, cluster))
        return made[0]

    out = run_test(SPEC, results=tmp_path_factory.mktemp("results"),
                   console=Console(file=io.StringIO()), nemesis_factory=foreign)
    assert made[0].written == len(FOREIGN), "the other producer wrote its records"
    return out


def test_each_foreign_record_is_an_unexpected_value_and_the_verdict_is_invalid(
        outcome: RunOutcome) -> None:
    assert outcome.error is None, outcome.error
    result = json.loads((outcome.run_dir / "results.json").read_text())
    validator("results.schema.json").validate(result)
    assert result["valid"] is False and outcome.valid is False
    assert result["violations"] == ["unexpected-value"]
    examples = result["anomalies"]["unexpected-value"]
    assert sorted(map(str, (e["value"] for e in examples))) == sorted(map(str, FOREIGN.values()))
    assert {e["partition"] for e in examples} == {0}
    drained_by = {e["value"]: e for e in examples}
    assert all(e["reads"] >= 1 for e in examples)  # the drain read each, at least
    assert "no send can carry it" in drained_by["hello"]["explanation"]
    offsets = sorted(e["offset"] for e in examples)
    assert offsets == list(range(offsets[0], offsets[0] + len(FOREIGN))), "written together"


def test_the_history_holds_them_as_read(outcome: RunOutcome) -> None:
    """The drain journaled each foreign record's value as :data:`FOREIGN` says, once,
    amid the workload's integers, and consumers read them too; every line holding one
    validates (the whole history of a run is validated by test_run.py's)."""
    history = validator("history.schema.json")
    drained, polled = [], []
    for d in iter_rows(outcome.run_dir):
        if d["type"] != "ok" or d["f"] not in ("poll", "drain"):
            continue
        values = [r[-1] for r in d["value"]["records"]]
        if any(v.__class__ is not int for v in values):
            history.validate(d)
        (drained if d["f"] == "drain" else polled).extend(values)
    odd = [v for v in drained if v.__class__ is not int]
    assert sorted(map(str, odd)) == sorted(map(str, FOREIGN.values()))
    assert len(drained) > 100 * len(odd)
    assert {str(v) for v in polled if v.__class__ is not int} == set(map(str, FOREIGN.values()))
