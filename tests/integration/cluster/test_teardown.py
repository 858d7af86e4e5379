"""Nothing of a run outlives it: after ``stop``, after SIGTERM to the harness, and after a
harness killed with SIGKILL once a new run has started (it removes the leftovers)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from toxiproxy.toxic import Toxic

from faultline.cluster.host import netns, runstate
from faultline.cluster.host.runstate import RunState
from faultline.cluster.local.cluster import LocalCluster
from faultline.cluster.toxiproxy import ToxiproxyClient
from faultline.spec import KafkaSpec, TestSpec, TopicSpec
from tests.integration.nemeses.nemesis_helpers import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600), pytest.mark.usefixtures("local_backend")]

SPEC = TestSpec(name="it-teardown", kafka=KafkaSpec(heap_mb=320),
                topic=TopicSpec(name="it-teardown"))

#: A harness in a child process: starts a cluster, says so, then waits to be signalled.
HARNESS = textwrap.dedent("""
    import sys, time
    from faultline.cluster.local.cluster import LocalCluster
    from faultline.spec import KafkaSpec, TestSpec, TopicSpec
    spec = TestSpec(name="it-teardown", kafka=KafkaSpec(heap_mb=320), topic=TopicSpec(name="it-teardown"))
    with LocalCluster(spec) as cluster:
        print("READY", cluster.run_id, flush=True)
        time.sleep(600)
""")

#: The same, holding a fault of each kind that outlives its process: node 1 paused
#: (SIGSTOP), nodes 2 and 3 cut apart (iptables in their namespaces), a latency toxic on
#: node 3's client link (in the Toxiproxy server).
HOLDING = HARNESS.replace("print(", """cluster.create_topic()
    cluster.pause(1)
    cluster.partition({2: [3], 3: [2]})
    cluster.add_toxic(3, "latency", {"latency": 1000})
    print(""")
FAULTLINE = str(Path(sys.executable).parent / "faultline")


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


def _start_harness(script: str = HARNESS) -> tuple[subprocess.Popen[str], str, list[int]]:
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
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


def _proc_state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


def _chain(namespace: str) -> list[str]:
    """The harness's rules in a node's namespace."""
    out = subprocess.run(["ip", "netns", "exec", namespace, "iptables", "-S", netns.CHAIN],
                         capture_output=True, text=True, check=False).stdout
    return [ln for ln in out.splitlines() if not ln.startswith("-N")]


def _toxics(state: RunState, node: int) -> list[Toxic]:
    """The toxics on ``node``'s proxy in the run's Toxiproxy server."""
    client = ToxiproxyClient("127.0.0.1", state.toxiproxy_port,
                             netns=Path("/run/netns") / state.layout.bridge_namespace)
    try:
        return client.toxics(f"n{node}")
    finally:
        client.close()


def _down(run_id: str) -> None:
    """``faultline cluster down RUN_ID``: a crashed run's leftovers go, in one line."""
    done = subprocess.run([FAULTLINE, "cluster", "down", run_id], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert done.stdout.strip() == f"removed leftovers of crashed run {run_id}", done.stdout


def test_a_sigkilled_harness_holding_a_pause_a_grudge_and_a_toxic_is_cleaned_up() -> None:
    rules = _host_rules()
    proc, run_id, pids = _start_harness(HOLDING)
    state = RunState.load(run_id)
    proc.kill()
    proc.wait(10)
    node1 = state.nodes[1]
    assert node1 is not None and _proc_state(node1.pid) == "T", "node 1 is not left paused"
    assert _chain(state.layout.namespace(2)) and _chain(state.layout.namespace(3)), "no grudge left"
    toxics = _toxics(state, 3)
    assert [t.type for t in toxics] == ["latency"], toxics
    _down(run_id)
    assert _traces(run_id, pids) == []
    assert _host_rules() == rules


def _held(proc: subprocess.Popen[bytes]) -> tuple[RunState, list[int], set[str]] | None:
    """With the run ``proc`` stopped (SIGSTOP: none of its faults or heals can begin or
    end), its state, its paused brokers and the other faults it holds (``toxic``,
    ``partition``), read from the processes, the proxies and the rules themselves (its
    history's file lags behind them); None, and the run goes on, unless a broker is paused
    and another fault held."""
    os.kill(proc.pid, signal.SIGSTOP)
    assert runstate.wait_state(proc.pid, stopped=True), "the run did not stop"
    found = None
    try:
        states = [s for s in runstate.load_all().values()
                  if s is not None and s.owner is not None and s.owner.pid == proc.pid]
        for state in states:
            paused = [n for n, p in state.nodes.items() if p is not None and _proc_state(p.pid) == "T"]
            if not paused:  # nor, during start-up, are its proxies all made
                continue
            held = {"toxic"} if any(_toxics(state, n) for n in state.node_ids) else set()
            held |= {"partition"} if any(_chain(state.layout.namespace(n)) for n in state.node_ids) else set()
            if held:
                found = state, paused, held
        return found
    finally:
        if found is None:
            os.kill(proc.pid, signal.SIGCONT)


def test_a_sigkilled_faultline_run_holding_a_pause_is_cleaned_up(tmp_path: Path) -> None:
    """``faultline run`` with pauses, partitions and toxics, SIGKILLed while it holds a
    pause and another fault (seed 8: a toxic or a partition during a pause)."""
    rules = _host_rules()
    # a modest rate keeps the run light beside the polls
    args = ["--name", "it-sigkill", "--rate", "50", "--nemesis", "pause,partition,toxics", "--interval", "4",
            "--max-concurrent", "3", "--seed", "8", "--time-limit", "60", "--results", str(tmp_path)]
    proc = subprocess.Popen([FAULTLINE, "run", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen: list[tuple[RunState, list[int], set[str]]] = []

    def holding() -> bool:
        found = _held(proc)
        if found is not None:
            seen.append(found)
        return found is not None

    try:
        wait_until(holding, 240, "a pause and another fault held by the run")
    finally:
        proc.kill()  # stopped or not
        proc.wait(10)
    [(state, paused, held)] = seen
    run_id, pids = state.run_id, [p.pid for p in state.processes()]
    print(f"SIGKILLed run {run_id} holding {sorted(held)}; paused nodes {paused}")
    _down(run_id)
    assert _traces(run_id, pids) == []
    assert _host_rules() == rules


def test_a_faultline_run_after_a_sigkilled_harness_says_it_removed_its_leftovers(tmp_path: Path) -> None:
    """The next run removes a crashed run's leftovers and says so, as ``cluster down`` does."""
    proc, run_id, pids = _start_harness()
    proc.kill()
    proc.wait(10)
    args = ["--name", "it-after-crash", "--time-limit", "1", "--rate", "50", "--results", str(tmp_path)]
    done = subprocess.run([FAULTLINE, "run", *args], capture_output=True, text=True, timeout=240, check=False)
    said = f"removed leftovers of crashed run {run_id}"
    assert _traces(run_id, pids) == []
    assert said in done.stdout + done.stderr, (done.stdout, done.stderr)
    assert said in (tmp_path / "latest" / "faultline.log").read_text()


def _children(pid: int, marker: str) -> list[int]:
    """Pids of the children of ``pid`` whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == pid and marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def test_the_java_client_of_a_sigkilled_run_does_not_outlive_it(tmp_path: Path) -> None:
    """The Java client under test (a JVM of its own, the run's child, not the cluster's, so
    no cleanup finds it) ends with a run killed by SIGKILL, also while its sends cannot
    complete (every broker paused): else it goes on for its delivery timeout, sending to
    a cluster nobody journals (or, its proxy's port reused, to the next run's)."""
    spec = tmp_path / "spec.yaml"
    spec.write_text("producer: {delivery_timeout_ms: 120000}\n")
    proc = subprocess.Popen([FAULTLINE, "run", "-f", str(spec), "--name", "it-java-crash", "--client", "java",
                             "--rate", "50", "--time-limit", "120", "--results", str(tmp_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client: list[int] = []

    def started() -> bool:
        client[:] = _children(proc.pid, "FaultlineClient")
        return bool(client)

    try:
        wait_until(started, 120, "the run's Java client", every=0.2)
        (run_id,) = [rid for rid, s in runstate.load_all().items()
                     if s is not None and s.owner is not None and s.owner.pid == proc.pid]
        time.sleep(3)  # the client connected and sending
        for node in RunState.load(run_id).nodes.values():
            assert node is not None
            os.kill(node.pid, signal.SIGSTOP)  # the sends in flight cannot complete now
        time.sleep(1)
    finally:
        proc.kill()
        proc.wait(10)
    try:
        wait_until(lambda: _proc_state(client[0]) in (None, "Z"), 10, "the Java client's end")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(client[0], signal.SIGKILL)
        _down(run_id)
