"""The observer's lines from a fake client source and real files in a temporary
log dir: what each field holds, and how a failed read shows."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import orjson

from faultline.brokerstate.observe import Observer
from faultline.cluster.kafka_client import HighWatermark
from faultline.cluster.protocol import PartitionState
from faultline.history import HistoryWriter
from faultline.run.runner import _observing
from faultline.spec import TestSpec
from tests.unit.brokerstate.fakes import TOPIC, FakeSource, log_dirs


def observer(tmp_path: Path, source: FakeSource, dirs: dict[int, Path] | None = None) -> Observer:
    clock = itertools.count(1000, 1000)
    return Observer(tmp_path / "observations.jsonl", lambda: next(clock), TOPIC, 2, source, dirs)


def test_a_round_is_one_line_per_partition(tmp_path: Path) -> None:
    source = FakeSource({0: PartitionState(1, (1, 2), (1, 2, 3)), 1: PartitionState(2, (1, 2, 3), (2, 3, 1))},
                        {0: HighWatermark(6, 3), 1: HighWatermark(0, None)})
    obs = observer(tmp_path, source, log_dirs(tmp_path))
    lines = obs.sample()
    assert lines == [
        {"time": 1000, "topic": TOPIC, "partition": 0, "leader": 1, "isr": [1, 2], "replicas": [1, 2, 3],
         "hw": 6, "hw_epoch": 3, "leo": {"1": 10, "2": 10, "3": 6},
         "hw_checkpoint": {"1": 6, "2": 6, "3": None}},
        {"time": 1000, "topic": TOPIC, "partition": 1, "leader": 2, "isr": [1, 2, 3], "replicas": [2, 3, 1],
         "hw": 0, "hw_epoch": None, "leo": dict.fromkeys("231"), "hw_checkpoint": dict.fromkeys("231")},
    ]
    obs.sample()
    written = [orjson.loads(line) for line in obs.path.read_bytes().splitlines()]
    assert written[:2] == lines and [w["time"] for w in written[2:]] == [2000, 2000]


def test_no_metadata_still_gives_the_disk(tmp_path: Path) -> None:
    source = FakeSource({}, {})
    source.fail = TimeoutError("KafkaError{code=_TIMED_OUT}")
    line = observer(tmp_path, source, log_dirs(tmp_path)).sample()[0]
    assert (line["leader"], line["isr"], line["replicas"], line["hw"], line["hw_epoch"]) == (
        None, [], [], None, None)
    assert line["leo"] == {"1": 10, "2": 10, "3": 6}, "every node with a log dir"
    assert "metadata: KafkaError{code=_TIMED_OUT}" in line["error"]
    assert "hw: " in line["error"]


def test_a_partition_without_its_hw_says_why(tmp_path: Path) -> None:
    source = FakeSource({0: PartitionState(None, (2,), (1, 2, 3)), 1: PartitionState(2, (2,), (1, 2, 3))},
                        {0: "NOT_LEADER_OR_FOLLOWER", 1: HighWatermark(7, 2)})
    lines = observer(tmp_path, source).sample()
    assert (lines[0]["hw"], lines[0]["hw_epoch"], lines[0]["error"]) == (
        None, None, "hw: NOT_LEADER_OR_FOLLOWER")
    assert lines[0]["leo"] == {"1": None, "2": None, "3": None}, "no log dirs on this host"
    assert (lines[1]["hw"], lines[1]["hw_epoch"]) == (7, 2) and "error" not in lines[1]


def test_for_transactions_a_line_holds_the_last_stable_offset(tmp_path: Path) -> None:
    """Asked only with ``lso``: read_committed's answer, beside the HW; what it could not
    get is null and said."""
    source = FakeSource({0: PartitionState(1, (1,), (1,)), 1: PartitionState(1, (1,), (1,))},
                        {0: HighWatermark(9, 1), 1: HighWatermark(4, 1)},
                        {0: HighWatermark(5, 1), 1: "REQUEST_TIMED_OUT"})
    assert "lso" not in observer(tmp_path, source).sample()[0]
    lines = Observer(tmp_path / "o.jsonl", lambda: 1, TOPIC, 2, source, lso=True).sample()
    assert [(ln["hw"], ln["lso"], ln.get("error")) for ln in lines] == [
        (9, 5, None), (4, None, "lso: REQUEST_TIMED_OUT")]


def test_a_partition_missing_from_the_metadata(tmp_path: Path) -> None:
    source = FakeSource({0: PartitionState(1, (1,), (1,))}, {0: HighWatermark(3, 0)})
    lines = observer(tmp_path, source).sample()
    assert [ln.get("error") for ln in lines] == [None, "not in the metadata"]


def test_the_thread_survives_a_failing_round_and_stops(tmp_path: Path) -> None:
    source = FakeSource({0: PartitionState(1, (1,), (1,)), 1: PartitionState(1, (1,), (1,))},
                        dict.fromkeys((0, 1), HighWatermark(1, 0)))
    obs = Observer(tmp_path / "o.jsonl", time.monotonic_ns, TOPIC, 2, source, interval_s=0.01)
    calls = itertools.count()
    real = obs.sample

    def flaky() -> list[dict[str, object]]:
        if next(calls) == 0:
            raise RuntimeError("a bug in a round")
        return real()

    obs.sample = flaky  # type: ignore[method-assign]
    deadline = time.monotonic() + 30
    with obs:
        while obs.rounds < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        stopped_at = time.monotonic_ns()
    assert obs.rounds >= 3, "rounds went on after one raised"
    assert source.closed_in == "faultline-observer", "the thread that asked released the client"
    written = obs.path.read_bytes().splitlines()
    assert len(written) == 2 * obs.rounds
    assert orjson.loads(written[-1])["time"] >= stopped_at, "a last round after stop() was called"
    time.sleep(0.05)
    assert len(obs.path.read_bytes().splitlines()) == len(written), "nothing after stop() returned"


def test_an_observer_that_cannot_start_does_not_stop_the_run(tmp_path: Path) -> None:
    class NoCluster:
        nodes = ()

        def bootstrap_servers(self) -> str:
            raise RuntimeError("no cluster")

    ran = []
    with HistoryWriter(tmp_path / "history.jsonl") as history, \
            _observing(TestSpec(), NoCluster(), tmp_path / "observations.jsonl", history):  # type: ignore[arg-type]
        ran.append(True)
    assert ran == [True] and not (tmp_path / "observations.jsonl").exists()
