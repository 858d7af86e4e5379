"""The docker backend's lifetime without an engine of its own: what the engine record keeps
across an engine that died, and what a run's teardown removes when the engine fails it."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from faultline.cluster.docker import engine
from faultline.cluster.docker.cluster import DockerCluster
from faultline.cluster.docker.engine import HostState
from faultline.cluster.host import runstate
from faultline.cluster.host.runstate import ProcId, RunState
from faultline.spec import TestSpec
from tests.processes import alive
from tests.unit.cluster.fakes import Labelled


@pytest.fixture(autouse=True)
def _state_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAULTLINE_STATE", str(tmp_path))


def test_an_engine_started_after_one_that_died_keeps_the_host_state_from_before_the_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by review: a dockerd faultline started that died without `setup --stop-engine`
    (a session's processes ended, a crash) leaves the host as it made it (FORWARD DROP, its
    chains, ip_forward=1). The next start recorded that as the host's state "before", so
    its stop "restored" the firewall to DROP: the host never got its own state back."""
    original = HostState({"iptables": "ACCEPT", "ip6tables": "ACCEPT"}, {"net/ipv4/ip_forward": "0"}, [])
    left = HostState({"iptables": "DROP", "ip6tables": "DROP"}, {"net/ipv4/ip_forward": "1"}, ["ip filter"])
    dead = subprocess.Popen(["true"])
    dead.wait()
    (tmp_path / "dockerd.json").write_text(json.dumps({"pid": {"pid": dead.pid, "start": 1},
                                                       "before": asdict(original)}))
    monkeypatch.setattr(HostState, "read", classmethod(lambda cls: left))
    monkeypatch.setattr(engine, "which", lambda command: f"/usr/sbin/{command}")
    answers = iter([False])  # no engine answers before the start; the new one does after
    monkeypatch.setattr(engine, "running", lambda: next(answers, True))
    real_popen = subprocess.Popen
    started: list[Any] = []

    def dockerd(cmd: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        started.append(real_popen(["sleep", "30"], **kw))  # stands in for dockerd
        return started[-1]

    monkeypatch.setattr(engine.subprocess, "Popen", dockerd)
    try:
        engine.start(log=tmp_path / "dockerd.log")
    finally:
        for proc in started:
            proc.kill()
            proc.wait()
    assert len(started) == 1
    assert engine.recorded_host_state() == original


class _GoneEngine:
    """The Docker SDK's client once the engine stopped answering (or a Ctrl-C lands in it)."""

    def __init__(self, error: BaseException) -> None:
        def fail(**kw: Any) -> list[Any]:
            raise error

        self.containers = SimpleNamespace(list=fail)
        self.networks = SimpleNamespace(list=fail)


@pytest.mark.parametrize("error", [ConnectionError("engine gone"), KeyboardInterrupt()],
                         ids=["engine-gone", "ctrl-c"])
def test_a_docker_teardown_the_engine_fails_still_removes_toxiproxy_and_the_runs_state(
        monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    """Found by review: DockerCluster.stop removed the containers before the local backend's
    teardown, outside it: an engine that failed the removal (or a Ctrl-C during it, which
    was not ignored there) skipped the rest, and the run's Toxiproxy went on running and its
    state stayed, until some later run found it stale."""
    monkeypatch.setattr(engine, "running", lambda: False)  # no engine for runstate.destroy either
    toxiproxy = subprocess.Popen(["sleep", "30"], env={**os.environ, runstate.ENV_RUN: "dkr9st"})
    try:
        cluster = DockerCluster(TestSpec())
        state = RunState(run_id="dkr9st", subnet="10.241.9.0/24", node_ids=[1, 2, 3], workdir="/w",
                         owns_workdir=False, spec={"name": "t"}, owner=ProcId.of(os.getpid()),
                         toxiproxy=ProcId.of(toxiproxy.pid))
        state.save()
        cluster._state = state
        cluster._docker = _GoneEngine(error)
        with pytest.raises(type(error)):
            cluster.stop()
        toxiproxy.poll()
        assert not alive(toxiproxy.pid), "the run's Toxiproxy outlived its teardown"
        assert not state.dir.exists(), "the run's state outlived its teardown"
        cluster.stop()  # idempotent: nothing left to do
    finally:
        toxiproxy.kill()
        toxiproxy.wait()


def test_a_docker_start_leaves_the_containers_of_another_state_roots_live_run(
        tmp_path: Path) -> None:
    """Found by review: the docker backend's start removed every labelled container and
    network of a run without live state in its own state root, so the live docker run of
    a process with another FAULTLINE_STATE lost its nodes. Its Toxiproxy, which carries
    that root, shows it lives; a crashed run's are still removed."""
    gone: list[str] = []
    things = {k: [Labelled(rid, gone, k) for rid in ("frgn02", "crash1")] for k in ("container", "network")}
    env = {**os.environ, runstate.ENV_RUN: "frgn02", "FAULTLINE_STATE": str(tmp_path / "other")}
    toxiproxy = subprocess.Popen(["sleep", "30"], env=env)
    try:
        deadline = time.monotonic() + 5  # until the child has exec'd with its marker
        while "frgn02" not in runstate.run_processes():
            assert time.monotonic() < deadline, "the child's run marker never showed in /proc"
            time.sleep(0.01)
        cluster = DockerCluster(TestSpec())
        cluster._docker = SimpleNamespace(
            containers=SimpleNamespace(list=lambda **kw: things["container"]),
            networks=SimpleNamespace(list=lambda **kw: things["network"]))
        cluster._cleanup_stale()
    finally:
        toxiproxy.kill()
        toxiproxy.wait()
    assert gone == ["container of crash1", "network of crash1"]


def test_stopping_after_the_engine_faultline_started_died_leaves_another_engines_firewall(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by review: once the dockerd faultline started had died, `setup --stop-engine`
    (which `make test` runs at its end, as the test session's docker_engine fixture does)
    "restored" the host under whatever engine answered then, a user's own: every DOCKER
    rule and chain deleted, FORWARD reset, docker0 deleted, its containers cut off."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    before = HostState({"iptables": "ACCEPT", "ip6tables": "ACCEPT"}, {}, [])
    (tmp_path / "dockerd.json").write_text(json.dumps({"pid": {"pid": dead.pid, "start": 1},
                                                       "before": asdict(before)}))
    restored: list[HostState] = []
    monkeypatch.setattr(engine, "restore", restored.append)
    monkeypatch.setattr(engine, "running", lambda: True)  # another engine answers
    stopped = engine.stop()
    assert restored == [], "the firewall of an engine faultline did not start was 'restored'"
    assert stopped is False and not engine.started_here()
    monkeypatch.setattr(engine, "running", lambda: False)  # none answers: the host is restored
    (tmp_path / "dockerd.json").write_text(json.dumps({"pid": {"pid": dead.pid, "start": 1},
                                                       "before": asdict(before)}))
    assert engine.stop() is True
    assert restored == [before]
