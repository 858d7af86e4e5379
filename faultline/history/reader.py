"""The history's readers. :func:`iter_rows` is the one reader: given a run directory or
either file (plain or zstd frames), it streams the parsed lines back, checking order and
pairing (:mod:`faultline.history.pairing`), and names the line of the first breach;
:func:`read_history` wraps each line in an :class:`~faultline.history.ops.Op` (for
millions of lines, checkers use the rows: an Op per line would double their cost).
:func:`history_lines` gives the raw lines of either form, and :func:`history_blocks`
the same as blocks of whole lines; :class:`HistoryFile` names a history for the queue
checker, which reads such blocks itself (the common lines compiled, the rest through
:func:`parse_line` and :func:`check_row`, as iter_rows does)."""

from __future__ import annotations

import io
import itertools
import os
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson
import zstandard

from faultline.errors import HistoryError
from faultline.history.ops import NEMESIS, OP_TYPES, Op
from faultline.history.pairing import RowPairing
from faultline.rundir import MAX_LINE_BYTES, find_history, loads

#: The first bytes of a zstd frame: how a reader tells a compressed history.
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


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


def history_lines(path: str | os.PathLike[str], follow: Callable[[], bool] | None = None,
                  tap: Callable[[bytes], None] | None = None) -> Generator[bytes, None, None]:
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
    exactly as it would have read the closed file. ``tap`` is given its blocks
    (:func:`history_blocks`).
    """
    for block in history_blocks(path, follow, tap):
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


def history_blocks(path: str | os.PathLike[str], follow: Callable[[], bool] | None = None,
                   tap: Callable[[bytes], None] | None = None) -> Generator[bytes, None, None]:
    """:func:`history_lines`'s lines, as blocks of whole lines: each block ends with a
    newline but the last, which is the cut last line (empty when a compressed file was
    cut between lines) if there is one. Raises :class:`TooLarge` in place of the block
    that would hold a line, or come from a frame, past its bound; memory stays within a
    few times the longest line. ``tap``, when given, gets each block before it is
    yielded: a second reader of the same read."""
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
                    if tap is not None:
                        tap(block)
                    yield block
                    data = data[cut:]
                if data:
                    rest.append(data)
                    held += len(data)
                    if held > MAX_LINE_BYTES:
                        raise _too_long()
        if rest or (frames is not None and frames.mid_frame):
            block = b"".join(rest)
            if tap is not None:
                tap(block)
            yield block
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
              *, validate: bool = True, follow: Callable[[], bool] | None = None,
              tap: Callable[[bytes], None] | None = None) -> Iterator[dict[str, Any]]:
    """Stream a history's lines as parsed dicts, checked as :func:`read_history` says.

    ``path`` is a run directory or a history file, plain or zstd-compressed
    (:func:`history_lines`): this is the one reader every other uses, the report,
    the checker and the Spark pipeline alike. :func:`read_history` wraps each row
    in an :class:`Op`. Checkers that stream millions of lines use the rows directly
    (building an Op costs more than parsing the line). Each row has ``index``,
    ``time``, ``process``, ``type`` and ``f`` checked; ``value`` and ``error`` may be
    absent. Rows must not be mutated by the caller if it also keeps them. ``follow``
    reads a history while its run writes it, and ``tap`` is given the blocks read
    (:func:`history_lines`).
    """
    result = result if result is not None else ReadResult()
    name = _history_file(path)
    lines = history_lines(name, follow, tap)
    checker = RowPairing(name) if validate else None
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
    (:meth:`faultline.checkers.queue.Engine.feed_file`), as :func:`iter_rows` would.
    ``tap`` is given the blocks of whole lines either read (:func:`history_blocks`)."""

    path: str
    result: ReadResult
    follow: Callable[[], bool] | None = None
    tap: Callable[[bytes], None] | None = None

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter_rows(self.path, self.result, follow=self.follow, tap=self.tap)


_OP_TYPE_NAMES: dict[str, None] = dict.fromkeys(OP_TYPES)
_ERROR_TYPES: tuple[type, ...] = (str, type(None))


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

