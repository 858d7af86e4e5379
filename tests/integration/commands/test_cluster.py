"""``faultline cluster up|status|down``, the steps of a session by hand, and ``faultline
doctor`` as a person runs them: the installed command in a process of its own. ``up``
leaves a cluster (and its session) that outlives the command; each step is journaled
into the session's history; ``down`` ends the session as a checked run and removes every
trace of the cluster, as does the next ``down`` when the session died; bad input is one
line and exit code 2."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from faultline.cluster.host import netns, runstate
from faultline.cluster.waiting import wait_until
from faultline.history import history_lines
from faultline.run import session
from tests.schemas import validate_run_dir
from tests.verdicts import assert_kafka_held

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600), pytest.mark.usefixtures("local_backend")]

FAULTLINE = str(Path(sys.executable).parent / "faultline")


def _faultline(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FAULTLINE, *args], capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, **(env or {})})


def _one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("faultline: error: "), done.stderr
    return lines[0]


def _traces(run_id: str) -> list[str]:
    left = [f"process {p}" for p in runstate.run_processes().get(run_id, [])]
    left += [f"namespace {n}" for n in netns.list_namespaces() if netns.owner_run_id(n) == run_id]
    left += [f"link {n}" for n in netns.list_links() if netns.owner_run_id(n) == run_id]
    return left


def test_up_status_down() -> None:
    up = _faultline("cluster", "up", "--no-session", "--nodes", "1", "--heap-mb", "320")
    assert up.returncode == 0, up.stdout + up.stderr
    m = re.search(r"stop it with: faultline cluster down (\w+)", up.stdout)
    assert m, up.stdout
    run_id = m[1]
    try:
        # the command has exited; its cluster runs on, detached
        assert f"cluster {run_id} (Kafka " in up.stdout and "detached" in up.stdout
        status = _faultline("cluster", "status", run_id)
        assert status.returncode == 0, status.stderr
        assert re.search(r"node 1: up +pid \d+", status.stdout), status.stdout
        assert "active controller: 1" in status.stdout
        assert [f"fl-queue[{p}]: leader 1 isr [1]" in status.stdout for p in range(3)] == [True] * 3
        assert _traces(run_id), "a detached cluster with no process or namespace"
    finally:
        down = _faultline("cluster", "down", run_id)
    assert down.returncode == 0, down.stderr
    assert f"cluster {run_id} is down" in down.stdout
    assert _traces(run_id) == []
    assert f"no local cluster run '{run_id}'" in _one_error_line(_faultline("cluster", "status", run_id))


def test_a_session_by_hand_journals_each_step_with_its_targets_and_ends_as_a_checked_run(
        tmp_path: Path) -> None:
    up = _faultline("cluster", "up", "--heap-mb", "384", "--rate", "50", "--results", str(tmp_path))
    assert up.returncode == 0, up.stdout + up.stderr
    m = re.search(r"end it with: faultline cluster down (\w+)", up.stdout)
    assert m and "run by a session" in up.stdout, up.stdout
    run_id = m[1]
    run_dir = Path(re.findall(r"session: (\S+)", up.stdout)[0])
    try:
        crash = _faultline("cluster", "crash", "leader of fl-queue/0")
        assert crash.returncode == 0, crash.stderr
        m = re.fullmatch(r"crash leader of fl-queue/0 \(leader of 0 = node (\d)\) -> kill \1: "
                         r"killed node \1\n", crash.stdout)
        assert m, crash.stdout
        leader = int(m[1])
        restart = _faultline("cluster", "restart", str(leader), "--unclean")
        assert restart.stdout == f"restart {leader} unclean -> start {leader}: started\n", restart.stderr
        isolate = _faultline("cluster", "isolate", "2")
        assert isolate.returncode == 0 and isolate.stdout.startswith("isolate 2 -> partition"), isolate.stderr
        assert _faultline("cluster", "heal").returncode == 0
        hold = _faultline("cluster", "hold", "3")
        assert hold.returncode == 0 and hold.stdout.startswith("hold 3 -> partition"), hold.stderr
        assert _faultline("cluster", "release", "3").returncode == 0
        assert f"  session: {run_dir.resolve()} (end it with: faultline cluster down {run_id})\n" in \
            _faultline("cluster", "status").stdout
        assert "the topic has partitions 0 to 2, not 7" in _one_error_line(
            _faultline("cluster", "crash", "leader", "of", "7"))
    finally:
        down = _faultline("cluster", "down", run_id)
    results = orjson.loads((run_dir / "results.json").read_bytes())
    assert_kafka_held(results)
    verdict, code = ("valid", 0) if results["valid"] else ("INVALID", 1)
    assert down.returncode == code and f"verdict: {verdict}\n" in down.stdout, down.stdout + down.stderr
    assert down.stdout.endswith(f"cluster {run_id} is down\n"), down.stdout
    assert _traces(run_id) == []
    assert {"test.json", "history.jsonl.zst", "results.json"} <= set(validate_run_dir(run_dir))
    ops = [orjson.loads(line) for line in history_lines(run_dir / "history.jsonl.zst")]
    steps = [(op["f"], op["value"]["step"], op["value"].get("targets")) for op in ops
             if op["process"] == "nemesis" and "result" in op["value"]]
    assert steps == [("kill", "crash leader of 0", [leader]),
                     ("start", f"restart {leader} unclean", [leader]),
                     ("partition", "isolate 2", [2]), ("heal", "heal", None),
                     ("partition", "hold 3", [3]), ("heal", "release 3", [3])]
    check = _faultline("check", str(run_dir))
    assert check.returncode == down.returncode, check.stdout + check.stderr


def test_a_session_that_died_leaves_nothing_the_next_down_does_not_remove(tmp_path: Path) -> None:
    up = _faultline("cluster", "up", "--nodes", "1", "--heap-mb", "320", "--results", str(tmp_path))
    assert up.returncode == 0, up.stdout + up.stderr
    m = re.search(r"end it with: faultline cluster down (\w+)", up.stdout)
    assert m, up.stdout
    run_id = m[1]
    owner = runstate.RunState.load(run_id).owner
    assert owner is not None
    os.kill(owner.pid, signal.SIGKILL)
    assert wait_until(lambda: not owner.alive(), time.monotonic() + 10), "SIGKILL did not end the session"
    assert _traces(run_id), "the cluster outlives its session until the next down"
    down = _faultline("cluster", "down")
    assert f"removed leftovers of crashed run {run_id}" in down.stdout, down.stdout + down.stderr
    assert _traces(run_id) == [] and not session.socket_path(run_id).exists()
    assert "no hand-driven session runs" in _one_error_line(_faultline("cluster", "heal"))


def test_down_and_status_of_an_unknown_run_are_one_line() -> None:
    assert "no local cluster run 'zz9nop'" in _one_error_line(_faultline("cluster", "down", "zz9nop"))
    assert "no local cluster run 'zz9nop'" in _one_error_line(_faultline("cluster", "status", "zz9nop"))
    assert "'../zz9nop' is not a run id" in _one_error_line(_faultline("cluster", "status", "../zz9nop"))
    assert "No such option '--nodes'" in _one_error_line(_faultline("cluster", "down", "--nodes", "3"))
    assert "Invalid value for '--nodes'" in _one_error_line(_faultline("cluster", "up", "--nodes", "9"))


def test_doctor_passes_here_and_names_the_fix_of_what_is_missing(tmp_path: Path) -> None:
    ok = _faultline("doctor")
    assert ok.returncode == 0, ok.stdout
    names = [line.split()[1] for line in ok.stdout.splitlines()]
    assert {"root", "java", "kafka", "toxiproxy", "iptables"} <= set(names), ok.stdout
    assert all(line.startswith("ok ") for line in ok.stdout.splitlines()), ok.stdout
    # an empty cache: Kafka's jars and Toxiproxy are missing, each with its fix
    broken = _faultline("doctor", env={"FAULTLINE_CACHE": str(tmp_path)})
    assert broken.returncode == 1, broken.stdout
    missing = {line.split()[1]: line for line in broken.stdout.splitlines() if line.startswith("MISSING")}
    assert set(missing) == {"kafka", "toxiproxy"}, broken.stdout
    assert missing["toxiproxy"].endswith("-> faultline setup")
    assert "not cached" in missing["kafka"]


def test_setup_on_a_machine_already_set_up_does_nothing() -> None:
    done = _faultline("setup")
    assert done.returncode == 0, done.stderr
    installed, compiled = done.stdout.splitlines()  # the checker's code, cached: loaded
    assert installed == "setup: everything is in place"
    assert compiled.startswith("setup: the checker's compiled code is ready (")
