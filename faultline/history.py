"""Operations and the ``history.jsonl`` file (docs/history.md, v1).

An :class:`Op` is data: ``invoke`` starts an operation, ``ok`` says it happened,
``fail`` that it certainly did not, ``info`` that nobody knows. The
:class:`HistoryWriter` journals ops as they happen, one flushed line each, so a run
that dies still leaves a readable prefix. :func:`read_history` streams a file back,
checking order and pairing, and names the line of the first breach;
:func:`iter_rows` is the same reader yielding the parsed dicts, for checkers that
stream millions of lines (building an :class:`Op` per line would double their cost).

This module is pure: it imports no Kafka client and no cluster code, so checkers,
reports and the Spark pipeline can use it anywhere.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

import orjson

from faultline.errors import HistoryError

OpType = Literal["invoke", "ok", "fail", "info"]
OP_TYPES: frozenset[str] = frozenset(("invoke", "ok", "fail", "info"))
NEMESIS = "nemesis"
Process = int | Literal["nemesis"]
#: An op not yet journaled: ``(process, type, f, value, error)``.
PendingOp = tuple[Process, OpType, str, Any, str | None]


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

    def __post_init__(self) -> None:
        self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115 - closed by close()
        self._t0 = time.monotonic_ns()

    def now(self) -> int:
        """Nanoseconds since this writer opened; the clock every op's ``time`` uses."""
        return time.monotonic_ns() - self._t0

    def append(self, process: Process, type: OpType, f: str, value: Any = None,
               error: str | None = None) -> Op:
        """Journal one op and return it as written."""
        with self._lock:  # the monotonic clock read under the lock keeps time ordered
            op = Op(self._next, self.now(), process, type, f, value, error)
            self._write(_lines(op.index, op.time, ((process, type, f, value, error),)))
            self._next += 1
            return op

    def append_many(self, ops: Sequence[PendingOp]) -> None:
        """Journal several ops, ``(process, type, f, value, error)`` each, with one write.

        Same contract as :meth:`append` for every op (dense indexes, one shared
        ``time``, consecutive lines), and all of them are handed to the OS before it
        returns. It exists for throughput: a pipelined producer journals a batch of
        invokes before producing them, and the completions one ``poll()`` served.
        """
        if not ops:
            return
        with self._lock:
            t, first = self.now(), self._next
            self._write(_lines(first, t, ops))
            self._next = first + len(ops)

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:  # a raw file may write less than asked
            view = view[self._file.write(view) or 0:]

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
    by an ``info``. Built on :func:`iter_rows`, which checks the same things.
    """
    yield from map(Op.from_dict, iter_rows(path, result, validate=validate))


def iter_rows(path: str | os.PathLike[str], result: ReadResult | None = None,
              *, validate: bool = True) -> Iterator[dict[str, Any]]:
    """Stream a history file's lines as parsed dicts, checked as :func:`read_history` says.

    This is the one reader; :func:`read_history` wraps each row in an :class:`Op`.
    Checkers that stream millions of lines use the rows directly (building an Op
    costs more than parsing the line). Each row has ``index``, ``time``, ``process``,
    ``type`` and ``f`` checked; ``value`` and ``error`` may be absent. Rows must not
    be mutated by the caller if it also keeps them.
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
    loads = orjson.loads
    decode_error = orjson.JSONDecodeError
    try:
        lineno = 0
        for lineno, raw in enumerate(fh, 1):
            # Inline fast path of _check_row for the common, well-formed line; any
            # doubt goes to _check_row, which raises the precise error.
            try:
                d = loads(raw)
            except decode_error as e:
                if not raw.endswith(b"\n"):  # only the last line lacks one: a cut write
                    result.truncated = True
                    result.lines = lineno - 1
                    return
                raise HistoryError(name, lineno, f"not valid JSON ({e})") from None
            try:
                index, t, typ, f, p = d["index"], d["time"], d["type"], d["f"], d["process"]
            except (KeyError, TypeError, IndexError):
                _check_row(name, lineno, d, expected_index, last_time)
                raise  # pragma: no cover - _check_row raised already
            if (index != expected_index or index.__class__ is not int
                    or t.__class__ is not int or t < last_time
                    or typ.__class__ is not str or typ not in _OP_TYPE_NAMES
                    or f.__class__ is not str
                    or (p.__class__ is not int and p != NEMESIS)
                    or ("error" in d and d["error"].__class__ not in _ERROR_TYPES)):
                _check_row(name, lineno, d, expected_index, last_time)
            if checker is not None:
                checker.check(lineno, d, p, typ, f)
            expected_index += 1
            last_time = t
            yield d
        result.lines = lineno
    finally:
        fh.close()


_OP_TYPE_NAMES: dict[str, None] = dict.fromkeys(OP_TYPES)
_ERROR_TYPES: tuple[type, ...] = (str, type(None))


def _lines(first: int, time: int, ops: Sequence[PendingOp]) -> bytes:
    """History lines for ``ops`` with indexes from ``first`` and one shared ``time``, each
    line newline-terminated: the single place the format is written.

    The ops are encoded as one JSON array (one orjson call, three times faster than one
    call per op; journaling speed is the workload's throughput), then split into lines
    at the top-level separators ``},{"index":``. A string cannot hold that sequence
    (its quote would be escaped), so only a nested object with an ``index`` key could
    add one; then the count is off and each op is encoded on its own.
    """
    rows = [{"index": first + k, "time": time, "process": p, "type": typ, "f": f, "value": v}
            if e is None else
            {"index": first + k, "time": time, "process": p, "type": typ, "f": f, "value": v,
             "error": e}
            for k, (p, typ, f, v, e) in enumerate(ops)]
    data = orjson.dumps(rows)
    if data.count(_SEPARATOR) == len(rows) - 1:
        return data[1:-1].replace(_SEPARATOR, b'}\n{"index":') + b"\n"
    return b"".join(orjson.dumps(r, option=orjson.OPT_APPEND_NEWLINE) for r in rows)


_SEPARATOR = b'},{"index":'


def _check_row(name: str, lineno: int, d: Any, expected_index: int, last_time: int) -> None:
    """Raise HistoryError for the first thing wrong with one parsed line."""
    if not isinstance(d, dict):
        raise HistoryError(name, lineno, "a line must be a JSON object")
    for key in ("index", "time", "process", "type", "f"):
        if key not in d:
            raise HistoryError(name, lineno, f"missing field '{key}'")
    index, t, typ, f, p = d["index"], d["time"], d["type"], d["f"], d["process"]
    if type(index) is not int or index != expected_index:
        raise HistoryError(name, lineno, f"index {index!r}, expected {expected_index}")
    if type(t) is not int:
        raise HistoryError(name, lineno, f"time {t!r} is not an integer (ns)")
    if t < last_time:
        raise HistoryError(name, lineno, f"time {t!r} is before the previous {last_time}")
    if type(typ) is not str or typ not in OP_TYPES:
        raise HistoryError(name, lineno, f"type {typ!r} is not invoke, ok, fail or info")
    if not isinstance(f, str):
        raise HistoryError(name, lineno, f"f {f!r} is not a string")
    if p != NEMESIS and type(p) is not int:
        raise HistoryError(name, lineno, f"process {p!r} is not an int or 'nemesis'")
    error = d.get("error")
    if error is not None and not isinstance(error, str):
        raise HistoryError(name, lineno, f"error {error!r} is not a string")


class _PairingChecker:
    """Tracks open invokes per process to enforce docs/history.md's pairing rules."""

    __slots__ = ("_name", "_open_other", "_open_sends", "_retired")

    def __init__(self, name: str) -> None:
        self._name = name
        self._open_sends: dict[tuple[int, Any], int] = {}
        self._open_other: dict[int, str] = {}
        self._retired: set[int] = set()

    def check(self, lineno: int, d: dict[str, Any], p: Any, typ: str, f: str) -> None:
        """Check one row (already shape-checked) against the open ops; ``p``, ``typ``
        and ``f`` are its process, type and f."""
        if p.__class__ is not int:  # the nemesis
            if typ != "info":
                self._fail(lineno, "nemesis ops must have type info")
            return
        if typ == "invoke" and p in self._retired:
            self._fail(lineno, f"process {p} was retired by an earlier info and may not invoke again")
        if f == "send":
            v = d.get("value")
            sent: Any = v.get("value") if v.__class__ is dict else None
            if sent.__class__ is not int:
                self._fail(lineno, f"a send's value.value must be an integer, not {sent!r}")
            key = (p, sent)
            if typ == "invoke":
                if key in self._open_sends:
                    self._fail(lineno, f"process {p} invoked send of value {sent} twice")
                self._open_sends[key] = lineno
            else:
                if self._open_sends.pop(key, None) is None:
                    self._fail(lineno, f"send {typ} of value {sent} by process {p} "
                                       "has no open invoke")
                if typ == "info":
                    self._retired.add(p)
            return
        if typ == "invoke":
            if p in self._open_other:
                self._fail(lineno, f"process {p} invoked {f} while its {self._open_other[p]} "
                                   "is still open")
            self._open_other[p] = f
        else:
            if self._open_other.get(p) != f:
                self._fail(lineno, f"{f} {typ} by process {p} has no open invoke")
            del self._open_other[p]
            if typ == "info":
                self._retired.add(p)

    def _fail(self, lineno: int, message: str) -> None:
        raise HistoryError(self._name, lineno, message)
