"""The Java client's crashable producers without a broker: a crash ends the killed
JVM's open sends ``info`` and drops the line its kill cut short, the replacement takes
a new process number from the counters every JVM shares, those counters hand out each
number once to the harness and the JVMs together, and no JVM outlives a killed harness."""

from __future__ import annotations

import io
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pytest

import faultline
from faultline.cluster import kafka_dist
from faultline.errors import FaultlineError
from faultline.history import HistoryWriter, read_history
from faultline.spec import TestSpec
from faultline.workloads import java_client
from faultline.workloads.java_client import JavaProgram, JavaQueueWorkload
from faultline.workloads.java_crashable import CrashableJavaQueueWorkload, SharedCounters
from faultline.workloads.java_group import CrashableJavaGroupWorkload
from faultline.workloads.outcomes import CRASH_ERROR

SPEC = TestSpec.from_mapping({"workload": {"client": "java", "producers": 1, "consumers": 1},
                              "nemesis": {"faults": ["clients"]}})
SEND = {"topic": "fl-queue", "partition": 0, "value": 7}

needs_javac = pytest.mark.skipif(
    shutil.which("javac") is None or not kafka_dist.kafka_cached(TestSpec().kafka.version),
    reason="needs javac and the Kafka distribution cached (faultline setup)")


def _line(op: dict[str, object]) -> bytes:
    return orjson.dumps({**op, "ns": time.monotonic_ns()})


def fake_jvms(monkeypatch: pytest.MonkeyPatch, w: JavaQueueWorkload, printed: bytes = b"",
              who: str = "role=producer index=0 first_process=0 ") -> None:
    """Each "JVM" of ``w`` a shell that prints what a JVM would and waits: the one whose
    arguments hold ``who`` (producer 0's first) ``printed`` (if any), every other a poll's
    invoke of its first process (as ``w`` starts once each printed an op), timed at ``w``'s
    making, before any other; a group member's exits on a byte on its stdin (a stop's ``l``)."""
    monkeypatch.setenv("PRINTED", printed.decode())
    monkeypatch.setenv("WHO", who)
    monkeypatch.setenv("CONSUMERS", str(w.spec.workload.producers))
    monkeypatch.setenv("NS", str(w._made_ns))
    script = """p=$CONSUMERS
for a; do case $a in first_process=*) p=${a#first_process=};; esac; done
case "${PRINTED:+printed} $* " in
  "printed "*"$WHO"*) printf "%s" "$PRINTED";;
  *) printf '{"process":%s,"type":"invoke","f":"poll","value":null,"ns":%s}\\n' "$p" "$NS";;
esac
case "$* " in *"role=consumer "*) exec head -c 1 >/dev/null;; esac
exec sleep 60"""
    monkeypatch.setattr(java_client, "ensure_java_client", lambda *_, **__: ["sh", "-c", script, "sh"])


def test_a_crash_ends_the_killed_jvms_open_sends_info_and_its_replacement_is_a_new_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each "JVM" here is a shell that prints what a producer JVM would (an invoke
    acknowledged, one left open, a completion cut short by the kill) and waits. Found
    in a run: the replacement was listed before it started, and the run, reading the
    workload as stopped, ended its main phase at the restart."""
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        w = CrashableJavaQueueWorkload(SPEC, "x:9092", history)
        printed = b"\n".join([
            _line({"process": 0, "type": "invoke", "f": "send", "value": SEND}),
            _line({"process": 0, "type": "invoke", "f": "send", "value": {**SEND, "value": 8}}),
            _line({"process": 0, "type": "done", "f": "send", "value": {**SEND, "offset": 0}}),
            _line({"process": 0, "type": "done", "f": "send", "value": {**SEND, "value": 8}})[:40]])
        fake_jvms(monkeypatch, w, printed)
        shell = java_client.ensure_java_client
        running: list[bool] = []  # whenever a JVM is about to start

        def command(*_: object, **__: object) -> list[str]:
            running.append(w.running)
            return shell()

        monkeypatch.setattr(java_client, "ensure_java_client", command)
        w.start()
        try:
            deadline = time.monotonic() + 30
            while w.stats().ok == 0:
                assert time.monotonic() < deadline, "the acknowledgement was never journaled"
                time.sleep(0.01)
            crash = w.crash_client(0)
            assert w.running  # a crashed producer is down, not failed
            restart = w.restart_client(0)
            again = w.restart_client(0)
        finally:
            w.stop(timeout=0.5)
    ops = [(o.process, o.type, o.value["value"], o.error) for o in read_history(tmp_path / "history.jsonl")
           if o.f == "send"]
    assert ops == [(0, "invoke", 7, None), (0, "invoke", 8, None), (0, "ok", 7, None),
                   (0, "info", 8, CRASH_ERROR)]
    assert (crash["processes"], crash["sends"]) == ([0], 1)
    assert restart == {"processes": [2]}  # producer 0, consumer 1 first
    assert again["processes"] == [] and "not crashed" in again["result"]
    assert running[-1], "the run saw the workload stopped while the replacement started"
    assert w.processes.take() == 3


@needs_javac
def test_the_counters_hand_out_each_process_number_once_to_the_harness_and_every_jvm(
        tmp_path: Path) -> None:
    """Without the fcntl lock on both sides, the JVMs and the harness took the same numbers."""
    counters = SharedCounters.create(10)
    command = java_client.ensure_java_client(TestSpec().kafka.version)
    cp = command[command.index("-cp") + 1]
    (tmp_path / "CountersProbe.java").write_text(
        "import java.nio.channels.FileChannel;\n"
        "import java.nio.file.Path;\n"
        "import java.nio.file.StandardOpenOption;\n"
        "public final class CountersProbe {\n"
        "    public static void main(String[] args) throws Exception {\n"
        "        FaultlineClient.shared = FileChannel.open(Path.of(args[0]), StandardOpenOption.READ,\n"
        "                StandardOpenOption.WRITE);\n"
        "        StringBuilder b = new StringBuilder();\n"
        "        for (int i = 0; i < 3000; i++) {\n"
        "            b.append(FaultlineClient.take(FaultlineClient.PROCESSES, 1)).append('\\n');\n"
        "        }\n"
        "        System.out.print(b);\n"
        "    }\n"
        "}\n")
    subprocess.run([shutil.which("javac") or "javac", "-nowarn", "-d", str(tmp_path), "-cp", cp,
                    str(tmp_path / "CountersProbe.java")], check=True, capture_output=True)
    probes = [subprocess.Popen([command[0], "-cp", f"{tmp_path}:{cp}", "CountersProbe",
                                str(counters.path)], stdout=subprocess.PIPE) for _ in range(2)]
    taken = []
    while any(probe.poll() is None for probe in probes):  # the harness takes meanwhile
        taken.append(counters.take_process())
    for probe in probes:
        out, _ = probe.communicate(60)
        assert probe.returncode == 0
        taken += map(int, out.split())
    assert len(taken) > 6000 and sorted(taken) == list(range(10, 10 + len(taken)))
    assert counters.take_process(0) == 10 + len(taken)
    counters.close()


_HARNESS = """
import sys, time
from pathlib import Path
from faultline.history import HistoryWriter
from faultline.spec import TestSpec
from faultline.workloads.java_client import JavaProgram, JavaQueueWorkload
from faultline.workloads.java_crashable import CrashableJavaQueueWorkload
spec = TestSpec.from_mapping({"workload": {"client": "java", "producers": 2},
                              "nemesis": {"faults": ["clients"]}})
w = CrashableJavaQueueWorkload(spec, "127.0.0.1:1", HistoryWriter(Path(sys.argv[1])))
w.start()
print(*[p.proc.pid for p in w._programs], flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its new parent does not)."""
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False


@needs_javac
def test_no_jvm_outlives_a_killed_harness(tmp_path: Path) -> None:
    """A harness SIGKILLed as its JVMs start (before their clients run) leaves none
    running: each halts once its parent, named by pid, is gone (or stops at the end of
    its stdin, once its clients have)."""
    java_client.ensure_java_client(TestSpec().kafka.version)  # compiled before the clock runs
    root = Path(faultline.__file__).parents[1]
    harness = subprocess.Popen([sys.executable, "-c", _HARNESS, str(tmp_path / "history.jsonl")],
                               stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(root)})
    assert harness.stdout is not None
    pids = [int(x) for x in harness.stdout.readline().split()]
    harness.send_signal(signal.SIGKILL)
    harness.wait()
    assert len(pids) == 3  # two producers, the consumers
    deadline = time.monotonic() + 30
    while any(map(_alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in pids if _alive(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == [], "a JVM outlived its harness"


def test_a_producer_jvm_hears_of_its_invokes_only_once_they_are_journaled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The consumers print in another JVM, journaled by another thread: a producer that
    sent before its invoke was journaled let a read of the value reach the history
    first. One ``+`` per send invoke, after the write that journaled it."""
    events: list[tuple[str, object]] = []
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        w = CrashableJavaQueueWorkload(SPEC, "x:9092", history)
        journal = HistoryWriter.append_at
        monkeypatch.setattr(HistoryWriter, "append_at", lambda self, ops: (
            events.append(("journaled", len(ops))), journal(self, ops)))
        monkeypatch.setattr(JavaProgram, "tell", lambda _, data: events.append(("told", data)))
        printed = b"".join(_line(op) + b"\n" for op in [
            {"process": 0, "type": "invoke", "f": "send", "value": SEND},
            {"process": 0, "type": "invoke", "f": "send", "value": {**SEND, "value": 8}},
            {"process": 0, "type": "done", "f": "send", "value": {**SEND, "offset": 0}}])
        w._journal(io.BufferedReader(io.BytesIO(printed)), w._slots["clients"][0])
        poll = _line({"process": 1, "type": "invoke", "f": "poll", "value": None}) + b"\n"
        w._journal(io.BufferedReader(io.BytesIO(poll)), w._consumers[0])  # which waits for nothing
    assert events == [("journaled", 3), ("told", b"++"), ("journaled", 1)]


@needs_javac
def test_a_producer_jvm_sends_nothing_more_until_the_run_says_its_invoke_is_journaled(
        tmp_path: Path) -> None:
    """Without a broker each send fails at once (delivery timeout 150 ms) and the next
    is invoked; but not before a ``+`` lets the first go."""
    counters = SharedCounters.create(2)
    settings = {"bootstrap": "127.0.0.1:1", "topic": "fl-queue", "partitions": 1, "producers": 1,
                "consumers": 1, "rate": 0, "acks": "all", "idempotence": "true", "retries": 5,
                "max_in_flight": 5, "delivery_timeout_ms": 150, "request_timeout_ms": 100,
                "linger_ms": 5, "isolation_level": "read_uncommitted", "role": "producer",
                "index": 0, "first_process": 0, "counters": counters.path}
    command = java_client.ensure_java_client(TestSpec().kafka.version)
    proc = subprocess.Popen([*command, *(f"{k}={v}" for k, v in settings.items())],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    lines: queue.Queue[dict[str, object]] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(orjson.loads(x)) for x in proc.stdout or ()],
                              daemon=True)
    reader.start()
    try:
        first = lines.get(timeout=60)
        assert (first["type"], first["f"], first["process"]) == ("invoke", "send", 0)
        with pytest.raises(queue.Empty):
            lines.get(timeout=2)  # seven sends' time, had the first not waited
        proc.stdin.write(b"+")
        proc.stdin.flush()
        assert lines.get(timeout=30)["type"] == "done"  # the first send, failed
        proc.stdin.write(b"s")
        proc.stdin.close()
        assert proc.wait(30) == 0
    finally:
        proc.kill()
        proc.wait()
        counters.close()


@needs_javac
def test_without_consumers_no_consumers_jvm_runs_and_the_workload_keeps_running(tmp_path: Path) -> None:
    """Found in review: a consumers JVM with no consumer exits at once, and the run read
    the workload as stopped."""
    spec = TestSpec.from_mapping({"workload": {"client": "java", "producers": 1, "consumers": 0},
                                  "nemesis": {"faults": ["clients"]}})
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        w = CrashableJavaQueueWorkload(spec, "127.0.0.1:1", history)
        w.start()
        try:
            deadline = time.monotonic() + 60
            while w.stats().invoked == 0:  # the producer's JVM runs its client
                assert time.monotonic() < deadline, "the producer never invoked a send"
                time.sleep(0.05)
            assert w.running and len(w._programs) == 1
        finally:
            w.stop(timeout=5)


def test_a_pause_stops_the_producers_jvm_until_its_resume_and_a_crash_kills_it_paused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each "JVM" is a shell that prints an op and waits; the nemesis addresses it as a child
    (:class:`faultline.nemeses.clients.ChildClients`)."""
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        w = CrashableJavaQueueWorkload(SPEC, "x:9092", history)
        fake_jvms(monkeypatch, w)
        w.start()
        try:
            producer = w.child("clients", 0)
            pid = producer.pause()["pid"]
            assert _state(pid) == "T"
            with pytest.raises(FaultlineError, match="paused already"):
                producer.pause()
            assert producer.resume() == {"pid": pid} and _state(pid) != "T"
            assert "not paused" in producer.resume()["result"]
            producer.pause()
            assert producer.crash()["pid"] == pid  # SIGKILL ends a stopped JVM too
            assert "not paused" in producer.resume()["result"]
            with pytest.raises(FaultlineError, match="consumers share one JVM"):
                w.child("consumers", 0)
            assert w.children("consumers") == 0
        finally:
            w.stop(timeout=0.5)


def test_a_pause_waits_while_a_jvm_holds_the_counters(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A JVM stopped holding the counters' lock would stop every other JVM's next take,
    and the harness's: the pause takes that lock first."""
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        w = CrashableJavaQueueWorkload(SPEC, "x:9092", history)
        fake_jvms(monkeypatch, w)
        w.start()
        try:
            assert w._counters is not None
            paused = threading.Event()
            with w._counters.held():
                t = threading.Thread(target=lambda: (w.pause_client(0), paused.set()))
                t.start()
                assert not paused.wait(0.5)
            assert paused.wait(10)
            w.resume_client(0)
        finally:
            w.stop(timeout=0.5)


GROUP = TestSpec.from_mapping({"workload": {"name": "group", "client": "java", "consumers": 2,
                                            "producers": 1},
                               "consumer": {"mode": "subscribe"}, "nemesis": {"faults": ["clients"]}})


def test_a_members_crash_ends_its_open_op_info_and_its_replacement_joins_in_its_slot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each "JVM" is a shell: member 1 prints a poll and a commit's invoke (its open op),
    the others a poll's invoke; members crash, pause and leave alone, each JVM its own."""
    commit = {"offsets": [["fl-queue", 0, 5, 0]]}
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        w = CrashableJavaGroupWorkload(GROUP, "x:9092", history)
        given = {"partitions": [["fl-queue", 0], ["fl-queue", 1]], "member": "m", "generation": 1}
        taken = {**given, "partitions": [["fl-queue", 0]]}
        printed = b"\n".join([
            *(_line({"process": 2, "type": t, "f": f, "value": v})
              for f, v in (("assign", given), ("revoke", taken)) for t in ("invoke", "ok")),
            _line({"process": 2, "type": "invoke", "f": "poll", "value": None}),
            _line({"process": 2, "type": "ok", "f": "poll", "value": {"records": []}}),
            _line({"process": 2, "type": "invoke", "f": "commit", "value": commit}), b""])
        fake_jvms(monkeypatch, w, printed, who="role=consumer index=1 first_process=2 ")
        w.start()
        try:
            member = w.child("consumers", 1)
            assert w.children("consumers") == 2
            deadline = time.monotonic() + 30
            while member.held() != 1 and time.monotonic() < deadline:  # two, less the revoked one
                time.sleep(0.01)
            assert member.held() == 1 and w.child("consumers", 0).held() == 0
            with pytest.raises(FaultlineError, match="producer 0 is no group member"):
                w.child("clients", 0).held()
            pid = member.pause()["pid"]
            assert _state(pid) == "T"
            assert member.resume() == {"pid": pid}
            crash = member.crash()
            assert member.held() is None  # crashed: no member runs
            restart = member.restart()
            replacement = w._slots["consumers"][1].proc
            assert replacement is not None
            stop = w.child("consumers", 0).stop()
            assert w.running  # a member that left is down, not failed
            with pytest.raises(FaultlineError, match="consumer 0 is not running"):
                w.child("consumers", 0).stop()
            with pytest.raises(FaultlineError, match="only a group member"):
                w.child("clients", 0).stop()
            start = w.child("consumers", 0).restart()
        finally:
            w.stop(timeout=0.5)
    ops = [(o.process, o.type, o.f, o.error) for o in read_history(tmp_path / "history.jsonl")
           if o.process == 2]
    assert ops[4:] == [(2, "invoke", "poll", None), (2, "ok", "poll", None), (2, "invoke", "commit", None),
                       (2, "info", "commit", CRASH_ERROR)]
    assert crash == {"processes": [2], "pid": pid}  # no "sends": a member's
    assert restart == {"processes": [3]}  # producer 0, members 1 and 2 first
    assert {"role=consumer", "index=1", "first_process=3"} <= set(replacement.args)  # type: ignore[arg-type]
    assert stop["processes"] == [1] and start == {"processes": [4]}


@needs_javac
def test_a_member_jvm_told_to_leave_exits_without_settling(tmp_path: Path) -> None:
    """A stop's ``l`` on a real member JVM's stdin: its member stops with no settling
    (:data:`~faultline.workloads.group.SETTLE_S`, 15 s), closes, and the JVM exits."""
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        w = CrashableJavaGroupWorkload(GROUP, "127.0.0.1:1", history)
        w.start()
        try:
            began = time.monotonic()
            stop = w.child("consumers", 0).stop()
            took = time.monotonic() - began
            assert w.running
        finally:
            w.stop(timeout=5)
    assert stop["processes"] == [1] and took < 10, took


_ORPHANS = """
import sys, threading, time
import pytest
from pathlib import Path
from faultline.history import HistoryWriter
from faultline.spec import TestSpec
from faultline.workloads.java_crashable import CrashableJavaQueueWorkload
from tests.unit.workloads.test_java_crashable import fake_jvms

spec = TestSpec.from_mapping({"workload": {"client": "java", "producers": 2, "consumers": 1},
                              "nemesis": {"faults": ["clients"]}})
w = CrashableJavaQueueWorkload(spec, "x:9092", HistoryWriter(Path(sys.argv[1])))
fake_jvms(pytest.MonkeyPatch(), w)
w.start()
w.pause_client(0)
nemesis = threading.Thread(target=lambda: (w.crash_client(1), w.restart_client(1)))
nemesis.start()
nemesis.join()  # the thread that asked for the restart is gone: its JVM is not
print(w._slots["clients"][0].proc.pid, w._slots["clients"][1].proc.pid, flush=True)
time.sleep(60)
"""


def test_every_jvm_dies_with_a_killed_run_the_paused_one_and_one_restarted_by_a_thread_since_gone(
        tmp_path: Path) -> None:
    """A run killed outright (SIGKILL) cleans nothing up: a paused JVM cannot notice, and
    one started from a nemesis thread must not die with that thread. Each "JVM" is a shell
    (:func:`fake_jvms`); both are gone once the run is."""
    run = subprocess.Popen([sys.executable, "-c", _ORPHANS, str(tmp_path / "history.jsonl")],
                           stdout=subprocess.PIPE, cwd=Path(faultline.__file__).parents[1])
    assert run.stdout is not None
    paused, restarted = map(int, run.stdout.readline().split())
    # alive and not stopped: sleeping, running, or in a disk wait (D) as it starts up
    assert _state(paused) == "T" and _state(restarted) not in ("", "T")
    run.kill()
    run.wait()
    deadline = time.monotonic() + 10
    while _state(paused) or _state(restarted):
        assert time.monotonic() < deadline, "a JVM outlived the killed run"
        time.sleep(0.05)


def _state(pid: int) -> str:
    """The kernel's state letter of ``pid`` (T: stopped), "" once it is gone or a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return ""
    return "" if state == "Z" else state
