"""The per-run state file and process identity used to find a crashed run's leftovers."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from faultline.cluster.host import runstate
from faultline.cluster.host.runstate import ProcId, RunState
from tests.unit.cluster.fakes import FakeIp, Labelled


@pytest.fixture(autouse=True)
def _state_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAULTLINE_STATE", str(tmp_path))


def _state(owner: ProcId | None, **kw: object) -> RunState:
    return RunState(run_id="abc123", subnet="10.241.7.0/24", node_ids=[1, 2, 3], workdir="/w",
                    owns_workdir=False, spec={"name": "t"}, owner=owner, **kw)  # type: ignore[arg-type]


def test_state_round_trips() -> None:
    me = ProcId.of(os.getpid())
    state = _state(me, proxy_ports={1: 4001}, nodes={1: me, 2: None}, paused=[1])
    state.save()
    back = RunState.load("abc123")
    assert back == state
    assert back.layout.namespace(1) == "flabc123-n1"
    assert runstate.run_ids() == ["abc123"]


def test_a_run_whose_owner_lives_is_not_stale() -> None:
    assert not _state(ProcId.of(os.getpid())).is_stale()


def _proc_state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


def test_a_run_is_stale_once_its_owner_dies() -> None:
    proc = subprocess.Popen(["sleep", "30"])
    try:
        owner = ProcId.of(proc.pid)
        assert owner is not None and owner.alive()
        state = _state(owner)
        assert not state.is_stale()
        proc.kill()
        deadline = time.monotonic() + 10
        while _proc_state(proc.pid) != "Z":  # killed, not yet reaped: a zombie
            assert time.monotonic() < deadline, f"pid {proc.pid} never became a zombie"
            time.sleep(0.01)
        assert state.is_stale(), "an owner killed but not yet reaped is dead"
    finally:
        proc.wait()
    assert state.is_stale()


def test_a_reused_pid_does_not_count_as_the_owner() -> None:
    me = ProcId.of(os.getpid())
    assert me is not None
    assert not ProcId(me.pid, me.start + 1).alive()


def test_a_detached_run_is_stale_only_without_processes() -> None:
    me = ProcId.of(os.getpid())
    assert me is not None
    assert not _state(None, detached=True, nodes={1: me}).is_stale()
    assert _state(None, detached=True, nodes={1: ProcId(me.pid, me.start + 1)}).is_stale()


def test_new_run_ids_are_valid_and_fresh() -> None:
    ids = {runstate.new_run_id(set()) for _ in range(50)}
    assert all(re.fullmatch(r"[a-z][a-z0-9]{5}", i) for i in ids)
    assert runstate.new_run_id({"abc123"}) != "abc123"


def test_processes_are_found_by_their_run_marker() -> None:
    env = {**os.environ, runstate.ENV_RUN: "zz9plu"}
    proc = subprocess.Popen(["sleep", "30"], env=env)
    try:
        # Until the child has exec'd, /proc shows the parent's environment: wait for it.
        deadline = time.monotonic() + 5
        while proc.pid not in runstate.run_processes().get("zz9plu", []):
            assert time.monotonic() < deadline, "the child's run marker never showed in /proc"
            time.sleep(0.01)
        runstate.kill_and_wait([proc.pid])
        assert proc.pid not in runstate.run_processes().get("zz9plu", [])
    finally:
        proc.kill()
        proc.wait()


def test_destroying_a_crashed_docker_run_removes_its_containers_and_network(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by review: a crashed docker run's containers and network (a bridge and the
    engine's rules for it) were removed only by the docker backend's next start; a local
    run or `cluster down` that cleaned up after it killed its JVMs and left them."""
    from types import SimpleNamespace

    from faultline.cluster.docker import cluster as docker_cluster
    from faultline.cluster.docker import engine

    gone: list[str] = []
    things = {k: [Labelled(rid, gone, k) for rid in ("abc123", "live99")] for k in ("container", "network")}
    client = SimpleNamespace(
        containers=SimpleNamespace(list=lambda **kw: things["container"]),
        networks=SimpleNamespace(list=lambda **kw: things["network"]))
    monkeypatch.setattr(engine, "running", lambda: True)
    monkeypatch.setattr(docker_cluster, "_client", lambda: client)
    runstate.destroy("abc123", _state(None, detached=True))
    assert gone == ["container of abc123", "network of abc123"]


def test_a_process_that_outlives_the_wait_is_reported_and_a_kill_of_it_is_an_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by review: kill_and_wait said nothing when its process outlived the wait, so
    a node still running after its SIGKILL was journaled "killed node 2" (and its start
    then did nothing: the node was alive); so was a stop that had to SIGKILL."""
    from types import SimpleNamespace

    from faultline.cluster.local.cluster import LocalCluster
    from faultline.errors import ClusterError
    from faultline.spec import TestSpec

    proc = subprocess.Popen(["sleep", "30"])
    try:
        with monkeypatch.context() as m:
            m.setattr(runstate.os, "kill", lambda pid, sig: None)  # a SIGKILL that never lands
            assert runstate.kill_and_wait([proc.pid], timeout=0.1) is False
        cluster = LocalCluster(TestSpec())
        cluster._state = SimpleNamespace(nodes={2: ProcId.of(proc.pid)}, paused=[],  # type: ignore[assignment]
                                         save=lambda: None)
        with monkeypatch.context() as m, pytest.raises(ClusterError, match=r"node 2 .* still runs 10 s"):
            m.setattr(runstate, "kill_and_wait", lambda pids, timeout=5.0: False)
            cluster.kill(2)
        with monkeypatch.context() as m, pytest.raises(ClusterError, match="after SIGTERM and SIGKILL"):
            m.setattr(runstate.os, "kill", lambda pid, sig: None)  # deaf to SIGTERM as well
            m.setattr(runstate, "kill_and_wait", lambda pids, timeout=5.0: False)
            cluster.stop_node(2, timeout=0.05)
        assert runstate.kill_and_wait([proc.pid], timeout=5) is True
    finally:
        proc.kill()
        proc.wait()


def test_a_run_whose_teardown_ends_while_the_cleanup_looks_is_no_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by review: a run removing its own state directory (its teardown, not under
    the lock) between the cleanup listing the runs and reading them made the next run's
    start fail with FileNotFoundError (the age of a directory no longer there)."""
    (runstate.runs_dir() / "gone01").mkdir(parents=True)

    def torn_down(run_id: str) -> RunState:
        (runstate.runs_dir() / run_id).rmdir()  # its owner's destroy, meanwhile
        raise FileNotFoundError(run_id)

    monkeypatch.setattr(RunState, "load", staticmethod(torn_down))
    monkeypatch.setattr(runstate.netns, "run", FakeIp([], [], {}))  # other runs on this machine
    # are none of this test's business
    monkeypatch.setattr(runstate, "run_processes", lambda root=None: {})
    assert runstate.cleanup_stale() == []


def test_the_live_run_of_another_state_root_is_no_orphan(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by review: every name and process of a run id without state in this state
    root was an orphan, so a run (or `cluster down`) under the default root killed the live
    cluster of a session started with FAULTLINE_STATE set elsewhere (as a too-long socket
    path asks): its JVMs and Toxiproxy, which carry that root, and its namespaces. A crashed
    run of this root is still removed. (Nothing is killed or deleted here: both are recorded.)"""
    env = {**os.environ, runstate.ENV_RUN: "frgn01", "FAULTLINE_STATE": str(tmp_path / "other")}
    foreign = subprocess.Popen(["sleep", "30"], env=env)
    mine = subprocess.Popen(["sleep", "30"], env={**env, runstate.ENV_RUN: "mine01",
                                                  "FAULTLINE_STATE": str(tmp_path)})
    killed: list[int] = []
    ip = FakeIp(["flfrgn01-br", "flfrgn01-n1", "flmine01-n1", "some-other-ns"],
                ["lo", "flfrgn01h", "flmine01h"],
                {"flfrgn01-br": "frgn01", "flfrgn01-n1": "frgn01", "flfrgn01h": "frgn01",
                 "flmine01-n1": "mine01", "flmine01h": "mine01"})
    monkeypatch.setattr(runstate, "kill_and_wait", lambda pids, timeout=5.0: killed.extend(pids) or True)
    monkeypatch.setattr(runstate.netns, "run", ip)
    from faultline.cluster.docker import engine

    monkeypatch.setattr(engine, "running", lambda: False)
    try:
        deadline = time.monotonic() + 5  # until both children have exec'd with their markers
        while not {"frgn01", "mine01"} <= set(runstate.run_processes()):
            assert time.monotonic() < deadline, "the children's run markers never showed in /proc"
            time.sleep(0.01)
        assert runstate.cleanup_stale() == ["mine01"]
        assert mine.pid in killed and foreign.pid not in killed
        touched = ip.touched()
        assert "flmine01-n1" in touched and "flmine01h" in touched
        assert "frgn01" not in touched, touched
    finally:
        for proc in (foreign, mine):
            proc.kill()
            proc.wait()
