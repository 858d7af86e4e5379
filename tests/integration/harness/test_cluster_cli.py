"""``faultline cluster up|status|down`` and ``faultline doctor`` as a person runs them: the
installed command in a process of its own. ``up`` leaves a cluster that outlives the
command; ``down`` removes every trace of it; bad input is one line and exit code 2."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from faultline.cluster.local import netns, runstate

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
    up = _faultline("cluster", "up", "--nodes", "1", "--heap-mb", "320")
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


def test_down_and_status_of_an_unknown_run_are_one_line() -> None:
    assert "no local cluster run 'zz9nope'" in _one_error_line(_faultline("cluster", "down", "zz9nope"))
    assert "no local cluster run 'zz9nope'" in _one_error_line(_faultline("cluster", "status", "zz9nope"))
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
    assert done.stdout == "setup: everything is in place\n"
