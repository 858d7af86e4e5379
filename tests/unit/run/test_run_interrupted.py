"""Ctrl-C after the main phase of a run (:func:`faultline.run.runner.run_test`), at each of
its stages, with the cluster, workload, nemesis, observer, quiescence and drain replaced
by fakes that journal what a real run would: the run tears everything down and ends with
no verdict, and its run directory, checked afterwards, is judged for sure only when the
drain and the broker state were both done; else it is at most unknown."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console

from faultline.brokerstate import collect
from faultline.checkers.results_file import check_run
from faultline.history import HistoryWriter
from faultline.run import runner
from faultline.workloads.clients import ProcessIds, WorkloadStats
from faultline.workloads.drain import PartitionDrain
from tests.unit.checkers.queue_hist import TOPIC, make_spec

PARTITIONS = (0, 1)


class Stages:
    """Where the fakes raise KeyboardInterrupt (``stage``), and what was done (``done``)."""

    def __init__(self, stage: str, lossy: bool) -> None:
        self.stage, self.lossy = stage, lossy
        self.done: list[str] = []

    def reach(self, stage: str) -> None:
        if stage == self.stage:
            raise KeyboardInterrupt


class Cluster:
    """No nodes: the collection finds no broker state to read, which is no error."""

    def __init__(self, stages: Stages) -> None:
        self.stages = stages
        self.nodes: list[Any] = []

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stages.done.append("torn down")
        self.stages.reach("teardown")

    def create_topic(self, topic: Any) -> None:
        pass

    def bootstrap_servers(self) -> str:
        return "127.0.0.1:1"

    def active_controller(self) -> int | None:
        return None

    def collect(self, into: Path) -> None:
        self.stages.reach("node logs")


class Nemesis:
    active = ()
    main_phase_over = False

    def __init__(self, stages: Stages) -> None:
        self.stages = stages

    def setup(self) -> None:
        pass

    def run(self, until: float, history: HistoryWriter) -> None:
        pass

    def heal_all(self, history: HistoryWriter | None = None) -> None:
        self.stages.done.append("healed")


class Workload:
    """One send acknowledged at offset 0 of each partition, its value the partition's."""

    def __init__(self, spec: Any, bootstrap: str, history: HistoryWriter, client_log: Any = None) -> None:
        self.history, self.processes, self.running = history, ProcessIds(len(PARTITIONS)), True

    def start(self) -> None:
        for p in PARTITIONS:
            value = {"topic": TOPIC, "partition": p, "value": p}
            self.history.append(p, "invoke", "send", value)
            self.history.append(p, "ok", "send", {**value, "offset": 0})
        self.running = False  # its sends are done: the main phase ends here

    def request_stop(self) -> None:
        self.running = False

    def stop(self, timeout: float | None = None) -> None:
        pass

    def stats(self) -> WorkloadStats:
        return WorkloadStats()


class Observer:
    def __init__(self, stages: Stages) -> None:
        self.stages = stages

    def start(self) -> None:
        pass

    def stop(self) -> None:
        self.stages.reach("observer stop")


@pytest.fixture
def stages(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Stages:
    stage, lossy = request.param
    s = Stages(stage, lossy)

    def quiescence(cluster: Any, topic: str, partitions: int, timeout: float) -> Any:
        s.reach("quiescence")
        return SimpleNamespace(done=True, ends=dict.fromkeys(PARTITIONS, 1), reasons={})

    def drain(spec: Any, bootstrap: str, history: HistoryWriter, processes: ProcessIds,
              ends: Any, timeout_s: float) -> list[PartitionDrain]:
        """Each partition read to its end, complete; lossy: partition 0's log is empty."""
        out = []
        for p in PARTITIONS:
            s.reach(f"drain of {p}")
            process = processes.take()
            records = [] if s.lossy and p == 0 else [[0, p]]
            hw = len(records)  # lossy: the log ends below the ack, as a loss leaves it
            history.append(process, "invoke", "drain", {"topic": TOPIC, "partition": p})
            history.append(process, "ok", "drain", {"topic": TOPIC, "partition": p, "records": records,
                                                    "log_start_offset": 0, "high_watermark": hw,
                                                    "last": True})
            out.append(PartitionDrain(p, process, 0, hw, len(records), True))
        s.reach("drained")  # every partition journaled complete, the drain not yet returned
        return out

    real_collect = collect.collect_broker_state

    def collect_broker_state(cluster: Any, spec: Any, run_dir: Path) -> list[str]:
        s.reach("collection")  # before its first write
        if s.stage == "collecting":
            monkeypatch.setattr(collect, "_metadata_node", lambda c: s.reach("collecting"))
        return real_collect(cluster, spec, run_dir)

    monkeypatch.setattr(runner, "workload_for", lambda spec: Workload)
    monkeypatch.setattr(runner, "wait_quiescent", quiescence)
    monkeypatch.setattr(runner, "drain", drain)
    monkeypatch.setattr(runner, "Observer", lambda *a, **k: Observer(s))
    monkeypatch.setattr(runner, "KafkaSource", lambda bootstrap: None)
    monkeypatch.setattr(runner, "host_data_dirs", lambda cluster: {})
    monkeypatch.setattr(runner, "collect_broker_state", collect_broker_state)
    return s


def _run(stages: Stages, run_dir: Path) -> runner.RunOutcome:
    return runner.run_test(make_spec(partitions=len(PARTITIONS)), console=Console(file=io.StringIO()),
                           cluster_factory=lambda spec: Cluster(stages),
                           nemesis_factory=lambda spec, cluster: Nemesis(stages), run_dir=run_dir)


BEFORE_THE_BROKER_STATE = ["quiescence", "drain of 1", "drained", "observer stop", "collection", "collecting"]
AFTER_IT = ["node logs", "teardown"]


@pytest.mark.parametrize("stages", [("never", False), ("never", True)], indirect=True, ids=["valid", "lossy"])
def test_a_run_not_interrupted_is_judged_for_sure(tmp_path: Path, stages: Stages) -> None:
    outcome = _run(stages, tmp_path / "run")
    assert outcome.valid is (not stages.lossy)
    assert check_run(tmp_path / "run").valid is (not stages.lossy)


@pytest.mark.parametrize("stages", [(stage, lossy) for stage in BEFORE_THE_BROKER_STATE + AFTER_IT
                                    for lossy in (False, True)], indirect=True,
                         ids=lambda p: f"{p[0]}-{'lossy' if p[1] else 'valid'}")
def test_ctrl_c_after_the_main_phase(tmp_path: Path, stages: Stages) -> None:
    """Found by review: Ctrl-C after the drain but before the broker state's collection
    had begun (the observer's last round, say) left a run directory that ``faultline
    check`` and the report judged valid, or lost, for sure: read as a run that never had
    broker state, what that state might have forbidden or set aside went unseen."""
    run_dir = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        _run(stages, run_dir)
    assert stages.done[:1] == ["healed"] and "torn down" in stages.done
    assert not (run_dir / "results.json").exists(), "an interrupted run writes no verdict"
    result = check_run(run_dir)
    if stages.stage in AFTER_IT:  # the drain and the broker state were done: established
        assert result.valid is (not stages.lossy)
        return
    assert result.valid == "unknown"
    why = [u["why"] for u in result.unknown if u["affects_verdict"]]
    assert why, result.unknown
    if stages.stage not in ("quiescence", "drain of 1"):  # there the drain says it is incomplete
        assert any("the run ended before collecting it" in w or "the collection did not finish" in w
                   for w in why), why


class Endless(Workload):
    """Sends as :class:`Workload`, and keeps running until asked to stop."""

    def start(self) -> None:
        super().start()
        self.running = True


class Ending(Nemesis):
    """A schedule whose ``end`` has run."""

    main_phase_over = True


@pytest.mark.timeout(120)
@pytest.mark.parametrize("stages", [("never", False)], indirect=True, ids=["valid"])
def test_a_schedule_that_ran_its_end_ends_the_main_phase_before_the_time_limit(
        tmp_path: Path, stages: Stages, monkeypatch: pytest.MonkeyPatch) -> None:
    """The workload runs on and the time limit is an hour: the main phase ends, and the
    run is judged, only because the nemesis says its schedule ended it."""
    monkeypatch.setattr(runner, "workload_for", lambda spec: Endless)
    spec = dataclasses.replace(make_spec(partitions=len(PARTITIONS)), time_limit_s=3600.0)
    outcome = runner.run_test(spec, console=Console(file=io.StringIO()),
                              cluster_factory=lambda spec: Cluster(stages),
                              nemesis_factory=lambda spec, cluster: Ending(stages), run_dir=tmp_path / "run")
    assert outcome.valid is True and stages.done[:1] == ["healed"]
