"""Nothing of a run outlives it: after ``stop``, after SIGTERM to the harness, and after a
harness killed with SIGKILL once a new run has started (it removes the leftovers)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from faultline.harness import netns, runstate
from faultline.harness.local import LocalCluster
from faultline.harness.runstate import RunState
from faultline.spec import KafkaSpec, TestSpec, TopicSpec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600), pytest.mark.usefixtures("local_backend")]

SPEC = TestSpec(name="it-teardown", kafka=KafkaSpec(heap_mb=320),
                topic=TopicSpec(name="it-teardown"))

#: A harness in a child process: starts a cluster, says so, then waits to be signalled.
HARNESS = textwrap.dedent("""
    import sys, time
    from faultline.harness.local import LocalCluster
    from faultline.spec import KafkaSpec, TestSpec, TopicSpec
    spec = TestSpec(name="it-teardown", kafka=KafkaSpec(heap_mb=320), topic=TopicSpec(name="it-teardown"))
    with LocalCluster(spec) as cluster:
        print("READY", cluster.run_id, flush=True)
        time.sleep(600)
""")


def _host_rules() -> str:
    # read only: the host's rules must be exactly as they were
    return subprocess.run(["iptables", "-S"], capture_output=True, text=True, check=False).stdout


def _traces(run_id: str, pids: list[int]) -> list[str]:
    """Everything of ``run_id`` still on the machine, described."""
    left = [f"pid {p}" for p in pids if Path(f"/proc/{p}").exists()
            and Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]
    left += [f"process {p}" for p in runstate.run_processes().get(run_id, [])]
    left += [f"namespace {n}" for n in netns.list_namespaces() if netns.owner_run_id(n) == run_id]
    left += [f"link {n}" for n in netns.list_links() if netns.owner_run_id(n) == run_id]
    if (runstate.runs_dir() / run_id).exists():
        left.append(f"state dir {runstate.runs_dir() / run_id}")
    return left


def _start_harness() -> tuple[subprocess.Popen[str], str, list[int]]:
    proc = subprocess.Popen([sys.executable, "-c", HARNESS], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("READY"), f"harness never became ready: {line!r}"
    run_id = line.split()[1]
    state = RunState.load(run_id)
    pids = [p.pid for p in state.processes()]
    assert len(pids) == 4  # three JVMs and Toxiproxy
    assert _traces(run_id, pids), "the running cluster left no traces to look for"
    return proc, run_id, pids


def test_stop_leaves_nothing_behind() -> None:
    rules = _host_rules()
    cluster = LocalCluster(SPEC)
    cluster.start()
    run_id = cluster.run_id
    pids = [p.pid for p in cluster.state.processes()]
    cluster.stop()  # its duration is a benchmark figure: benchmarks/bench_cluster.py
    assert _traces(run_id, pids) == []
    assert _host_rules() == rules
    cluster.stop()  # idempotent


def test_sigterm_to_the_harness_still_tears_down() -> None:
    proc, run_id, pids = _start_harness()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 128 + signal.SIGTERM
    assert _traces(run_id, pids) == []


def test_after_a_sigkilled_harness_a_new_run_removes_its_leftovers() -> None:
    rules = _host_rules()
    proc, run_id, pids = _start_harness()
    proc.kill()
    proc.wait(10)
    assert _traces(run_id, pids), "a SIGKILLed harness left nothing: the test proves nothing"
    with LocalCluster(SPEC) as cluster:
        assert _traces(run_id, pids) == []
        new_id, new_pids = cluster.run_id, [p.pid for p in cluster.state.processes()]
    assert _traces(new_id, new_pids) == []
    assert _host_rules() == rules
