"""The hand-driven session's protocol without Kafka: a step sent by the command's side is
run by the session's HandPackage (over the in-memory fake cluster) and answered with the
line the command prints; a failure is one error line; no session, several, or one that
does not answer are one line each. The whole session on real Kafka is
tests/integration/commands/test_cluster.py's."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from faultline.errors import ClusterError, NemesisError
from faultline.history import HistoryWriter, Op
from faultline.nemeses.scripted import HandPackage
from faultline.run import session
from faultline.spec import TestSpec
from tests.unit.nemeses.test_package import FakeCluster
from tests.unit.nemeses.test_scripted import Live


@pytest.fixture
def state(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("FAULTLINE_STATE", str(tmp_path / "state"))
    return tmp_path / "state"


def _listen(run_id: str) -> socket.socket:
    path = session.socket_path(run_id)
    path.parent.mkdir(parents=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()
    return server


@pytest.fixture
def serving(state: Path, tmp_path: Path) -> Iterator[FakeCluster]:
    """A session of run ``abc123`` whose nemesis acts on a fake cluster."""
    cluster = FakeCluster(TestSpec(), tmp_path)
    nemesis = HandPackage(cluster, Live())  # type: ignore[arg-type]
    history = HistoryWriter(tmp_path / "history.jsonl")
    s = session._Session()
    s._nemesis = nemesis
    server = _listen("abc123")

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=s._handle, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    runner = threading.Thread(target=nemesis.run, args=(time.monotonic() + 60, history))
    runner.start()
    yield cluster
    nemesis.heal_all(history)
    runner.join()
    server.close()
    history.close()


def test_a_step_is_run_by_the_session_and_answered_with_what_it_did(serving: FakeCluster) -> None:
    said: list[str] = []
    assert session.request({"step": "crash leader of 0"}, None, said.append) == 0
    assert said == ["crash leader of 0 (leader of 0 = node 1) -> kill 1: killed node 1"]
    assert serving.calls == [("kill", 1)]
    with pytest.raises(NemesisError, match=r"^'crash leader of 7': the topic has partitions 0 to 2, not 7$"):
        session.request({"step": "crash leader of 7"}, "abc123", said.append)
    assert serving.calls == [("kill", 1)]


def test_no_session_several_or_a_silent_one_is_one_line(state: Path) -> None:
    with pytest.raises(ClusterError, match="no hand-driven session runs; start one with faultline cluster"):
        session.request({"step": "heal"}, None, print)
    _listen("aaa111").close()  # a socket nobody listens on any more
    with pytest.raises(ClusterError, match=r"no session answers for cluster 'aaa111' \(Connection refused\)"):
        session.request({"step": "heal"}, None, print)
    _listen("bbb222").close()
    with pytest.raises(ClusterError, match=r"several sessions run \(aaa111, bbb222\); name one with --run"):
        session.request({"step": "heal"}, None, print)


def test_describe_says_whom_a_role_resolved_to_and_what_each_action_did() -> None:
    def op(f: str, **value: object) -> Op:
        return Op(0, 0, "nemesis", "info", f, value)

    restart = [op("kill", role="node 3", targets=[3], nodes=[3], result="killed node 3"),
               op("start", role="node 3", targets=[3], nodes=[3], result="started")]
    assert session.describe("restart 3 unclean", restart) == \
        "restart 3 unclean -> kill 3: killed node 3; start 3: started"
    pause = [op("pause", role="followers of 0", targets=[2, 3], nodes=[2, 3], result="paused")]
    assert session.describe("pause followers of 0", pause) == \
        "pause followers of 0 (followers of 0 = nodes 2,3) -> pause 2,3: paused"
    wait = [op("wait", result="met after 1.0 s", seen="0: leader 2 isr {2}")]
    assert session.describe("wait until isr of 0 is {leader}", wait) == \
        "wait until isr of 0 is {leader} -> wait: met after 1.0 s (0: leader 2 isr {2})"
