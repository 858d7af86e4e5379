"""The history's writer: :class:`HistoryWriter` journals ops as they happen, plain
(``history.jsonl``) or as zstd frames (``history.jsonl.zst``, what a run writes) by a
child process, so a run that dies still leaves a readable prefix."""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson
import zstandard

from faultline.errors import HistoryError
from faultline.history.ops import Op, OpType, PendingOp, Process, TimedOp

#: A compressed history's frames: at most this long after an op is appended it is
#: handed to the frame writer, and a frame is sent early once this many bytes are pending.
FLUSH_S = 0.2
FRAME_BYTES = 1 << 20
#: The pipe to the frame writer holds this much (``F_SETPIPE_SZ``; Linux's default,
#: 64 KiB, would stall the appending threads while a frame is compressed).
PIPE_BYTES = 1 << 20
#: A message to the frame writer: its length, then its chunks. A chunk is the header
#: (first index, shared time, length of the encoded ops), then the ops as one JSON
#: array of ``[process, type, f, value, error]``.
_MESSAGE = struct.Struct("<q")
_CHUNK = struct.Struct("<qqq")


@dataclass(slots=True)
class HistoryWriter:
    """Appends ops to a history file; safe to call from many threads.

    Contract: ``append`` assigns a dense ``index`` and a non-decreasing ``time`` under
    one lock, and so does :meth:`append_at`, for ops that happened before they are
    journaled. A path ending in ``.zst`` is written compressed, as a sequence of
    independent zstd frames (with checksums), one per flushed batch, by a child
    process, the frame writer (:func:`_write_frames`): the appending threads only
    encode their ops, and making the lines and compressing them costs the workload's
    clients nothing of their interpreter. An op reaches the frame writer at most
    :data:`FLUSH_S` after ``append`` returns (a background thread flushes the batch)
    or sooner once :data:`FRAME_BYTES` are pending, and at :meth:`close`. The frame
    writer writes every whole batch it was sent, even when this process is killed
    (it then reads the end of its pipe) or interrupted (it runs in a process group
    of its own, out of reach of the terminal's Ctrl-C), so a run that dies leaves a
    prefix any zstd reader decodes. :meth:`close` waits for it, and raises
    HistoryError when it failed. Any other path is written plain, in this process,
    the line handed to the OS before ``append`` returns. It never fsyncs: a journal
    that survives power loss is not what a test run needs.
    """

    path: Path
    _file: IO[bytes] | None = field(init=False, repr=False, default=None)
    _writer: subprocess.Popen[bytes] | None = field(init=False, repr=False, default=None)
    _lock: threading.Lock = field(init=False, repr=False, default_factory=threading.Lock)
    _t0: int = field(init=False, repr=False, default=0)
    _next: int = field(init=False, repr=False, default=0)
    _last: int = field(init=False, repr=False, default=0)  # the time of the last op journaled
    _pending: list[bytes] = field(init=False, repr=False, default_factory=list)
    _pending_bytes: int = field(init=False, repr=False, default=0)
    _closed: threading.Event = field(init=False, repr=False, default_factory=threading.Event)
    _shut: bool = field(init=False, repr=False, default=False)
    #: Held from taking a batch (under ``_lock``) until it is in the pipe: batches reach
    #: the frame writer in the order they were taken, and appends go on meanwhile.
    _io: threading.Lock = field(init=False, repr=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._t0 = time.monotonic_ns()
        if not Path(self.path).name.endswith(".zst"):
            self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115 - closed by close()
            return
        with open(self.path, "ab") as out:
            self._writer = subprocess.Popen(  # ended by close(), or by its pipe's end
                [sys.executable, "-c", "from faultline.history.writer import _write_frames; _write_frames()"],
                stdin=subprocess.PIPE, stdout=out, stderr=subprocess.PIPE, bufsize=0,
                process_group=0)
        assert self._writer.stdin is not None
        with contextlib.suppress(OSError):  # a smaller pipe only stalls appends sooner
            fcntl.fcntl(self._writer.stdin, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        threading.Thread(target=self._flush_every, name="faultline-history-flush",
                         daemon=True).start()

    def now(self) -> int:
        """Nanoseconds since this writer opened; the clock every op's ``time`` uses."""
        return time.monotonic_ns() - self._t0

    def clock(self, monotonic_ns: int) -> int:
        """``monotonic_ns``, a ``time.monotonic_ns()`` reading, on :meth:`now`'s clock."""
        return monotonic_ns - self._t0

    def append(self, process: Process, type: OpType, f: str, value: Any = None,
               error: str | None = None) -> Op:
        """Journal one op and return it as written."""
        with self._lock:  # the monotonic clock read under the lock keeps time ordered
            op = Op(self._next, self.now(), process, type, f, value, error)
            batch = self._write(op.index, op.time, ((process, type, f, value, error),))
            self._next += 1
        self._emit(batch)
        return op

    def append_many(self, ops: Sequence[PendingOp]) -> None:
        """Journal several ops, ``(process, type, f, value, error)`` each, with one write.

        Same contract as :meth:`append` for every op (dense indexes, one shared
        ``time``, consecutive lines), and all of them are handed on before it
        returns. It exists for throughput: a pipelined producer journals a batch of
        invokes before producing them, and the completions one ``poll()`` served.
        """
        if not ops:
            return
        with self._lock:
            t, first = self.now(), self._next
            batch = self._write(first, t, ops)
            self._next = first + len(ops)
        self._emit(batch)

    def append_at(self, ops: Sequence[TimedOp]) -> None:
        """Journal ops that happened before now, ``(time.monotonic_ns() when it happened,
        (process, type, f, value, error))`` each, in order, with one hand-over.

        Same contract as :meth:`append_many`, but each op's ``time`` is its own: when it
        happened, on :meth:`now`'s clock, yet never after now nor before the op journaled
        ahead of it, since times never decrease (an op that happened before one journaled
        ahead of it shares that one's time).
        """
        if not ops:
            return
        with self._lock:
            now, last, timed = self.now(), self._last, []
            for at, op in ops:
                last = max(last, min(at - self._t0, now))  # clock(at), inline: once per op
                timed.append((last, op))
            for t, run in itertools.groupby(timed, key=lambda x: x[0]):
                group = [op for _, op in run]
                self._put(self._next, t, group)
                self._next += len(group)
            batch = self._take() if self._pending_bytes >= FRAME_BYTES else None
        self._emit(batch)

    def _write(self, first: int, t: int, ops: Sequence[PendingOp]) -> list[bytes] | None:
        """Hand ``ops`` to the OS, or to the pending batch when compressing (:meth:`_put`);
        under the lock. Returns a full batch, taken, for :meth:`_emit` after the lock."""
        self._put(first, t, ops)
        return self._take() if self._pending_bytes >= FRAME_BYTES else None

    def _put(self, first: int, t: int, ops: Sequence[PendingOp]) -> None:
        """Hand ``ops``, all at time ``t``, to the OS, or to the pending batch; under the lock."""
        if self._shut:
            raise ValueError("write to a closed history")
        if self._file is not None:
            _write_all(self._file, _lines(first, t, ops))
        else:
            data = orjson.dumps(ops)  # the ops' JSON, checked here: a bad value raises now
            self._pending += (_CHUNK.pack(first, t, len(data)), data)
            self._pending_bytes += _CHUNK.size + len(data)
        self._last = t

    def _take(self) -> list[bytes] | None:
        """The pending chunks behind their message's length, now off the list, with
        ``_io`` acquired for :meth:`_emit`; None if nothing is pending. Under the lock,
        so it only swaps the list: :meth:`_emit` joins it."""
        if not self._pending:
            return None
        message = [_MESSAGE.pack(self._pending_bytes), *self._pending]
        self._pending = []
        self._pending_bytes = 0
        self._io.acquire()
        return message

    def _emit(self, message: list[bytes] | None) -> None:
        """Send a message :meth:`_take` gave to the frame writer, outside the lock;
        releases ``_io``. A frame writer that died is reported by :meth:`close`."""
        if message is None:
            return
        assert self._writer is not None and self._writer.stdin is not None
        try:
            with contextlib.suppress(BrokenPipeError):
                _write_all(self._writer.stdin, b"".join(message))
        finally:
            self._io.release()

    def _flush_every(self) -> None:
        while not self._closed.wait(FLUSH_S):
            with self._lock:  # once shut, nothing is pending: close took it
                batch = self._take()
            self._emit(batch)

    def close(self) -> None:
        """Flush what is pending and close the file; later appends raise ValueError.
        Raises HistoryError when the frame writer failed (a full disk, say)."""
        self._closed.set()
        with self._lock:
            if self._shut:
                return
            self._shut = True
            batch = self._take()
        if self._file is not None:  # plain: every line is written already
            self._file.close()
            return
        self._emit(batch)
        writer = self._writer
        assert writer is not None and writer.stdin is not None and writer.stderr is not None
        with self._io, contextlib.suppress(BrokenPipeError):  # after every batch taken before
            writer.stdin.close()
        why = writer.stderr.read().decode(errors="replace").strip()
        writer.stderr.close()
        if writer.wait() != 0:
            last = why.splitlines()[-1] if why else f"exit status {writer.returncode}"
            raise HistoryError(os.fspath(self.path), None, f"writing the history failed: {last}")

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _write_frames() -> None:
    """The frame writer's main (:class:`HistoryWriter`): read messages from stdin until
    its end, write each as one zstd frame of history lines to stdout.

    A message cut by its sender's death is dropped: the frames before it are whole.
    """
    source = open(0, "rb", buffering=0, closefd=False)  # noqa: SIM115 - the process's own
    out = open(1, "wb", buffering=0, closefd=False)  # noqa: SIM115
    zstd = zstandard.ZstdCompressor(level=3, write_checksum=True)
    while (head := _read_exactly(source, _MESSAGE.size)) is not None:
        body = _read_exactly(source, _MESSAGE.unpack(head)[0])
        if body is None:
            return
        lines, at = [], 0
        while at < len(body):
            first, t, n = _CHUNK.unpack_from(body, at)
            at += _CHUNK.size
            lines.append(_lines(first, t, orjson.loads(body[at:at + n])))
            at += n
        _write_all(out, zstd.compress(b"".join(lines)))


def _read_exactly(source: IO[bytes], n: int) -> bytes | None:
    """``n`` bytes from ``source``, or None when it ends first."""
    parts, want = [], n
    while want:
        part = source.read(want)
        if not part:
            return None
        parts.append(part)
        want -= len(part)
    return b"".join(parts)


def _write_all(out: IO[bytes], data: bytes) -> None:
    """Write all of ``data`` to an unbuffered file, which may take less per call."""
    view = memoryview(data)
    while view:
        view = view[out.write(view) or 0:]




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

