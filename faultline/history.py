"""Operations and the ``history.jsonl`` file (HISTORY.md, v1).

An :class:`Op` is data: ``invoke`` starts an operation, ``ok`` says it happened,
``fail`` that it certainly did not, ``info`` that nobody knows. The
:class:`HistoryWriter` journals ops as they happen, one flushed line each, so a run
that dies still leaves a readable prefix. :func:`read_history` streams a file back,
checking order and pairing, and names the line of the first breach.

This module is pure: it imports no Kafka client and no cluster code, so checkers,
reports and the Spark pipeline can use it anywhere.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

import orjson

from faultline.errors import HistoryError

OpType = Literal["invoke", "ok", "fail", "info"]
OP_TYPES: frozenset[str] = frozenset(("invoke", "ok", "fail", "info"))
NEMESIS = "nemesis"
Process = int | Literal["nemesis"]


@dataclass(frozen=True, slots=True)
class Op:
    """One line of a history; ``time`` is ns since the run started (monotonic)."""

    index: int
    time: int
    process: Process
    type: OpType
    f: str
    value: Any = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form; ``error`` is left out when None."""
        d: dict[str, Any] = {
            "index": self.index,
            "time": self.time,
            "process": self.process,
            "type": self.type,
            "f": self.f,
            "value": self.value,
        }
        if self.error is not None:
            d["error"] = self.error
        return d

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Op:
        """Build an Op from a parsed line; raises KeyError/TypeError on a bad shape."""
        return Op(d["index"], d["time"], d["process"], d["type"], d["f"], d.get("value"),
                  d.get("error"))


@dataclass(slots=True)
class HistoryWriter:
    """Appends ops to ``history.jsonl``; safe to call from many threads.

    Contract: ``append`` assigns a dense ``index`` and a non-decreasing ``time`` under
    one lock, and the line has been handed to the OS (``write`` + ``flush``) before
    it returns, so the op is on disk if this process is killed. It does not fsync:
    a journal that survives power loss is not what a test run needs.
    """

    path: Path
    _file: IO[bytes] = field(init=False, repr=False)
    _lock: threading.Lock = field(init=False, repr=False, default_factory=threading.Lock)
    _t0: int = field(init=False, repr=False, default=0)
    _next: int = field(init=False, repr=False, default=0)
    _last_time: int = field(init=False, repr=False, default=0)

    def __post_init__(self) -> None:
        self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115 - closed by close()
        self._t0 = time.monotonic_ns()

    def now(self) -> int:
        """Nanoseconds since this writer opened; the clock every op's ``time`` uses."""
        return time.monotonic_ns() - self._t0

    def append(self, process: Process, type: OpType, f: str, value: Any = None,
               error: str | None = None) -> Op:
        """Journal one op and return it as written."""
        with self._lock:
            t = max(self.now(), self._last_time)
            op = Op(self._next, t, process, type, f, value, error)
            self._file.write(orjson.dumps(op.to_dict()) + b"\n")
            self._next += 1
            self._last_time = t
            return op

    def close(self) -> None:
        """Close the file; later appends raise ValueError."""
        with self._lock:
            self._file.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(slots=True)
class ReadResult:
    """What :func:`read_history` learnt besides the ops themselves.

    ``truncated`` is True when the file's last line was cut mid-write (no newline and
    not valid JSON), the one damage a crashed run may leave; such a history can only
    give an ``unknown`` verdict.
    """

    lines: int = 0
    truncated: bool = False


def read_history(path: str | os.PathLike[str], result: ReadResult | None = None,
                 *, validate: bool = True) -> Iterator[Op]:
    """Stream the ops of a history file in order.

    Raises HistoryError naming the file and line on: invalid JSON (except a cut last
    line, which is dropped and noted in ``result.truncated``), a missing or mistyped
    field, an ``index`` that is not dense from 0, a ``time`` that goes backwards,
    and, when ``validate`` is on, a completion with no open invoke, a second
    invoke on a one-at-a-time process, or an op by a client process already retired
    by an ``info``.
    """
    result = result if result is not None else ReadResult()
    name = os.fspath(path)
    try:
        fh = open(name, "rb")  # noqa: SIM115 - closed in the finally below
    except OSError as e:
        raise HistoryError(name, None, f"cannot open: {e.strerror}") from None
    checker = _PairingChecker(name) if validate else None
    expected_index = 0
    last_time = 0
    try:
        pending: bytes | None = None
        lineno = 0
        for raw in fh:
            if pending is not None:
                op = _parse(name, lineno, pending, expected_index, last_time, checker)
                expected_index += 1
                last_time = op.time
                yield op
            lineno += 1
            pending = raw
        if pending is not None:
            if not pending.endswith(b"\n"):
                try:
                    orjson.loads(pending)
                except orjson.JSONDecodeError:
                    result.truncated = True
                    result.lines = lineno - 1
                    return
            yield _parse(name, lineno, pending, expected_index, last_time, checker)
        result.lines = lineno
    finally:
        fh.close()


def _parse(name: str, lineno: int, raw: bytes, expected_index: int, last_time: int,
           checker: _PairingChecker | None) -> Op:
    try:
        d = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise HistoryError(name, lineno, f"not valid JSON ({e})") from None
    if not isinstance(d, dict):
        raise HistoryError(name, lineno, "a line must be a JSON object")
    try:
        op = Op.from_dict(d)
    except KeyError as e:
        raise HistoryError(name, lineno, f"missing field {e}") from None
    if type(op.index) is not int or op.index != expected_index:
        raise HistoryError(name, lineno, f"index {op.index!r}, expected {expected_index}")
    if type(op.time) is not int or op.time < last_time:
        raise HistoryError(name, lineno, f"time {op.time!r} is before the previous {last_time}")
    if op.type not in OP_TYPES:
        raise HistoryError(name, lineno, f"type {op.type!r} is not invoke, ok, fail or info")
    if not isinstance(op.f, str):
        raise HistoryError(name, lineno, f"f {op.f!r} is not a string")
    if op.process != NEMESIS and type(op.process) is not int:
        raise HistoryError(name, lineno, f"process {op.process!r} is not an int or 'nemesis'")
    if checker is not None:
        checker.check(lineno, op)
    return op


class _PairingChecker:
    """Tracks open invokes per process to enforce HISTORY.md's pairing rules."""

    __slots__ = ("_name", "_open_other", "_open_sends", "_retired")

    def __init__(self, name: str) -> None:
        self._name = name
        self._open_sends: dict[tuple[int, Any], int] = {}
        self._open_other: dict[int, str] = {}
        self._retired: set[int] = set()

    def check(self, lineno: int, op: Op) -> None:
        p = op.process
        if p == NEMESIS:
            if op.type != "info":
                self._fail(lineno, "nemesis ops must have type info")
            return
        assert isinstance(p, int)
        if op.type == "invoke" and p in self._retired:
            self._fail(lineno, f"process {p} was retired by an earlier info and may not invoke again")
        if op.f == "send":
            key = (p, _send_value(op))
            if op.type == "invoke":
                if key in self._open_sends:
                    self._fail(lineno, f"process {p} invoked send of value {key[1]} twice")
                self._open_sends[key] = lineno
            else:
                if self._open_sends.pop(key, None) is None:
                    self._fail(lineno, f"send {op.type} of value {key[1]} by process {p} "
                                       "has no open invoke")
                if op.type == "info":
                    self._retired.add(p)
            return
        if op.type == "invoke":
            if p in self._open_other:
                self._fail(lineno, f"process {p} invoked {op.f} while its {self._open_other[p]} "
                                   "is still open")
            self._open_other[p] = op.f
        else:
            if self._open_other.get(p) != op.f:
                self._fail(lineno, f"{op.f} {op.type} by process {p} has no open invoke")
            del self._open_other[p]
            if op.type == "info":
                self._retired.add(p)

    def _fail(self, lineno: int, message: str) -> None:
        raise HistoryError(self._name, lineno, message)


def _send_value(op: Op) -> Any:
    v = op.value
    if not isinstance(v, dict) or "value" not in v:
        return None
    return v["value"]
