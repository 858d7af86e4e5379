"""The run directory (docs/history.md): its file names, how one is made, and how its
files are written and read.

``results/<test-name>/<UTC timestamp>/``, with ``results/latest`` pointing at the newest
run. Every file a run writes whole after the fact (results.json, report.html,
metadata.jsonl, replicas.jsonl, history.sends.parquet) goes through :func:`atomic_file`,
so a crash mid-write leaves the old file or none, never half of one. The history is the exception: it is
appended as the run goes (:class:`faultline.history.HistoryWriter`), zstd-compressed
(:data:`HISTORY_FILE`); a run directory may instead hold it plain
(:data:`PLAIN_HISTORY_FILE`), and :func:`find_history` says which it has. So are the
observer's samples (:data:`OBSERVATIONS_FILE`), read by :func:`read_jsonl_prefix`: a run
that dies writing one leaves a readable prefix and a cut last line.

Imports nothing of the project but :mod:`faultline.errors`: every layer may use it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import orjson

from faultline.errors import FaultlineError, HistoryError, SpecError

TEST_FILE = "test.json"
#: The history as a run writes it: JSON lines in zstd frames (docs/history.md).
HISTORY_FILE = "history.jsonl.zst"
#: The same lines uncompressed, which every reader accepts too.
PLAIN_HISTORY_FILE = "history.jsonl"
RESULTS_FILE = "results.json"
#: The history's sends as columns, made by the check's pass (faultline.checkers.table).
SENDS_FILE = "history.sends.parquet"
REPORT_FILE = "report.html"
OBSERVATIONS_FILE = "observations.jsonl"
METADATA_FILE = "metadata.jsonl"
REPLICAS_FILE = "replicas.jsonl"
CLUSTER_FILE = "cluster.json"
CLIENT_LOG_FILE = "client-log.jsonl"
#: The group workload's group as its coordinator and its offsets' replicas left it.
GROUP_FILE = "group.json"
NODES_DIR = "nodes"
LATEST = "latest"


def special(path: Path) -> bool:
    """Whether ``path`` exists as neither a regular file nor a directory (a FIFO, a socket,
    a device): reading it may never end, so the readers of a run directory refuse it unread
    (:meth:`faultline.spec.TestSpec.load`, a layer below, asks the same of test.json)."""
    return path.exists() and not path.is_file() and not path.is_dir()


def find_history(run_dir: Path) -> Path:
    """The history file of ``run_dir``: :data:`HISTORY_FILE` or :data:`PLAIN_HISTORY_FILE`,
    whichever it holds. Raises HistoryError when it holds neither or both (a run
    directory holds exactly one, docs/history.md), or when the one it holds is no
    regular file (a directory, say)."""
    found = [run_dir / name for name in (HISTORY_FILE, PLAIN_HISTORY_FILE)
             if (run_dir / name).exists()]
    if len(found) == 1:
        if not found[0].is_file():
            raise HistoryError(str(found[0]), None, "not a regular file")
        return found[0]
    if not found:
        raise HistoryError(str(run_dir / HISTORY_FILE), None,
                           f"missing (nor {PLAIN_HISTORY_FILE}): is this a run directory?")
    raise HistoryError(str(run_dir), None,
                       f"holds both {HISTORY_FILE} and {PLAIN_HISTORY_FILE}; keep one")


#: How much of a history's end :func:`history_identity` digests.
IDENTITY_TAIL = 1 << 16


def history_identity(history: Path) -> dict[str, Any]:
    """What ties a verdict to the history file it judged (results.json's ``history``):
    ``file`` (its name), ``bytes`` (its size) and ``tail_sha256`` (the SHA-256 of its
    last :data:`IDENTITY_TAIL` bytes, or of all of it when shorter). Taken again from
    the file's end alone, so a reader of a large history can afford it; a history
    re-written (re-run, re-compressed, edited) differs in one of them, short of one
    made to match. Raises HistoryError naming the file when it cannot be read."""
    try:
        with history.open("rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size - IDENTITY_TAIL))
            tail = fh.read()
    except OSError as e:
        raise HistoryError(str(history), None, f"cannot read: {e.strerror or e}") from None
    return {"file": history.name, "bytes": size, "tail_sha256": hashlib.sha256(tail).hexdigest()}


def new_run_dir(results: Path, name: str, now: datetime | None = None) -> Path:
    """Create ``results/<name>/<UTC timestamp>/`` (a suffix keeps two runs of one
    second apart) and point ``results/latest`` at it; returns the directory. A FaultlineError
    naming the path when either cannot be made (nothing of this call is left then), and
    SpecError for a ``name`` of ``latest`` (the link itself: the run would go inside the
    one it points at)."""
    if name == LATEST:
        raise SpecError(f"test name {LATEST!r} is taken: {results / LATEST} points at the newest run")
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    base = results / name
    try:
        base.mkdir(parents=True, exist_ok=True)
        run_dir = base / stamp
        n = 1
        while True:
            try:
                run_dir.mkdir()
                break
            except FileExistsError:
                run_dir = base / f"{stamp}-{n}"
                n += 1
    except OSError as e:
        raise FaultlineError(f"{e.filename or results}: cannot make the run directory: "
                             f"{e.strerror or e}") from None
    try:
        _point_latest(results, run_dir)
    except OSError as e:
        run_dir.rmdir()
        raise FaultlineError(f"{results / LATEST}: cannot point it at the new run: "
                             f"{e.strerror or e}") from None
    return run_dir


def _point_latest(results: Path, run_dir: Path) -> None:
    """Atomically replace ``results/latest`` with a relative symlink to ``run_dir``; on an
    OSError the temporary link is gone and ``results/latest`` is as it was."""
    link = results / LATEST
    tmp = results / f".{LATEST}.{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    tmp.symlink_to(run_dir.relative_to(results))
    try:
        tmp.replace(link)
    except OSError:
        tmp.unlink()
        raise


@contextlib.contextmanager
def atomic_file(path: Path) -> Iterator[IO[bytes]]:
    """A binary file to write ``path``'s new content to: a temporary file of a random name
    in the same directory, made with ``O_EXCL`` (never one planted there, nor a link
    followed), fsynced and renamed over ``path`` when the block ends. On any error the
    temporary file is removed and ``path`` is as it was; one that the system raised
    (a full disk, ``path`` a directory) is a FaultlineError naming ``path``. The file gets
    the mode ``open()`` would give it (0o666 less the process's umask). Every file a run
    directory gets whole is written through it."""
    tmp = str(path.parent / f".{path.name}.{secrets.token_hex(8)}.tmp")
    try:
        # O_EXCL as mkstemp; the kernel applies the umask (and a directory's default ACL)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    except OSError as e:
        raise FaultlineError(f"{path}: cannot write: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise FaultlineError(f"{path}: cannot write: {e.strerror or e}") from None
        raise


def write_atomic(path: Path, data: bytes | Iterable[bytes]) -> Path:
    """Write ``data`` (bytes, or chunks of it) to ``path`` through :func:`atomic_file`;
    returns ``path``."""
    with atomic_file(path) as fh:
        for chunk in [data] if isinstance(data, bytes) else data:
            fh.write(chunk)
    return path


def write_jsonl(path: Path, lines: Iterable[Mapping[str, Any]]) -> int:
    """Write ``lines`` as JSON lines to ``path`` atomically; returns how many."""
    encoded = [orjson.dumps(line) + b"\n" for line in lines]
    write_atomic(path, encoded)
    return len(encoded)


@dataclass(frozen=True, slots=True)
class JsonLines:
    """A JSON-lines file as read: its objects, and ``cut``, the number of its last line
    when that line was cut mid-write and not read (None: the file was read whole)."""

    objects: list[dict[str, Any]]
    cut: int | None = None


def read_jsonl(path: Path, shape: Callable[[dict[str, Any]], str | None] | None = None
               ) -> list[dict[str, Any]]:
    """Every line of a JSON-lines file as an object; HistoryError naming the line for a
    line that is not a JSON object (a cut last line included: these files are written
    whole, after the run), of which ``shape`` says what is wrong, or longer than
    :data:`MAX_LINE_BYTES`. Blank lines are skipped. A FIFO, socket or device is refused
    unread: reading one may never end."""
    return _read_jsonl(path, False, shape).objects


def read_jsonl_prefix(path: Path, shape: Callable[[dict[str, Any]], str | None] | None = None
                      ) -> JsonLines:
    """:func:`read_jsonl` for a file the run appended to as it went (:data:`OBSERVATIONS_FILE`):
    a last line without a newline that is not valid JSON (a run died writing it) ends the
    read, and ``cut`` names it; a bad line anywhere else is still a HistoryError."""
    return _read_jsonl(path, True, shape)


#: The longest line a JSON-lines file of a run directory may hold, its newline included
#: (docs/history.md): the history's longest are a drain's chunk of records and a nemesis op
#: naming every partition's leader, a few MB at most; the others' are shorter. A reader
#: refuses a longer one, naming its line.
MAX_LINE_BYTES = 64 << 20


def loads(raw: bytes) -> Any:
    """``orjson.loads(raw)``, but MemoryError where orjson had no memory to parse it: it says
    so as a JSONDecodeError, which is no fault of the input."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        if e.msg.startswith("Not enough memory"):
            raise MemoryError("no memory to parse a JSON text") from None
        raise


def _read_jsonl(path: Path, prefix: bool,
                shape: Callable[[dict[str, Any]], str | None] | None) -> JsonLines:
    if special(path):
        raise HistoryError(str(path), None, "not a regular file")
    out: list[dict[str, Any]] = []
    try:
        with path.open("rb") as fh:
            lineno = 0
            while raw := fh.readline(MAX_LINE_BYTES + 1):
                lineno += 1
                if len(raw) > MAX_LINE_BYTES:
                    raise HistoryError(str(path), lineno, f"a line longer than {MAX_LINE_BYTES} bytes "
                                                          "(docs/history.md's limit): no run writes one")
                if not raw.strip():
                    continue
                try:
                    obj = loads(raw)
                except orjson.JSONDecodeError as e:
                    if prefix and not raw.endswith(b"\n"):  # only the last line lacks one
                        return JsonLines(out, lineno)
                    raise HistoryError(str(path), lineno, f"not valid JSON ({e})") from None
                if not isinstance(obj, dict):
                    raise HistoryError(str(path), lineno, "expected a JSON object")
                if shape is not None and (why := shape(obj)) is not None:
                    raise HistoryError(str(path), lineno, why)
                out.append(obj)
    except OSError as e:
        raise HistoryError(str(path), None, f"cannot read: {e.strerror}") from None
    return JsonLines(out)
