"""Operations and the history file (docs/history.md, v1).

An :class:`Op` is data: ``invoke`` starts an operation, ``ok`` says it happened,
``fail`` that it certainly did not, ``info`` that nobody knows. The
:class:`HistoryWriter` journals ops as they happen, plain (``history.jsonl``) or as
zstd frames (``history.jsonl.zst``, what a run writes), so a run that dies still
leaves a readable prefix. :func:`iter_rows` is the one reader: given a run directory
or either file, it streams the parsed lines back, checking order and pairing, and
names the line of the first breach; :func:`read_history` wraps each line in an
:class:`Op` (for millions of lines, checkers use the rows: an Op per line would
double their cost). :func:`history_lines` gives the raw lines of either form, and
:func:`history_blocks` the same as blocks of whole lines; :class:`HistoryFile` names a
history for the queue checker, which reads such blocks itself (the common lines
compiled, the rest through :func:`parse_line` and :func:`check_row`, as iter_rows
does). The pairing rules are compiled (:func:`pair`), so that the checker applies the
same rules as iter_rows, inline.

This module is pure: it imports no Kafka client and no cluster code, so checkers,
reports and the Spark pipeline can use it anywhere.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import itertools
import os
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

import orjson
import zstandard
from numba import types
from numba.typed import Dict

from faultline.compiled import compiled
from faultline.errors import HistoryError
from faultline.rundir import MAX_LINE_BYTES, find_history, loads

OpType = Literal["invoke", "ok", "fail", "info"]
OP_TYPES: frozenset[str] = frozenset(("invoke", "ok", "fail", "info"))
NEMESIS = "nemesis"
#: A send's value is a signed 64-bit integer from VALUE_MIN to VALUE_MAX (docs/history.md):
#: the queue checker keeps the lowest 2**32 for the values read that no send can carry
#: (a foreign record's text or null), so that its int64 columns hold those too.
VALUE_MIN = -(1 << 63) + (1 << 32)
VALUE_MAX = (1 << 63) - 1
#: An op's ``time`` is at most the test's ``time_limit_s`` past the run's start plus this
#: (docs/history.md): what the run does besides its main phase (starting the cluster,
#: healing, waiting for quiescence, the drain) takes minutes.
TIME_MARGIN_NS = 24 * 3600 * 10**9
Process = int | Literal["nemesis"]
#: An op not yet journaled: ``(process, type, f, value, error)``.
PendingOp = tuple[Process, OpType, str, Any, str | None]
#: An op that happened before it is journaled, with the ``time.monotonic_ns()`` of then.
TimedOp = tuple[int, PendingOp]


def latest_time(time_limit_s: float) -> int:
    """The latest ``time`` an op of a test of ``time_limit_s`` may have (:data:`TIME_MARGIN_NS`)."""
    return int(time_limit_s * 1e9) + TIME_MARGIN_NS


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


#: The first bytes of a zstd frame: how a reader tells a compressed history.
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
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
                [sys.executable, "-c", "from faultline.history import _write_frames; _write_frames()"],
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
                last = max(last, min(at - self._t0, now))
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
    """Stream the ops of a history (a run directory or a history file, plain or
    compressed: :func:`iter_rows`) in order.

    Raises HistoryError naming the file and line on: invalid JSON (except a cut last
    line, which is dropped and noted in ``result.truncated``), a missing or mistyped
    field, an ``index`` that is not dense from 0, a ``time`` that goes backwards,
    and, when ``validate`` is on, a completion with no open invoke, a second
    invoke on a one-at-a-time process, or an op by a client process already retired
    by an ``info``. Built on :func:`iter_rows`, which checks the same things.
    """
    yield from map(Op.from_dict, iter_rows(path, result, validate=validate))


def history_lines(path: str | os.PathLike[str],
                  follow: Callable[[], bool] | None = None) -> Generator[bytes, None, None]:
    """The raw lines of a history, newline included, decompressed when it is zstd (told
    by its first bytes, not its name); ``path`` is a history file or a run directory
    (:func:`faultline.rundir.find_history`).

    A compressed file cut mid-frame (a killed run) gives the lines its frames decode to,
    then a last line without a newline (empty when the cut fell between lines), which
    a reader takes for a cut write. A frame whose checksum fails raises
    ``zstandard.ZstdError``. Raises HistoryError naming the file when it cannot be opened.

    ``follow`` reads a history its run is still writing: at the end of the file the
    reader waits for more (polling every :data:`FOLLOW_S`) until ``follow()`` is true,
    which must mean that the writer has closed it; then it reads to the end and stops,
    exactly as it would have read the closed file.
    """
    for block in history_blocks(path, follow):
        yield from io.BytesIO(block).readlines() or (block,)  # split in C, newlines kept


#: The most bytes one zstd frame of a history may decompress to (docs/history.md): a
#: run's frames hold about :data:`FRAME_BYTES` each. A reader refuses a larger one.
MAX_FRAME_BYTES = 256 << 20


class TooLarge(Exception):
    """A history line longer than :data:`~faultline.rundir.MAX_LINE_BYTES`, or a zstd frame
    that decompresses to more than :data:`MAX_FRAME_BYTES`; the reader that knows the line
    names it (:func:`unreadable`)."""


def unreadable(name: str, line: int, e: zstandard.ZstdError | TooLarge) -> HistoryError:
    """The HistoryError for history ``name`` whose blocks (:func:`history_blocks`) raised
    ``e`` before its line ``line``."""
    return HistoryError(name, line, str(e) if isinstance(e, TooLarge) else f"not valid zstd ({e})")


def history_blocks(path: str | os.PathLike[str],
                   follow: Callable[[], bool] | None = None) -> Generator[bytes, None, None]:
    """:func:`history_lines`'s lines, as blocks of whole lines: each block ends with a
    newline but the last, which is the cut last line (empty when a compressed file was
    cut between lines) if there is one. Raises :class:`TooLarge` in place of the block
    that would hold a line, or come from a frame, past its bound; memory stays within a
    few times the longest line."""
    name = _history_file(path)
    try:
        fh = open(name, "rb")  # noqa: SIM115 - closed in the finally below
    except OSError as e:
        raise HistoryError(name, None, f"cannot open: {e.strerror}") from None
    try:
        frames: _Frames | None = None
        # a compressed file's chunks decompress to ~1 MB each
        chunks = _chunks(fh, follow, lambda: 1 << 16 if frames is not None else 1 << 20)
        head = b""
        for chunk in chunks:  # enough of the start to tell a compressed file
            head += chunk
            if len(head) >= len(ZSTD_MAGIC):
                break
        frames = _Frames() if head.startswith(ZSTD_MAGIC) else None
        rest: list[bytes] = []  # the line begun, in pieces: joined once, when it ends
        held = 0  # their length
        for chunk in itertools.chain((head,), chunks):
            for data in frames.decompress(chunk) if frames is not None else (chunk,):
                end = data.find(b"\n") + 1
                if end:
                    if held + end > MAX_LINE_BYTES:
                        raise _too_long()
                    cut = data.rfind(b"\n") + 1
                    block = b"".join((*rest, data[:cut])) if rest else data[:cut]
                    rest, held = [], 0
                    yield block
                    data = data[cut:]
                if data:
                    rest.append(data)
                    held += len(data)
                    if held > MAX_LINE_BYTES:
                        raise _too_long()
        if rest or (frames is not None and frames.mid_frame):
            yield b"".join(rest)
    finally:
        fh.close()


def _too_long() -> TooLarge:
    return TooLarge(f"a line longer than {MAX_LINE_BYTES} bytes (docs/history.md's limit): "
                    "no run writes one")


class _Frames:
    """A sequence of zstd frames, decompressed from chunks cut anywhere, in pieces of
    boundedly many bytes; a frame past :data:`MAX_FRAME_BYTES` raises TooLarge."""

    __slots__ = ("_dctx", "_frame", "_size", "mid_frame")

    #: Compressed bytes given to the decoder at once: a zstd block (3 bytes of header
    #: and at least one of content) decodes to at most 128 KiB, so a piece's output is
    #: at most about 32 MiB, below MAX_LINE_BYTES, whatever the input.
    FEED = 1 << 10

    def __init__(self) -> None:
        self._dctx = zstandard.ZstdDecompressor()
        self._frame = self._dctx.decompressobj()
        self._size = 0  # what the current frame has decompressed to so far
        self.mid_frame = False  # the last chunk ended inside a frame

    def decompress(self, chunk: bytes) -> Iterator[bytes]:
        """``chunk``'s decompressed bytes, in pieces of at most about 1 MiB more than
        one feed's output."""
        view = memoryview(chunk)
        out: list[bytes] = []
        size = 0
        while view:  # a chunk may end one frame and start the next
            piece = self._frame.decompress(view[:self.FEED])
            view = view[self.FEED:]
            self._size += len(piece)
            if self._size > MAX_FRAME_BYTES:
                raise TooLarge(f"a zstd frame that decompresses to more than {MAX_FRAME_BYTES} "
                               "bytes (docs/history.md's limit): no run writes one")
            self.mid_frame = not self._frame.eof
            if self._frame.eof:
                view = memoryview(self._frame.unused_data + bytes(view))
                self._frame, self._size = self._dctx.decompressobj(), 0
            out.append(piece)
            size += len(piece)
            if size >= 1 << 20:
                yield b"".join(out)
                out, size = [], 0
        if out:
            yield b"".join(out)


#: How often a followed history is polled for more at its end.
FOLLOW_S = 0.05


def _chunks(fh: IO[bytes], follow: Callable[[], bool] | None,
            size: Callable[[], int]) -> Iterator[bytes]:
    """``fh``'s bytes, in chunks of ``size()`` bytes at most; with ``follow``, also what
    is appended, until ``follow()`` is true and the end is read."""
    while True:
        closed = follow is not None and follow()  # asked before the read: then it saw all
        chunk = fh.read(size())
        if chunk:
            yield chunk
        elif follow is None or closed:
            return
        else:
            time.sleep(FOLLOW_S)


def _history_file(path: str | os.PathLike[str]) -> str:
    """``path``, or the history file of the run directory ``path``."""
    name = os.fspath(path)
    return os.fspath(find_history(Path(name))) if os.path.isdir(name) else name


def iter_rows(path: str | os.PathLike[str], result: ReadResult | None = None,
              *, validate: bool = True,
              follow: Callable[[], bool] | None = None) -> Iterator[dict[str, Any]]:
    """Stream a history's lines as parsed dicts, checked as :func:`read_history` says.

    ``path`` is a run directory or a history file, plain or zstd-compressed
    (:func:`history_lines`): this is the one reader every other uses, the report,
    the checker and the Spark pipeline alike. :func:`read_history` wraps each row
    in an :class:`Op`. Checkers that stream millions of lines use the rows directly
    (building an Op costs more than parsing the line). Each row has ``index``,
    ``time``, ``process``, ``type`` and ``f`` checked; ``value`` and ``error`` may be
    absent. Rows must not be mutated by the caller if it also keeps them. ``follow``
    reads a history while its run writes it (:func:`history_lines`).
    """
    result = result if result is not None else ReadResult()
    name = _history_file(path)
    lines = history_lines(name, follow)
    checker = _PairingChecker(name) if validate else None
    expected_index = 0
    last_time = 0
    try:
        lineno = 0
        for lineno, raw in enumerate(lines, 1):
            d = parse_line(name, lineno, raw)
            if d is CUT:
                result.truncated = True
                result.lines = lineno - 1
                return
            t = check_row(name, lineno, d, expected_index, last_time)
            if checker is not None:
                checker.check(lineno, d, d["process"], d["type"], d["f"])
            expected_index += 1
            last_time = t
            yield d
        result.lines = lineno
    except (zstandard.ZstdError, TooLarge) as e:
        raise unreadable(name, lineno + 1, e) from None
    finally:
        lines.close()


#: What :func:`parse_line` gives for a cut write.
CUT: Any = object()


def parse_line(name: str, lineno: int, raw: bytes) -> Any:
    """Line ``lineno`` of history ``name`` parsed, or :data:`CUT` when it is a cut write:
    not valid JSON and without a newline (only a history's last line lacks one).
    Raises HistoryError for any other line that is not valid JSON, and MemoryError when
    there was no memory to parse it (:func:`faultline.rundir.loads`)."""
    try:
        return loads(raw)
    except orjson.JSONDecodeError as e:
        if not raw.endswith(b"\n"):
            return CUT
        raise HistoryError(name, lineno, f"not valid JSON ({e})") from None


@dataclass(slots=True)
class HistoryFile:
    """A history file to read: iterated, its rows (:func:`iter_rows`, with the pairing
    rules); the queue checker reads its lines itself, faster
    (:meth:`faultline.checkers.queue.Engine.feed_file`), as :func:`iter_rows` would."""

    path: str
    result: ReadResult
    follow: Callable[[], bool] | None = None

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter_rows(self.path, self.result, follow=self.follow)


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


def check_row(name: str, lineno: int, d: Any, expected_index: int, last_time: int) -> int:
    """Check the fields every line has (``d``, line ``lineno`` of ``name``, parsed) and
    return its time; raise HistoryError for the first thing wrong (:func:`_check_row`).
    The common, well-formed line is checked inline; any doubt goes to _check_row."""
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
    return t  # type: ignore[no-any-return]


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


# docs/history.md's pairing rules, compiled (numba): the queue checker's feed applies
# them to each op as it reads it (faultline.checkers.kernel), and iter_rows through
# _PairingChecker. An op's f as a code (other names get codes from F_OTHER up) and its
# type as one (OP_TYPE_CODES); what :func:`pair` finds wrong (P_*).
F_NEMESIS, F_SEND, F_POLL, F_DRAIN, F_OTHER = -1, 0, 1, 2, 3
T_INVOKE, T_OK, T_FAIL, T_INFO = 0, 1, 2, 3
OP_TYPE_CODES: dict[str, int] = {"invoke": T_INVOKE, "ok": T_OK, "fail": T_FAIL, "info": T_INFO}
P_NEMESIS_TYPE, P_RETIRED, P_NOT_INT, P_TWICE, P_NO_OPEN_SEND, P_STILL_OPEN, P_NO_OPEN = range(7)
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


@compiled()
def pair(open_sends: Any, open_other: Any, retired: Any, f: int, ty: int, p: int, sent: int,
         not_int: bool) -> int:
    """The pairing rules, for one op in history order: -1 if it keeps them, else what it
    breaks (P_*). ``open_sends`` holds the open sends, (process, value); ``open_other``
    each process's open op of another f (its code); ``retired`` the processes an
    ``info`` retired. ``sent`` is a send's value, ``not_int`` says it is no 64-bit int."""
    if f == F_NEMESIS:
        return P_NEMESIS_TYPE if ty != T_INFO else -1
    if ty == T_INVOKE and p in retired:
        return P_RETIRED
    if f == F_SEND:
        if not_int:
            return P_NOT_INT
        key = (p, sent)
        if ty == T_INVOKE:
            if key in open_sends:
                return P_TWICE
            open_sends[key] = 1
        else:
            if key not in open_sends:
                return P_NO_OPEN_SEND
            del open_sends[key]
            if ty == T_INFO:
                retired[p] = True
    elif ty == T_INVOKE:
        if p in open_other:
            return P_STILL_OPEN
        open_other[p] = f
    else:
        if p not in open_other or open_other[p] != f:
            return P_NO_OPEN
        del open_other[p]
        if ty == T_INFO:
            retired[p] = True
    return -1


@compiled()
def _pair(open_sends: Any, open_other: Any, retired: Any, f: int, ty: int, p: int, sent: int,
          not_int: bool) -> int:
    return pair(open_sends, open_other, retired, f, ty, p, sent, not_int)


_PAIR = types.UniTuple(types.int64, 2)


@compiled()
def pairing_state() -> tuple[Any, Any, Any]:
    """Empty open sends, open other ops and retired processes, for :func:`pair` (made
    compiled: numba's dicts made in Python compile their methods in each process)."""
    return (Dict.empty(_PAIR, types.int64),
            Dict.empty(types.int64, types.int64), Dict.empty(types.int64, types.boolean))


@compiled()
def open_f(open_other: Any, p: int) -> int:
    """The f code of process ``p``'s open op (0 if none), for :func:`pairing_message`."""
    return int(open_other[p]) if p in open_other else 0


def pairing_message(why: int, p: int, f: str, typ: str, sent: Any, open_f: str) -> str:
    """What :func:`pair`'s ``why`` means for an op by process ``p`` of ``f`` and type
    ``typ``, sending ``sent``; ``open_f`` names the process's open op (P_STILL_OPEN)."""
    return (
        "nemesis ops must have type info",
        f"process {p} was retired by an earlier info and may not invoke again",
        f"a send's value.value must be a 64-bit integer, not {sent!r}",
        f"process {p} invoked send of value {sent} twice",
        f"send {typ} of value {sent} by process {p} has no open invoke",
        f"process {p} invoked {f} while its {open_f} is still open",
        f"{f} {typ} by process {p} has no open invoke",
    )[why]


class _PairingChecker:
    """Enforces docs/history.md's pairing rules on rows (:func:`pair`)."""

    __slots__ = ("_f", "_name", "_open_other", "_open_sends", "_retired")

    def __init__(self, name: str) -> None:
        self._name = name
        self._f = {"send": F_SEND, "poll": F_POLL, "drain": F_DRAIN}
        self._open_sends, self._open_other, self._retired = pairing_state()

    def check(self, lineno: int, d: dict[str, Any], p: Any, typ: str, f: str) -> None:
        """Check one row (already shape-checked) against the open ops; ``p``, ``typ``
        and ``f`` are its process, type and f."""
        sent: Any = 0
        if p.__class__ is not int:  # the nemesis
            fc, p = F_NEMESIS, 0
        else:
            if not INT64_MIN <= p <= INT64_MAX:
                raise HistoryError(self._name, lineno, f"process {p} does not fit 64 bits")
            fc = self._f.setdefault(f, len(self._f))
            if fc == F_SEND:
                v = d.get("value")
                sent = v.get("value") if v.__class__ is dict else None
        not_int = sent.__class__ is not int or not INT64_MIN <= sent <= INT64_MAX
        why = _pair(self._open_sends, self._open_other, self._retired, fc, OP_TYPE_CODES[typ],
                    p, 0 if not_int else sent, fc == F_SEND and not_int)
        if why >= 0:
            names = list(self._f)
            raise HistoryError(self._name, lineno, pairing_message(
                why, p, f, typ, sent, names[open_f(self._open_other, p)]))
