"""Admin requests asked in a child process, so that a client that aborts does not take
the run with it.

librdkafka asserts on some answers and aborts its whole process: seen here under broker
kills, ``rdkafka_admin.c:960: rd_kafka_admin_response_parse: Assertion `rko_result'
failed`` (librdkafka 2.16.0) in the run's own process, which ended the run and lost its
history's verdict. An :class:`AdminChild` holds the admin client in a spawned child; a
request whose child dies raises :class:`AdminDied`, which callers take as they take any
unanswered request (it is a ``KafkaException``), and the next request starts a new child.
Nothing is retried: the death is the request's answer, logged and, where the caller keeps
its errors (the observer's lines, a nemesis op), kept. The child's log records (librdkafka's
lines, at the level this process logs them) come back through a pipe of their own and
are logged here under their own logger's name, so they reach the run's ``faultline.log``.
"""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import multiprocessing
import os
import pickle
import signal
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, Self, TypeVar

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from faultline.cluster import kafka_client

P = ParamSpec("P")
T = TypeVar("T")

#: How often a child looks whether its parent is gone (then it exits).
PARENT_CHECK_S = 0.2
#: The child process's name (``multiprocessing.active_children()`` lists it).
CHILD_NAME = "faultline-admin"

_SPAWN = multiprocessing.get_context("spawn")
_log = logging.getLogger(__name__)


class AdminDied(KafkaException):
    """The child asking a request died before it answered."""


class AdminChild:
    """An admin client of ``bootstrap`` (sockets giving up after ``timeout_s``) in a child
    process started on first use. :meth:`call` runs ``fn(admin, *args)`` there, one
    request at a time, and returns its value or raises its exception (a
    ``KafkaException`` keeps its code and text). Safe across threads. The child exits
    once :meth:`close` is called or the process that started it is gone; after
    :meth:`close` no child starts again.
    """

    def __init__(self, bootstrap: str, timeout_s: float = 5.0) -> None:
        self._bootstrap = bootstrap
        self._timeout = timeout_s
        self._lock = threading.Lock()
        self._child: multiprocessing.process.BaseProcess | None = None
        self._conn: Connection | None = None
        self._relay: threading.Thread | None = None
        self._closed = False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def call(self, fn: Callable[Concatenate[AdminClient, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``fn(admin, *args, **kwargs)`` in the child; ``fn`` must be a module-level
        function (it is sent by name). AdminDied when the child dies first; KafkaException
        (``_TIMED_OUT``) when another request holds the child past :meth:`_busy_s`, and
        (``_DESTROY``) after :meth:`close`, which a request from a thread that outlived its
        owner's end gets instead of a child nobody would end. A request left unanswered
        (an exception, Ctrl-C, in this process) ends its child, so that no later request
        reads its answer."""
        if not self._lock.acquire(timeout=self._busy_s):
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "the admin client is busy with another "
                                                                   "request"))
        try:
            if self._closed:
                raise KafkaException(KafkaError(KafkaError._DESTROY, "the admin client was closed"))
            conn = self._started()
            try:
                conn.send((fn, args, kwargs))
                kind, value = conn.recv()
            except (EOFError, OSError):
                raise self._died(fn) from None
            except BaseException:
                self._end(kill=True)
                raise
        finally:
            self._lock.release()
        if kind == "ok":
            result: T = value
            return result
        if kind == "kafka":
            code, text = value
            raise KafkaException(KafkaError(code, text))
        raise value

    @property
    def _busy_s(self) -> float:
        """How long a request waits for the one before it: two of its timeouts and a margin."""
        return 2 * self._timeout + 5

    def close(self) -> None:
        """End the child (it is waited for) for good; idempotent. A request in flight past
        :meth:`_busy_s` has its child killed (it gets AdminDied)."""
        if not self._lock.acquire(timeout=self._busy_s):
            child = self._child
            if child is not None:
                child.kill()
            self._lock.acquire()
        try:
            self._closed = True
            self._end()
        finally:
            self._lock.release()

    def _started(self) -> Connection:
        if self._child is None or self._conn is None:
            mine, theirs = _SPAWN.Pipe()
            logs, their_logs = _SPAWN.Pipe(duplex=False)
            level = kafka_client.CLIENT_LOG.getEffectiveLevel()
            child = _SPAWN.Process(target=_serve, args=(theirs, their_logs, level, self._bootstrap,
                                                        self._timeout, os.getpid()),
                                   name=CHILD_NAME, daemon=True)
            child.start()
            theirs.close()
            their_logs.close()
            self._relay = threading.Thread(target=_relay, args=(logs,), name=f"{CHILD_NAME}-log", daemon=True)
            self._relay.start()
            self._child, self._conn = child, mine
        return self._conn

    def _died(self, fn: Callable[..., Any]) -> AdminDied:
        assert self._child is not None
        self._child.join(self._timeout)
        code = self._child.exitcode
        self._end()
        how = (f"killed by {signal.Signals(-code).name}" if code is not None and code < 0
               else f"exit status {code}")
        _log.warning("the admin client's process died (%s) asking %s; its last words are on stderr",
                     how, fn.__name__)
        return AdminDied(KafkaError(KafkaError._FAIL, f"the admin client's process died ({how})"))

    def _end(self, kill: bool = False) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._child is not None:
            if kill:
                self._child.kill()
            self._child.join(self._timeout + 5)
            if self._child.is_alive():
                self._child.kill()
                self._child.join()
        if self._relay is not None:
            self._relay.join()  # the child's end is closed: what it logged is logged first
        self._child = self._conn = self._relay = None


def _relay(logs: Connection) -> None:
    """Log each record the child sends on ``logs`` here, under its own logger's name, until
    the child's end is closed (a record cut short by its death ends it too)."""
    with logs:
        while True:
            try:
                record = logs.recv()
            except Exception:
                return
            logging.getLogger(record.name).handle(record)


class _Sender:
    """The queue a child's QueueHandler puts its records in: ``conn`` (the handler's own lock
    sends one record at a time)."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def put_nowait(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(OSError):
            self._conn.send(record)


def _serve(conn: Connection, logs: Connection, level: int, bootstrap: str, timeout_s: float,
           parent: int) -> None:
    """The child's main: answer each request on ``conn`` until it closes or ``parent`` is
    gone; log records of ``level`` and above go to ``logs``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the run's to handle
    root = logging.getLogger()
    root.addHandler(logging.handlers.QueueHandler(_Sender(logs)))  # type: ignore[arg-type]
    root.setLevel(level)
    threading.Thread(target=_exit_when_orphaned, args=(parent,), daemon=True).start()
    with contextlib.ExitStack() as stack:
        admin: AdminClient | None = None  # made by the first request, which gets its errors
        while True:
            try:
                fn, args, kwargs = conn.recv()
            except (EOFError, OSError):  # the parent closed its end, or is gone
                return
            except Exception as e:  # a request that cannot be read here: the caller's bug
                _send(conn, ("raise", RuntimeError(f"the admin child could not read a request: {e!r}")))
                continue
            try:
                if admin is None:
                    admin = stack.enter_context(kafka_client.new_admin(bootstrap, timeout_s))
                answer: tuple[str, Any] = ("ok", fn(admin, *args, **kwargs))
            except KafkaException as e:
                err = e.args[0] if e.args else None
                answer = (("kafka", (err.code(), err.str())) if isinstance(err, KafkaError)
                          else ("kafka", (KafkaError._FAIL, str(e))))
            except Exception as e:
                answer = ("raise", e if _picklable(e) else RuntimeError(f"{type(e).__name__}: {e}"))
            if admin is not None:
                admin.poll(0)  # an admin client's log lines are served by its poll alone
            if not _send(conn, answer):
                return


def _send(conn: Connection, answer: tuple[str, Any]) -> bool:
    """Send ``answer`` (pickled once), or, where it cannot be pickled, a RuntimeError
    saying so; False once the parent's end is closed."""
    try:
        data = pickle.dumps(answer)
    except Exception:
        data = pickle.dumps(("raise", RuntimeError(f"the admin child's answer could not be sent: "
                                                   f"{answer[1]!r:.200}")))
    try:
        conn.send_bytes(data)
    except OSError:
        return False
    return True


def _exit_when_orphaned(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_S)
    os._exit(0)


def _picklable(value: object) -> bool:
    """Whether ``value`` survives its way to the parent (pickled and read back)."""
    try:
        pickle.loads(pickle.dumps(value))
    except Exception:
        return False
    return True
