"""``faultline cluster up``'s spec for its session, without a cluster: session.start is
replaced by a recorder, so what would run shows here; bad input is one line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from faultline.cli import main
from faultline.run import session
from faultline.spec import TestSpec


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[TestSpec]:
    seen: list[TestSpec] = []

    def record(spec: TestSpec, results: Path, echo: object) -> session.Ready:
        seen.append(spec)
        raise SystemExit(0)  # stop before the status of a cluster that does not exist

    monkeypatch.setattr(session, "start", record)
    return seen


def test_the_session_runs_the_options_on_a_topic_the_cluster_can_hold(started: list[TestSpec]) -> None:
    r = CliRunner().invoke(main, ["cluster", "up", "--nodes", "1", "--rate", "20"])
    assert r.exit_code == 0, r.output
    [spec] = started
    assert (spec.name, spec.kafka.nodes, spec.workload.rate) == ("cluster", 1, 20.0)
    assert spec.time_limit_s == 3600.0
    assert (spec.topic.replication_factor, spec.topic.min_insync_replicas) == (1, 1)


def test_a_spec_file_sets_the_rest_and_a_backend_other_than_local_is_one_line(
        tmp_path: Path, started: list[TestSpec]) -> None:
    f = tmp_path / "acks1.yaml"
    f.write_text("name: acks1\nproducer:\n  acks: '1'\n  enable_idempotence: false\n")
    assert CliRunner().invoke(main, ["cluster", "up", "-f", str(f)]).exit_code == 0
    assert (started[0].name, started[0].producer.acks, started[0].kafka.nodes) == ("acks1", "1", 3)
    f.write_text("backend: docker\n")
    r = CliRunner().invoke(main, ["cluster", "up", "-f", str(f)])
    assert r.exit_code == 2 and r.output.strip().splitlines() == [
        "faultline: error: faultline cluster runs the local backend, not 'docker': "
        "drop backend from the spec file"]
    assert len(started) == 1


def test_status_of_a_crashed_run_says_so_not_that_a_process_owns_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from faultline.cluster.host.runstate import ProcId, RunState
    from faultline.cluster.local.cluster import LocalCluster

    monkeypatch.setenv("FAULTLINE_STATE", str(tmp_path))
    monkeypatch.setattr(LocalCluster, "active_controller", lambda self: None)  # no cluster to ask
    monkeypatch.setattr(LocalCluster, "topics", lambda self: [])
    proc = subprocess.Popen(["true"])
    proc.wait()
    owner = ProcId(proc.pid, 1)  # a process that is gone
    RunState(run_id="abc123", subnet="10.241.7.0/24", node_ids=[1, 2, 3], workdir=str(tmp_path / "w"),
             owns_workdir=False, spec=TestSpec().to_json(), owner=owner,
             proxy_ports={1: 4001, 2: 4002, 3: 4003}, nodes={1: owner, 2: owner, 3: owner}).save()
    r = CliRunner().invoke(main, ["cluster", "status", "abc123"])
    assert r.exit_code == 0, r.output
    assert "cluster abc123 (Kafka" in r.output
    assert "left by a crashed run: faultline cluster down removes it" in r.output, r.output
