"""The queue workload with the Java client under test (``workload.client: java``):
``org.apache.kafka:kafka-clients`` of the broker's own version, driven by a small JVM
program (``java/FaultlineClient.java``, compiled by :func:`ensure_java_client` against
the broker distribution's jar, once per source), writing the same history ops as the
librdkafka clients of :mod:`.queue`.

Protocol: the program takes the spec's settings as ``key=value`` arguments, runs the
producers and consumers of :mod:`.queue` (``role``: all of them, the default; one
producer; or the consumers, for :mod:`.java_crashable`; ``workload=txn``: transactional
producers, for :mod:`.java_txn`; ``workload=group``: its consumers are :mod:`.java_group`'s
members) and prints every op as one JSON
line on stdout, each with ``ns``: its ``System.nanoTime()`` when printed, the history's
clock.
Ops are journaled in the order printed, at their ``ns``; a line whose ``ns`` is of
another clock is not read. A send's completion (``done`` with the Kafka error name, or
``refused``: ``send()`` threw) is classified by the librdkafka workload's rules
(:func:`~faultline.workloads.outcomes.classify_delivery`, :func:`classify_refused`) and
journaled once. End of stdin stops the clients; the program completes outstanding
sends and prints ``{"f": "exit", "next_process": n}``, the drain's first process number.
A producer JVM of :mod:`.java_crashable` sends a record (or a transaction's) only once the
run has journaled its invoke: the run writes a ``+`` to its stdin per send or transaction
invoke journaled, and an ``s`` stops it. The program halts at once when the run (its
``parent``) is gone; a JVM stopped then (a paused client, SIGSTOP) cannot, so the kernel
kills each with the thread that started it (:data:`DIE_WITH_US`), one thread that lives
as long as the workload.
Its stderr, and stdout lines that are no op, go to the client log; an op line that
cannot be read makes :meth:`JavaQueueWorkload.stop` end the run with an error, before
the drain. Why: docs/design.md, "The queue workload".
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import IO, Any

import orjson

from faultline.cluster import kafka_dist
from faultline.errors import FaultlineError, SetupError
from faultline.history import HistoryWriter, Process, TimedOp
from faultline.spec import TestSpec
from faultline.workloads.clients import FIRST_OP_TIMEOUT_S, ClientLog, ProcessIds, WorkloadStats, rdkafka_log
from faultline.workloads.outcomes import Classification, classify_delivery, classify_produce_call

MAIN_CLASS = "FaultlineClient"
#: Log lines of the Java client worth keeping: warnings, and the idempotence state.
_LOG4J = """\
status = error
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %p %c{1} %m%n
rootLogger.level = warn
rootLogger.appenderRef.err.ref = err
logger.txn.name = org.apache.kafka.clients.producer.internals.TransactionManager
logger.txn.level = info
"""

_log = logging.getLogger(__name__)
#: What each op line the program prints holds (``FaultlineClient.op``), and its exit line.
_OP_MARK, _EXIT_MARK = b'{"process":', b'{"f":"exit"'


def classify_refused(error: str, idempotent: bool) -> Classification:
    """Classify a Java ``send()`` that threw (``error``: the printed name): ``fail``
    without idempotence, where every exception ``KafkaProducer.doSend`` throws precedes
    the append to a batch; ``info`` with it, where ``TransactionManager.maybeAddPartition``
    may throw after the append (kafka-clients 3.3 to 4.3), the record in a batch the
    sender may already have sent."""
    if not idempotent:
        return classify_produce_call(error)
    return Classification("info", error, "send() threw, possibly after the record was appended "
                          "to a batch (TransactionManager.maybeAddPartition follows "
                          "RecordAccumulator.append in KafkaProducer.doSend)")


def _sources() -> dict[str, bytes]:
    """The Java client's source files (``java/*.java``), by name, in name order."""
    files = (resources.files("faultline.workloads") / "java").iterdir()
    return {f.name: f.read_bytes() for f in sorted(files, key=lambda f: f.name) if f.name.endswith(".java")}


def _quiet(_: str) -> None:
    return None


def ensure_java_client(version: str, home: str | None = None, report: kafka_dist.Report = _quiet,
                       *, options: Sequence[str] = ()) -> list[str]:
    """The JVM command (java, ``options`` and its own, class path, main class) that runs
    the Java client against Kafka ``version``'s kafka-clients, compiling it on first use;
    SetupError naming the fix when javac is missing or the build fails."""
    dist = kafka_dist.ensure_kafka(version, home, report)
    sources = _sources()
    digest = hashlib.sha1(b"".join(name.encode() + b"\0" + text for name, text in sources.items()))
    out = kafka_dist.cache_dir() / f"java-client-{dist.version}-{digest.hexdigest()[:12]}"
    if not (out / f"{MAIN_CLASS}.class").exists():
        javac = shutil.which("javac", path=str(dist.java.parent)) or shutil.which("javac")
        if not javac:
            raise SetupError("javac not found; install a JDK 17+: apt-get install -y openjdk-17-jdk-headless")
        report(f"compiling the Java client against kafka-clients {dist.version} into {out}")
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=out.parent, prefix=".javac-") as tmp:
            srcs = [Path(tmp) / name for name in sources]
            for src, text in zip(srcs, sources.values(), strict=True):
                src.write_bytes(text)
            (Path(tmp) / "log4j2.properties").write_text(_LOG4J)
            done = subprocess.run([javac, "-nowarn", "-d", tmp, "-cp", dist.classpath, *map(str, srcs)],
                                  capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise SetupError(f"javac failed on the Java client: {done.stderr.strip()[-500:]}")
            for src in srcs:
                src.unlink()
            Path(tmp).rename(out)
    return [str(dist.java), *options, f"-Dlog4j2.configurationFile={out / 'log4j2.properties'}", "-Xmx256m",
            "-cp", f"{out}:{dist.classpath}", MAIN_CLASS]


class JavaProgram:
    """One JVM of the Java client, and what the workload keeps of what it printed: its
    counts, the sends it left open (value -> ``(process, value)``; a send completes once),
    the transactions and member ops it left open, and the processes it printed, in order (``first``
    first). ``clients``: the first processes of the clients it runs, each of which prints
    an op once running (:attr:`ready`). ``acks``: a producer JVM of a crash test, which
    waits for a ``+`` on stdin after each send or transaction invoke (the module
    docstring)."""

    def __init__(self, clients: Iterable[Process], first: int | None = None, *, acks: bool = False) -> None:
        self.acks = acks
        self.proc: subprocess.Popen[bytes] | None = None
        self.threads: list[threading.Thread] = []
        self.stats = WorkloadStats()  # written by its journaling thread, then by its crash
        self.open: dict[Any, tuple[int, Any]] = {}
        self.processes: list[int] = [] if first is None else [first]
        #: process -> (its open transaction's value, the invoke's history time)
        self.txns: dict[Process, tuple[Any, int]] = {}
        #: a group member's process -> its open op's ``f`` and invoke value (kept by
        #: :mod:`.java_group`'s crashable workload, for a crash)
        self.member_ops: dict[Process, tuple[str, Any]] = {}
        #: the partitions its group member holds (kept likewise, :func:`.group.held_after`)
        self.held: frozenset[tuple[str, int]] = frozenset()
        #: transactions its slot's producers committed, its own and its predecessors' (kept
        #: by :mod:`.java_txn`'s workload)
        self.commits = 0
        self.killed = False  # by a crash: a line its kill cut short is dropped
        self.paused = False  # by a pause, until its resume or a crash
        self.left = False  # told to leave (a stop): it exits of itself
        #: the first processes of the clients it runs that have printed no op yet; ``ready``
        #: once none is left
        self.waiting = set(clients)
        self.ready = threading.Event()

    def tell(self, data: bytes) -> None:
        """Write ``data`` to the program's stdin, if it is still open."""
        if self.proc is not None and self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(OSError, ValueError):  # it exited, or stdin was closed
                os.write(self.proc.stdin.fileno(), data)

    def close_stdin(self) -> None:
        """End the program's stdin (it stops, if it has not yet)."""
        if self.proc is not None and self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()


#: The JVM's command's prefix: util-linux's setpriv (Debian's essential set) asks the kernel
#: to SIGKILL the process it execs when the thread that started it ends (prctl
#: PR_SET_PDEATHSIG, kept across the exec), which reaches a stopped process too.
DIE_WITH_US = ("setpriv", "--pdeathsig", "KILL", "--")


class JavaQueueWorkload:
    """The queue workload's clients in one JVM (see the module docstring); the
    :class:`~faultline.workloads.Workload` contract of :class:`.queue.QueueWorkload`."""

    #: JVM options of each program, beside :func:`ensure_java_client`'s.
    jvm_options: tuple[str, ...] = ()

    def __init__(self, spec: TestSpec, bootstrap: str, history: HistoryWriter, *,
                 client_log: ClientLog | None = None) -> None:
        w = spec.workload
        self.spec = spec
        self.bootstrap = bootstrap
        self.history = history
        self.client_log = client_log
        # the numbers the program leaves free: from its exit line's, and past any it printed
        self._first_free = w.producers + w.consumers
        self._top = -1
        self.processes = self._free()
        self._made_ns = time.monotonic_ns()  # no line the program prints is older
        self._programs: list[JavaProgram] = [JavaProgram(range(w.producers + w.consumers))]
        self._errors: list[BaseException] = []
        #: Op lines that could not be read (see the module docstring), as printed.
        self._unreadable: list[bytes] = []
        #: The one thread that starts every JVM (:data:`DIE_WITH_US`), ended by :meth:`stop`.
        self._starter = ThreadPoolExecutor(1, thread_name_prefix="faultline-java-start")

    def _args(self) -> list[str]:
        s, p, w = self.spec, self.spec.producer, self.spec.workload
        settings = {
            "bootstrap": self.bootstrap, "topic": s.topic.name, "partitions": s.topic.partitions,
            "producers": w.producers, "consumers": w.consumers, "rate": w.rate / max(1, w.producers),
            "first_free_process": w.producers + w.consumers, "acks": p.acks,
            "idempotence": str(p.enable_idempotence).lower(), "retries": p.retries,
            "max_in_flight": p.max_in_flight, "delivery_timeout_ms": p.delivery_timeout_ms,
            "request_timeout_ms": p.request_timeout_ms, "linger_ms": p.linger_ms,
            "isolation_level": s.consumer.isolation_level, "parent": os.getpid(),
        }
        return [f"{k}={v}" for k, v in settings.items()]

    def start(self) -> None:
        """Build (if need be) and start the JVM, and the threads that journal its output;
        returns once each of its clients has printed an op (:meth:`_await_ready`)."""
        self._start(self._programs[0], self._args())
        self._await_ready(self._programs)

    def _await_ready(self, programs: Sequence[JavaProgram]) -> None:
        """Wait until each of ``programs`` is ready (every client it runs has printed an
        op), so that a run's time limit counts from clients that are issuing ops, not from
        JVMs starting (seconds on a loaded machine). Raises what failed the journaling
        first (:meth:`_raise_failures`); FaultlineError for a program that exits before it
        is ready or is not within :data:`FIRST_OP_TIMEOUT_S`."""
        deadline = time.monotonic() + FIRST_OP_TIMEOUT_S
        for program in programs:
            assert program.proc is not None  # started
            while not program.ready.wait(0.1):
                self._raise_failures()
                if (code := program.proc.poll()) is not None:
                    for t in program.threads:  # what it printed is journaled once its stdout ends
                        t.join(5.0)
                    if program.ready.is_set():
                        break
                    raise FaultlineError(f"the Java client's JVM (pid {program.proc.pid}) exited with "
                                         f"code {code} before each of its clients printed an op "
                                         "(its stderr: the run's logs)")
                if time.monotonic() > deadline:
                    raise FaultlineError(f"the Java client's JVM (pid {program.proc.pid}) had clients "
                                         f"that printed no op within {FIRST_OP_TIMEOUT_S:.0f} s "
                                         "(its stderr: the run's logs)")

    def _start(self, program: JavaProgram, args: list[str]) -> None:
        """Start ``program``'s JVM with ``args`` and the threads that journal its output."""
        command = ensure_java_client(self.spec.kafka.version, self.spec.kafka.home,
                                     options=self.jvm_options)
        program.proc = self._starter.submit(
            subprocess.Popen, [*DIE_WITH_US, *command, *args], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE).result()
        assert program.proc.stdout is not None and program.proc.stderr is not None
        for name, target, stream in (("ops", self._journal, program.proc.stdout),
                                     ("log", self._log, program.proc.stderr)):
            t = threading.Thread(target=self._guard, args=(target, stream, program),
                                 name=f"faultline-java-{name}-{program.proc.pid}", daemon=True)
            t.start()
            program.threads.append(t)

    def _guard(self, target: Any, stream: IO[bytes], program: JavaProgram) -> None:
        try:
            target(stream, program)
        except BaseException as e:  # a harness bug must not vanish with its thread
            _log.exception("%s crashed", threading.current_thread().name)
            self._errors.append(e)

    def _journal(self, stream: IO[bytes], program: JavaProgram) -> None:
        """Journal ``program``'s ops, a read's worth of complete lines per write, then
        tell it how many send invokes that write journaled (if it waits for them); a last
        line without its newline (the program died printing it) is read as one too,
        unless a crash killed it (the kill cut it: an invoke never sent, or a completion
        whose send stays open)."""
        tail = b""
        while chunk := stream.read1(1 << 16):  # type: ignore[attr-defined]
            read_ns = time.monotonic_ns()
            *lines, tail = (tail + chunk).split(b"\n")
            ops = [op for raw in lines if (op := self._line(raw, read_ns, program))]
            self.history.append_at(ops)
            if ops and not program.ready.is_set():
                program.waiting.difference_update(process for _, (process, *_) in ops)
                if not program.waiting:
                    program.ready.set()
            if program.acks:
                program.tell(b"+" * sum(1 for _, (_, typ, f, _, _) in ops
                                        if typ == "invoke" and f in ("send", "txn")))
        if tail and not program.killed and (op := self._line(tail, time.monotonic_ns(), program)):
            self.history.append_at([op])

    def _line(self, raw: bytes, read_ns: int, program: JavaProgram) -> TimedOp | None:
        """The op of one line of ``program``'s stdout, read at ``read_ns``, if it is one to
        journal; a line that is no op goes to the client log, an op line that cannot be
        read is kept for :meth:`stop`."""
        if _OP_MARK not in raw and _EXIT_MARK not in raw:  # no generator: a line per op
            if raw.strip():
                self._log_line(raw)
            return None
        try:
            return self._op(orjson.loads(raw), read_ns, program)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            _log.error("an op line of the Java client could not be read (%s): %r", e, raw)
            self._unreadable.append(raw)
            return None

    def _op(self, d: dict[str, Any], read_ns: int, program: JavaProgram) -> TimedOp | None:
        """The history op of one line ``program`` printed, read at ``read_ns``, with its
        time (None for the exit line), counted; ValueError for a time not of the
        history's clock."""
        s = program.stats
        f: str = d["f"]
        typ: Any = d.get("type")
        ns = d["ns"]
        if ns.__class__ is not int or not self._made_ns <= ns <= read_ns:
            raise ValueError(f"its ns {ns!r} is not between the workload's making and the line's "
                             "read on time.monotonic_ns(): the program's clock is another")
        if f == "exit":
            self._first_free = max(self._first_free, int(d["next_process"]))
            self.processes = self._free()
            return None
        process: int = d["process"]
        if process > self._top:
            self._top = process
        if process not in program.processes:
            program.processes.append(process)
        value: Any = d.get("value")
        error: str | None = d.get("error")
        if f == "send" and typ == "invoke":
            s.invoked += 1
            program.open[value["value"]] = (process, value)
        elif f == "send":
            if program.open.pop(value["value"], None) is None:
                _log.warning("the Java client completed send %s of process %s again (%s %s); "
                             "the first completion stands", value["value"], process, typ, error)
                return None
            c = (classify_refused(error or "", self.spec.producer.enable_idempotence)
                 if typ == "refused" else classify_delivery(error))
            typ, error = c.type, c.error
            s.ended(typ)
        elif f == "poll" and typ != "invoke":
            s.polls += 1
            s.polled_records += len((value or {}).get("records") or ())
        return ns, (process, typ, f, value, error)

    def _free(self) -> ProcessIds:
        """Process numbers no program used (the drain's): from the exit lines', or, if a
        program was killed before printing one, past the highest printed."""
        return ProcessIds(max(self._first_free, self._top + 1))

    def _log(self, stream: IO[bytes], _: JavaProgram) -> None:
        """The client's log lines (stderr) into the client log, or the faultline log."""
        for raw in stream:
            self._log_line(raw)

    def _log_line(self, raw: bytes) -> None:
        """One log line (``LEVEL Class message``, else at info) into the client log when
        it names its client, else into the faultline log."""
        text = raw.decode("utf-8", "backslashreplace").rstrip()
        level_name, _, rest = text.partition(" ")
        level = logging.getLevelName(level_name)
        level = level if isinstance(level, int) else logging.INFO
        facility, _, message = rest.partition(" ")
        client = _client_of(message)
        if self.client_log is not None and client is not None:
            self.client_log.write(client[1], client[0], level, facility, message)
        else:
            rdkafka_log.log(level, "java client: %s", text)

    def request_stop(self) -> None:
        """Tell every program to stop: its clients stop issuing ops (a producer JVM of a
        crash test by an ``s``, so that it still hears of its invokes; any other by the
        end of its stdin)."""
        for program in self._programs:
            if program.acks:
                program.tell(b"s")
            else:
                program.close_stdin()

    def stop(self, timeout: float | None = None) -> None:
        """Stop, wait for every program to complete its sends and exit (bounded as the
        librdkafka workload's stop), killing it past the bound, and for every line it
        printed to be journaled; then :attr:`processes` hands out numbers none used.
        Re-raises a journaling thread's exception; FaultlineError when an op line could
        not be read (the history may lack an acknowledgement: the run has no verdict)."""
        self.request_stop()
        p = self.spec.producer
        bound = (p.delivery_timeout_ms + p.request_timeout_ms) / 1000 + 15.0
        if timeout is not None:
            bound = min(bound, timeout)
        deadline = time.monotonic() + bound
        for program in self._programs:
            if program.proc is not None:
                try:
                    program.proc.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    _log.warning("the Java client did not stop within %.0f s; killed", bound)
                    program.proc.kill()
                    program.proc.wait()
            for t in program.threads:
                t.join()  # the program has exited: its streams end
            program.close_stdin()
        self._starter.shutdown()
        self.processes = self._free()
        self._raise_failures()

    def _raise_failures(self) -> None:
        """Re-raise a journaling thread's exception; FaultlineError for an op line that
        could not be read."""
        if self._errors:
            raise self._errors[0]
        if self._unreadable:
            raise FaultlineError(
                f"{len(self._unreadable)} op line(s) of the Java client could not be read (first: "
                f"{self._unreadable[0][:200]!r}): the history may lack an acknowledged send, so "
                "the run ends here, with no verdict")

    @property
    def running(self) -> bool:
        """True while every program runs that no crash killed and no stop told to leave."""
        return all(p.proc is not None and p.proc.poll() is None for p in self._programs
                   if not (p.killed or p.left))

    def stats(self) -> WorkloadStats:
        """Totals so far, of every program (exact once :meth:`stop` has returned)."""
        total = WorkloadStats()
        for program in self._programs:
            for field in dataclasses.fields(total):
                setattr(total, field.name, getattr(total, field.name) + getattr(program.stats, field.name))
        return total


#: A Java client's id in its log lines: ``clientId=faultline-p3``, the digits its process.
_CLIENT_ID = re.compile(r"clientId=(faultline-.(\d+))")


def _client_of(message: str) -> tuple[str, int] | None:
    """The client id and process in a Java client log line's ``[Producer
    clientId=faultline-p3]`` (``faultline-c3`` for a consumer)."""
    found = _CLIENT_ID.search(message)
    return (found[1], int(found[2])) if found else None

