"""The Java client's printed lines as history ops: sends classified by the librdkafka
workload's rules, polls as printed, the exit line's next process number; its log lines
attributed to their process."""

from __future__ import annotations

import io
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from faultline.cluster import kafka_dist
from faultline.errors import FaultlineError
from faultline.history import HistoryWriter, read_history
from faultline.spec import TestSpec
from faultline.workloads import java_client
from faultline.workloads.clients import ClientLog, decode_value
from faultline.workloads.java_client import JavaQueueWorkload

SEND = {"topic": "fl-queue", "partition": 1, "value": 7}


class Trickle(io.RawIOBase):
    """A pipe that hands out at most 7 bytes per read, so lines arrive cut."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray) -> int:  # type: ignore[override]
        n = min(7, len(b), len(self.data))
        b[:n], self.data = self.data[:n], self.data[n:]
        return n


def printed_line(op: dict[str, Any]) -> bytes:
    """``op`` as the program prints it: a JSON line with ``ns``, the time.monotonic_ns() now."""
    return orjson.dumps({**op, "ns": time.monotonic_ns()}) + b"\n"


def test_printed_lines_become_classified_ops(tmp_path: Path) -> None:
    printed = [
        {"process": 0, "type": "invoke", "f": "send", "value": SEND},
        {"process": 0, "type": "done", "f": "send", "value": {**SEND, "offset": 3}},
        {"process": 0, "type": "invoke", "f": "send", "value": {**SEND, "value": 8}},
        {"process": 0, "type": "done", "f": "send", "value": {**SEND, "value": 8},
         "error": "REQUEST_TIMED_OUT"},
        {"process": 1, "type": "invoke", "f": "send", "value": {**SEND, "value": 9}},
        {"process": 1, "type": "refused", "f": "send", "value": {**SEND, "value": 9},
         "error": "_KafkaException"},
        {"process": 2, "type": "invoke", "f": "poll", "value": None},
        {"process": 2, "type": "ok", "f": "poll", "value": {"records": [["fl-queue", 1, 3, 7]]}},
        {"f": "exit", "next_process": 6},
    ]
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        w = JavaQueueWorkload(TestSpec(), "x:9092", history)
        data = b"".join(map(printed_line, printed))
        w._journal(io.BufferedReader(Trickle(data)), w._programs[0])
    ops = list(read_history(tmp_path / "history.jsonl"))
    assert [(o.process, o.type, o.f, o.error) for o in ops] == [
        (0, "invoke", "send", None), (0, "ok", "send", None),
        (0, "invoke", "send", None), (0, "info", "send", "REQUEST_TIMED_OUT"),
        (1, "invoke", "send", None), (1, "info", "send", "_KafkaException"),  # idempotent
        (2, "invoke", "poll", None), (2, "ok", "poll", None)]
    assert ops[1].value == {**SEND, "offset": 3} and ops[-1].value == printed[7]["value"]
    s = w.stats()
    assert (s.invoked, s.ok, s.info, s.fail, s.polls, s.polled_records) == (3, 1, 2, 0, 1, 1)
    assert w.processes.take() == 6


def test_an_op_is_journaled_at_the_time_it_was_printed_never_before_one_journaled_earlier(
        tmp_path: Path) -> None:
    """Found by review: each op was stamped when the journaling thread read its line, late by
    however long the line waited in the pipe (a busy interpreter, a starved thread), so its
    latency grew by that much and an acknowledgement printed before a fault was journaled
    after it, later. The program prints ``ns``, its System.nanoTime() (Linux's
    CLOCK_MONOTONIC, time.monotonic_ns()'s) when printing: the op's time. An op printed
    before a fault journaled ahead of it (the history's order is its journal's) shares that
    fault's time, as no history time may decrease."""
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        w = JavaQueueWorkload(TestSpec(), "x:9092", history)
        at = [time.monotonic_ns() for _ in range(3)]
        printed = [{"process": 0, "type": "invoke", "f": "send", "value": SEND, "ns": at[0]},
                   {"process": 0, "type": "done", "f": "send", "value": {**SEND, "offset": 3}, "ns": at[1]}]
        before_read = history.now()
        w._journal(io.BufferedReader(Trickle(b"".join(orjson.dumps(x) + b"\n" for x in printed))),
                   w._programs[0])
        later = {"process": 1, "type": "invoke", "f": "poll", "value": None, "ns": at[2]}
        kill = history.append("nemesis", "info", "kill", {"nodes": [1]})  # journaled before it is read
        w._journal(io.BufferedReader(Trickle(orjson.dumps(later) + b"\n")), w._programs[0])
    ops = list(read_history(tmp_path / "history.jsonl"))
    assert [(o.process, o.f) for o in ops] == [(0, "send"), (0, "send"), ("nemesis", "kill"), (1, "poll")]
    assert ops[0].time <= before_read
    assert ops[1].time - ops[0].time == at[1] - at[0]
    assert ops[3].time == kill.time


def test_killed_before_its_exit_line_the_next_numbers_are_past_the_highest_printed(
        tmp_path: Path) -> None:
    """Found by review: a program killed at its stop bound prints no exit line, and the
    drain took numbers the program had given its successors (the history then read as
    a retired process invoking again: no verdict)."""
    printed = [
        {"process": 0, "type": "invoke", "f": "send", "value": SEND},
        {"process": 0, "type": "done", "f": "send", "value": SEND, "error": "REQUEST_TIMED_OUT"},
        {"process": 3, "type": "invoke", "f": "send", "value": {**SEND, "value": 8}},
    ]  # TestSpec(): processes 0-2; 3 is process 0's successor
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        w = JavaQueueWorkload(TestSpec(), "x:9092", history)
        w._journal(io.BufferedReader(Trickle(b"".join(map(printed_line, printed)))), w._programs[0])
        w.stop()
    assert w.processes.take() == 4


def _client_log_lines(tmp_path: Path, stderr: bytes) -> list[dict[str, Any]]:
    """The client-log lines the Java client's ``stderr`` gives, on a clock saying 5."""
    log = ClientLog(tmp_path / "client-log.jsonl", lambda: 5)
    w = JavaQueueWorkload(TestSpec(), "x:9092", HistoryWriter(tmp_path / "h.jsonl"), client_log=log)
    w._log(io.BytesIO(stderr), w._programs[0])
    log.close()
    return [orjson.loads(x) for x in (tmp_path / "client-log.jsonl").read_bytes().splitlines()]


def test_log_lines_go_to_their_process(tmp_path: Path) -> None:
    [line] = _client_log_lines(tmp_path, b"INFO TransactionManager [Producer clientId=faultline-p12] "
                                         b"ProducerId set to 4 with epoch 1\nWARN NetworkClient no "
                                         b"client named here\n")
    assert (line["process"], line["level"], line["facility"], line["time"]) == (
        12, "info", "TransactionManager", 5)
    assert line["message"].endswith("ProducerId set to 4 with epoch 1")


def _journaled(tmp_path: Path, spec: TestSpec, printed: list[dict[str, object]]) -> list[tuple[object, ...]]:
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        w = JavaQueueWorkload(spec, "x:9092", history)
        w._journal(io.BufferedReader(Trickle(b"".join(map(printed_line, printed)))), w._programs[0])
    return [(o.process, o.type, o.f, o.error) for o in read_history(tmp_path / "history.jsonl")]


def test_an_idempotent_send_that_threw_may_have_been_appended(tmp_path: Path) -> None:
    """Found by review: KafkaProducer.doSend calls TransactionManager.maybeAddPartition
    after RecordAccumulator.append (kafka-clients 3.3 to 4.3), and it throws
    (maybeFailWithError) once an idempotent producer is in an error state: the record
    is then in a batch the sender may already have sent, yet send() threw. Journaled
    fail, a read of it was a false aborted-read; it is indeterminate."""
    printed = [
        {"process": 0, "type": "invoke", "f": "send", "value": SEND},
        {"process": 0, "type": "refused", "f": "send", "value": SEND, "error": "_KafkaException"},
    ]
    assert TestSpec().producer.enable_idempotence
    assert _journaled(tmp_path, TestSpec(), printed)[1] == (0, "info", "send", "_KafkaException")


def test_without_idempotence_a_send_that_threw_was_never_appended(tmp_path: Path) -> None:
    """No TransactionManager: every exception send() throws precedes the append."""
    spec = TestSpec.from_mapping({"producer": {"enable_idempotence": False}})
    printed = [
        {"process": 0, "type": "invoke", "f": "send", "value": SEND},
        {"process": 0, "type": "refused", "f": "send", "value": SEND, "error": "_KafkaException"},
    ]
    assert _journaled(tmp_path, spec, printed)[1] == (0, "fail", "send", "_KafkaException")


def test_a_send_completes_once_however_often_the_client_says_so(tmp_path: Path) -> None:
    """Found by review: a send() that threw after the append also completes through its
    batch (the sender aborts it: Sender.runOnce -> maybeAbortBatches), and an
    ApiException thrown there (ProducerFencedException) is handed to the callback at
    once and again when the batch completes. Both completions were journaled: the
    checker refused the history (a completion with no open invoke), no verdict."""
    printed = [
        {"process": 0, "type": "invoke", "f": "send", "value": SEND},
        {"process": 0, "type": "refused", "f": "send", "value": SEND, "error": "_KafkaException"},
        {"process": 0, "type": "done", "f": "send", "value": {**SEND, "offset": 4}},
        {"process": 1, "type": "invoke", "f": "send", "value": {**SEND, "value": 8}},
        {"process": 1, "type": "done", "f": "send", "value": {**SEND, "value": 8},
         "error": "PRODUCER_FENCED"},
        {"process": 1, "type": "done", "f": "send", "value": {**SEND, "value": 8},
         "error": "PRODUCER_FENCED"},
    ]
    assert _journaled(tmp_path, TestSpec(), printed) == [
        (0, "invoke", "send", None), (0, "info", "send", "_KafkaException"),
        (1, "invoke", "send", None), (1, "info", "send", "PRODUCER_FENCED")]


#: Record values another producer may have written: what the Java consumers must journal
#: exactly as decode_value does (the drain, in Python, reads the same offsets).
FOREIGN_VALUES = [b"0", b"42", b"007", b"-1", b"", b"abc", b'say "hi"\\', b"\x01\n", None,
                  b"999999999999999999", b"9223372036854775807", b"9223372036854775808",
                  "\u0663".encode(), "\uff11\uff12".encode(), "caf\u00e9 \U0001f600".encode(),
                  b"\xff1", b"\xe2\x82", b"\xe2\x82A", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80",
                  b"\xf0\x9f\x98", b"\x80\xbf"]


needs_javac = pytest.mark.skipif(
    shutil.which("javac") is None or not kafka_dist.kafka_cached(TestSpec().kafka.version),
    reason="needs javac and the Kafka distribution cached (faultline setup)")


@pytest.fixture(scope="module")
def java_classes(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """(java, class path) of the Java client and a probe of its decode, compiled here."""
    out = tmp_path_factory.mktemp("java")
    dist = kafka_dist.ensure_kafka(TestSpec().kafka.version)
    sources = [out / name for name in java_client._sources()]
    for src, text in zip(sources, java_client._sources().values(), strict=True):
        src.write_bytes(text)
    (out / "DecodeProbe.java").write_text(
        "public final class DecodeProbe {\n"
        "    public static void main(String[] args) {\n"
        "        for (String hex : args) System.out.println(FaultlineClient.decode(\n"
        "                hex.equals(\"-\") ? null : java.util.HexFormat.of().parseHex(hex)));\n"
        "    }\n"
        "}\n")
    cp = f"{out}:{dist.classpath}"
    subprocess.run([shutil.which("javac") or "javac", "-nowarn", "-d", str(out), "-cp", cp,
                    *map(str, sources), str(out / "DecodeProbe.java")],
                   check=True, capture_output=True)
    return str(dist.java), cp


@needs_javac
def test_the_java_client_decodes_a_value_as_the_python_clients_do(java_classes: tuple[str, str]) -> None:
    """Found by review: the Java client's decode took any Unicode digit for a decimal
    (a record of "\u0663" was printed as bare JSON: the journaling thread died on it and
    every later op was lost), read bytes that are not UTF-8 as U+FFFD instead of the
    contract's ``\\xNN``, and kept a 19-digit decimal as text. A poll of the Java client
    and the drain (Python) then disagreed about one record: a false phantom read or
    inconsistent offsets."""
    java, cp = java_classes
    out = subprocess.run([java, "-cp", cp, "DecodeProbe",
                          *("-" if raw is None else raw.hex() for raw in FOREIGN_VALUES)],
                         check=True, capture_output=True).stdout
    printed = out.decode("utf-8").splitlines()
    assert len(printed) == len(FOREIGN_VALUES)
    wrong = []
    for raw, line in zip(FOREIGN_VALUES, printed, strict=True):
        try:
            journaled = orjson.loads(f"[{line}]")
        except orjson.JSONDecodeError:
            journaled = f"not JSON: {line}"
        if journaled != [decode_value(raw)]:
            wrong.append((raw, line))
    assert wrong == []


def _without_a_broker(java: str, cp: str, consumers: int) -> subprocess.Popen[bytes]:
    """The Java client, one producer and ``consumers`` consumers, started against a port
    nothing listens on (each send fails at its delivery timeout, 150 ms)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = {"bootstrap": f"127.0.0.1:{port}", "topic": "fl-queue", "partitions": 1,
                "producers": 1, "consumers": consumers, "rate": 0, "first_free_process": 1 + consumers,
                "acks": "all", "idempotence": "true", "retries": 5, "max_in_flight": 5,
                "delivery_timeout_ms": 150, "request_timeout_ms": 100, "linger_ms": 5,
                "isolation_level": "read_uncommitted"}
    return subprocess.Popen([java, "-cp", cp, "FaultlineClient", *(f"{k}={v}" for k, v in settings.items())],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


@needs_javac
def test_the_java_clients_times_are_the_historys_clock(java_classes: tuple[str, str]) -> None:
    """What the journal holds the program to: its lines' ``ns`` (System.nanoTime()) are
    time.monotonic_ns() readings, between its start and each line's read, in order."""
    started = time.monotonic_ns()
    proc = _without_a_broker(*java_classes, consumers=1)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        times = []
        for _ in range(30):
            times.append(orjson.loads(proc.stdout.readline())["ns"])
            assert started <= times[-1] <= time.monotonic_ns()
        proc.stdin.close()
        proc.stdout.read()
        assert proc.wait(30) == 0
    finally:
        proc.kill()
        proc.wait()
    assert times == sorted(times)


@needs_javac
def test_the_java_client_closes_a_retired_producer(java_classes: tuple[str, str]) -> None:
    """Found by review: every retired producer instance was kept open until the end (the
    librdkafka workload drops one once its sends complete), each with its network thread,
    connections and buffers: a run whose faults retire producers often grew the 256 MB
    JVM without bound. Here each send fails (no broker listens) and retires its instance."""
    proc = _without_a_broker(*java_classes, consumers=0)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        failed = 0
        while failed < 12:
            d = orjson.loads(proc.stdout.readline())
            failed += d["type"] == "done" and "error" in d
        network = [t for t in Path(f"/proc/{proc.pid}/task").iterdir()
                   if (t / "comm").read_text().startswith("kafka-producer")]
        proc.stdin.close()
        proc.stdout.read()
        assert proc.wait(30) == 0
    finally:
        proc.kill()
        proc.wait()
    assert len(network) <= 3  # the live instance's, and those still closing


def test_a_consumers_log_line_names_the_consumer(tmp_path: Path) -> None:
    """Found by review: a line of a Java consumer (``faultline-c4``) was written to the
    client log as the instance ``faultline-p4``, a producer that never existed."""
    [line] = _client_log_lines(tmp_path, b"WARN NetworkClient [Consumer clientId=faultline-c4, "
                                         b"groupId=null] Connection to node 2 could not be established\n")
    assert (line["process"], line["client"], line["level"]) == (4, "faultline-c4", "warning")


def _journal_through_the_thread(w: JavaQueueWorkload, printed: bytes) -> None:
    """What the journaling thread does with ``printed`` as the program's stdout."""
    w._guard(w._journal, io.BufferedReader(Trickle(printed)), w._programs[0])


def test_a_line_that_is_no_op_goes_to_the_client_log_and_the_journal_goes_on(tmp_path: Path) -> None:
    """Found by review: a line on the program's stdout that was not JSON (a library's
    println) ended the journal thread: the ops after it (and before it in the same read)
    never reached the history, and the run ended in a traceback."""
    log = ClientLog(tmp_path / "client-log.jsonl", lambda: 5)
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        w = JavaQueueWorkload(TestSpec(), "x:9092", history, client_log=log)
        lines = [printed_line({"process": 0, "type": "invoke", "f": "send", "value": SEND}),
                 b"WARN SomeLibrary [Producer clientId=faultline-p0] not JSON at all\n",
                 b"SLF4J: No SLF4J providers were found.\n",
                 printed_line({"process": 0, "type": "done", "f": "send", "value": {**SEND, "offset": 3}})]
        _journal_through_the_thread(w, b"".join(lines))
        w.stop()
    log.close()
    ops = read_history(tmp_path / "history.jsonl")
    assert [(o.process, o.type, o.f) for o in ops] == [(0, "invoke", "send"), (0, "ok", "send")]
    [logged] = [orjson.loads(x) for x in (tmp_path / "client-log.jsonl").read_bytes().splitlines()]
    assert (logged["process"], logged["level"], logged["message"]) == (
        0, "warning", "[Producer clientId=faultline-p0] not JSON at all")


@pytest.mark.parametrize("cut", [
    b'{"process":0,"type":"done","f":"send","value":{"topic":"fl-queue","partition":1,"val\n',
    b'WARN x{"process":0,"type":"done","f":"send","value":{"topic":"fl-queue","partition":1,"value":7}}\n',
    b'{"process":0,"type":"done","f":"send"}\n',
    b'{"process":0,"type":"done","f":"send","value":{"topic":"fl-queue","partition":1,"value":7,"off',
    b'{"process":0,"type":"done","f":"send","value":{"topic":"fl-queue","partition":1,"value":7},"ns":5}\n',
], ids=["cut-line", "garbled", "no-value", "cut-at-exit", "another-clock"])
def test_an_op_line_that_cannot_be_read_leaves_the_run_without_a_verdict(tmp_path: Path, cut: bytes) -> None:
    """An op line the harness cannot read may be an acknowledgement: dropped, the
    acknowledged write would be missing from the history, and its loss could never be
    reported. The journal goes on, and stop() ends the run with an error (before the
    drain, so no check of the history can be valid). Was: a traceback, or for a line
    cut at exit (no newline), nothing at all. A time not of the history's clock (before
    the workload began) would misplace the op: not read either."""
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        w = JavaQueueWorkload(TestSpec(), "x:9092", history)
        invoke = printed_line({"process": 0, "type": "invoke", "f": "send", "value": SEND})
        later = printed_line({"process": 1, "type": "invoke", "f": "poll", "value": None})
        _journal_through_the_thread(w, invoke + cut + (later if cut.endswith(b"\n") else b""))
        with pytest.raises(FaultlineError, match=r"1 op line.* could not be read.*no verdict"):
            w.stop()
    ops = read_history(tmp_path / "history.jsonl")
    assert [(o.process, o.f) for o in ops] == [(0, "send")] + ([(1, "poll")] if cut.endswith(b"\n") else [])


def test_start_returns_once_each_client_of_the_jvm_printed_an_op_and_says_so_when_it_exits_first(
        tmp_path: Path) -> None:
    """The run's time limit counts from clients issuing ops: start waits until every
    client of the JVM printed one (a log line is none); a program that exits first is
    one line naming it."""
    spec = TestSpec.from_mapping({"workload": {"producers": 2, "consumers": 1}})
    invoke = {"type": "invoke", "f": "send", "value": SEND}
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        w = JavaQueueWorkload(spec, "x:9092", history)
        program = w._programs[0]
        program.proc = subprocess.Popen(["sleep", "30"])
        try:
            w._journal(io.BufferedReader(Trickle(b"INFO a log line, no op\n" + printed_line(
                {"process": 0, **invoke}) + printed_line({"process": 2, **invoke}))), program)
            with pytest.raises(FaultlineError, match="exited with code -9 before each of its clients"):
                threading.Timer(0.3, program.proc.kill).start()
                w._await_ready([program])
            program.proc = subprocess.Popen(["sleep", "30"])
            w._journal(io.BufferedReader(Trickle(printed_line({"process": 1, **invoke}))), program)
            w._await_ready([program])
            assert program.proc.poll() is None
        finally:
            program.proc.kill()
            program.proc.wait()
