"""faultline.history: the writer, the reader's errors with line numbers, a cut last
line, and the pairing rules of docs/history.md."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from faultline.cluster.waiting import wait_until
from faultline.errors import HistoryError
from faultline.history import (
    ZSTD_MAGIC,
    HistoryWriter,
    Op,
    PendingOp,
    ReadResult,
    iter_rows,
    read_history,
    reader,
)
from faultline.rundir import MAX_LINE_BYTES
from tests.processes import alive


def line(i: int, p: Any = 0, typ: str = "invoke", f: str = "send", value: Any = None,
         t: int | None = None, **extra: Any) -> dict[str, Any]:
    if value is None and f == "send":
        value = {"topic": "t", "partition": 0, "value": i}
    return {"index": i, "time": i if t is None else t, "process": p, "type": typ, "f": f,
            "value": value, **extra}


def write(path: Path, rows: list[Any], tail: bytes = b"") -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows) + tail)
    return path


def test_writer_journals_dense_indexes_and_monotonic_times(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as w:
        a = w.append(0, "invoke", "send", {"topic": "t", "partition": 0, "value": 1})
        b = w.append(0, "ok", "send", {"topic": "t", "partition": 0, "value": 1, "offset": 0})
        c = w.append("nemesis", "info", "kill", {"nodes": [1]}, error="boom")
        # written and flushed before append returns
        assert len(path.read_bytes().splitlines()) == 3
    assert [o.index for o in (a, b, c)] == [0, 1, 2]
    assert a.time <= b.time <= c.time
    ops = list(read_history(path))
    assert ops == [a, b, c]
    assert "error" not in orjson.loads(path.read_bytes().splitlines()[0])
    assert ops[2].error == "boom"


def test_writer_is_safe_from_many_threads(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as w:
        def work(p: int) -> None:
            for i in range(200):
                w.append(p, "invoke", "poll")
                w.append(p, "ok", "poll", {"records": []})
                del i

        threads = [threading.Thread(target=work, args=(p,)) for p in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    rr = ReadResult()
    ops = list(read_history(path, rr))
    assert [o.index for o in ops] == list(range(1600)) and rr.lines == 1600


def test_writer_closed_rejects_appends(tmp_path: Path) -> None:
    w = HistoryWriter(tmp_path / "h.jsonl")
    w.close()
    with pytest.raises(ValueError):
        w.append(0, "invoke", "poll")


def test_iter_rows_and_read_history_agree(tmp_path: Path) -> None:
    rows = [line(0), line(1, typ="ok", value={"topic": "t", "partition": 0, "value": 0,
                                               "offset": 0})]
    rows[1]["value"]["value"] = 0
    path = write(tmp_path / "h.jsonl", rows)
    assert list(iter_rows(path)) == rows
    assert [o.to_dict() for o in read_history(path)] == rows


def test_a_cut_last_line_is_dropped_and_noted(tmp_path: Path) -> None:
    path = write(tmp_path / "h.jsonl", [line(0), line(1)], b'{"index": 2, "ti')
    rr = ReadResult()
    assert [o.index for o in read_history(path, rr)] == [0, 1]
    assert rr.truncated is True and rr.lines == 2


def test_a_last_line_without_newline_but_whole_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(orjson.dumps(line(0)) + b"\n" + orjson.dumps(line(1)))
    rr = ReadResult()
    assert [o.index for o in read_history(path, rr)] == [0, 1]
    assert rr.truncated is False and rr.lines == 2


def test_an_empty_history_is_empty(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(b"")
    assert list(read_history(path)) == []


@pytest.mark.parametrize(("rows", "tail", "lineno", "needle"), [
    ([line(0)], b"{not json\n", 2, "not valid JSON"),
    ([line(0)], b"\n", 2, "not valid JSON"),
    ([line(0), [1, 2]], b"", 2, "must be a JSON object"),
    ([line(0), {k: v for k, v in line(1).items() if k != "time"}], b"", 2, "missing field 'time'"),
    ([line(0), line(2)], b"", 2, "index 2, expected 1"),
    ([line(0, t=5), line(1, t=4)], b"", 2, "before the previous 5"),
    ([line(0, t=1.5)], b"", 1, "not an integer"),
    ([line(0, typ="done")], b"", 1, "is not invoke, ok, fail or info"),
    ([line(0, typ=["ok"])], b"", 1, "is not invoke, ok, fail or info"),
    ([line(0, f=3)], b"", 1, "is not a string"),
    ([line(0, p="x")], b"", 1, "is not an int or 'nemesis'"),
    ([line(0, p=True)], b"", 1, "is not an int or 'nemesis'"),
    ([line(0, error=5)], b"", 1, "error 5 is not a string"),
])
def test_reader_errors_name_file_and_line(tmp_path: Path, rows: list[Any], tail: bytes,
                                          lineno: int, needle: str) -> None:
    path = write(tmp_path / "h.jsonl", rows, tail)
    with pytest.raises(HistoryError) as e:
        list(read_history(path))
    assert e.value.line == lineno and e.value.path == str(path)
    assert needle in str(e.value) and str(e.value).startswith(f"{path}:{lineno}: ")


def test_a_cut_line_in_the_middle_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path / "h.jsonl", [line(0)], b'{"index": 1, "ti\n' + orjson.dumps(line(2)))
    with pytest.raises(HistoryError, match=":2: not valid JSON"):
        list(read_history(path))


def test_a_missing_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="cannot open"):
        list(read_history(tmp_path / "nope.jsonl"))


@pytest.mark.parametrize(("rows", "lineno", "needle"), [
    ([line(0, typ="ok")], 1, "has no open invoke"),
    ([line(0), line(1, value={"topic": "t", "partition": 0, "value": 0})], 2, "twice"),
    ([line(0, f="poll", value=None), line(1, f="poll", value=None)], 2, "still open"),
    ([line(0, f="poll", typ="ok", value={"records": []})], 1, "no open invoke"),
    ([line(0, f="poll", value=None), line(1, f="drain", typ="ok", value={})], 2, "no open invoke"),
    ([line(0, p="nemesis", f="kill", value={})], 1, "nemesis ops must have type info"),
    ([line(0), line(1, typ="info", value={"topic": "t", "partition": 0, "value": 0}),
      line(2)], 3, "retired"),
    ([line(0, f="poll", value=None), line(1, f="poll", typ="info", value=None),
      line(2, f="poll", value=None)], 3, "retired"),
    ([line(0, value={"topic": "t", "partition": 0, "value": [1]})], 1, "must be a 64-bit integer"),
    ([line(0, value={"topic": "t", "partition": 0})], 1, "must be a 64-bit integer"),
])
def test_pairing_errors(tmp_path: Path, rows: list[Any], lineno: int, needle: str) -> None:
    path = write(tmp_path / "h.jsonl", rows)
    with pytest.raises(HistoryError) as e:
        list(read_history(path))
    assert e.value.line == lineno and needle in str(e.value)
    # validate=False leaves pairing (and the send value it pairs on) unchecked
    assert len(list(read_history(path, validate=False))) == len(rows)


def test_pipelined_sends_and_completions_after_retirement_are_fine(tmp_path: Path) -> None:
    v = [{"topic": "t", "partition": 0, "value": i} for i in range(3)]
    rows = [line(0, value=v[0]), line(1, value=v[1]), line(2, value=v[2]),
            line(3, typ="info", value=v[1]), line(4, typ="ok", value={**v[0], "offset": 0}),
            line(5, typ="fail", value=v[2]),
            line(6, p="nemesis", typ="info", f="kill", value={"nodes": [1]})]
    path = write(tmp_path / "h.jsonl", rows)
    assert [o.type for o in read_history(path)] == ["invoke"] * 3 + ["info", "ok", "fail", "info"]


def test_op_round_trips() -> None:
    op = Op(3, 7, 1, "fail", "send", {"value": 1}, "NOT_ENOUGH_REPLICAS")
    assert Op.from_dict(op.to_dict()) == op


TEXT = st.text(st.characters(blacklist_categories=("Cs",)))  # JSON-encodable strings


@given(st.lists(st.tuples(
    st.one_of(st.integers(0, 5), st.just("nemesis")),
    st.sampled_from(["invoke", "ok", "fail", "info"]),
    st.sampled_from(["send", "poll", "kill"]),
    st.recursive(st.none() | st.integers(-(2**63), 2**63 - 1) | TEXT,
                 lambda inner: st.lists(inner, max_size=3)
                 | st.dictionaries(st.sampled_from(["index", "value", "}", '},{"index":']), inner,
                                   max_size=3)),
    st.none() | TEXT), max_size=6))
def test_append_many_writes_each_op_as_its_own_line(ops: list[Any]) -> None:
    """One line per op, exactly as encoded alone, whatever nested values hold (nested
    objects with an ``index`` key, strings that look like the line separator)."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "h.jsonl"
        with HistoryWriter(path) as w:
            w.append_many(ops)
        lines = path.read_bytes().splitlines()
    assert [orjson.loads(x) for x in lines] == [
        {"index": k, "time": orjson.loads(x)["time"], "process": p, "type": typ, "f": f,
         "value": v, **({} if e is None else {"error": e})}
        for k, ((p, typ, f, v, e), x) in enumerate(zip(ops, lines, strict=True))]


# --- the compressed form: history.jsonl.zst ---------------------------------------------


def zst(rows: list[Any], per_frame: int = 2) -> bytes:
    """``rows`` as JSON lines in independent zstd frames of ``per_frame`` lines each."""
    c = zstandard.ZstdCompressor(write_checksum=True)
    return b"".join(c.compress(b"".join(orjson.dumps(r) + b"\n" for r in rows[i:i + per_frame]))
                    for i in range(0, len(rows), per_frame))


def frames(data: bytes) -> list[bytes]:
    """The zstd frames of ``data``, each decompressed on its own."""
    out = []
    while data:
        d = zstandard.ZstdDecompressor().decompressobj()
        out.append(d.decompress(data))
        assert d.eof, "a frame cut short"
        data = d.unused_data
    return out


def test_a_zst_path_is_written_compressed_in_frames_that_read_back_the_same(tmp_path: Path) -> None:
    plain, packed = tmp_path / "history.jsonl", tmp_path / "history.jsonl.zst"
    with HistoryWriter(plain) as a, HistoryWriter(packed) as b:
        for w in (a, b):
            w._t0 = 0  # the same clock for both, so the lines are identical
        for i in range(3000):
            ops: list[PendingOp] = [(0, "invoke", "send", {"topic": "t", "partition": 0, "value": i}, None),
                                    (0, "ok", "send", {"topic": "t", "partition": 0, "value": i,
                                                       "offset": i}, None)]
            for w in (a, b):
                w.append_many(ops)
            if i == 1000:  # a frame now, whatever the flusher thread does
                with b._lock:
                    frame = b._take()
                b._emit(frame)
    data = packed.read_bytes()
    assert data.startswith(ZSTD_MAGIC) and len(data) < plain.stat().st_size // 5
    assert b"".join(frames(data)) == zstandard.ZstdDecompressor().stream_reader(
        data, read_across_frames=True).read() and len(frames(data)) >= 2  # the flusher may add some
    times = [r["time"] for r in iter_rows(plain)]
    assert [{**r, "time": 0} for r in iter_rows(packed)] == [{**r, "time": 0} for r in iter_rows(plain)]
    assert times == sorted(times) and len(times) == 6000


@pytest.mark.parametrize("name", ["history.jsonl", "history.jsonl.zst"])
def test_ops_journaled_at_their_own_times_keep_times_in_order(tmp_path: Path, name: str) -> None:
    """append_at: each op at the time.monotonic_ns() it happened, but never before the op
    journaled ahead of it, nor after now; ops of one time share a chunk."""
    send = {"topic": "t", "partition": 0, "value": 1}
    with HistoryWriter(tmp_path / name) as w:
        w._t0 = 0  # the writer's clock is time.monotonic_ns() itself
        a = w.append(0, "invoke", "send", send)
        w.append_at([(a.time + 5, (1, "invoke", "poll", None, None)),
                     (a.time + 5, (1, "ok", "poll", None, None)),
                     (a.time - 9, (0, "ok", "send", {**send, "offset": 0}, None)),
                     (a.time + 7, (2, "invoke", "poll", None, None))])
        w.append_at([(a.time + 6, (2, "ok", "poll", None, None)),
                     (time.monotonic_ns() + 10**12, ("nemesis", "info", "kill", None, None))])
        after = w.now()
    ops = list(read_history(tmp_path / name))
    assert [o.index for o in ops] == list(range(7))
    assert [o.time - a.time for o in ops[:6]] == [0, 5, 5, 5, 7, 7]
    assert ops[5].time <= ops[6].time <= after  # the kill said it happened later than now


def test_a_run_directory_is_read_whichever_form_its_history_has(tmp_path: Path) -> None:
    rows = [line(0), line(1), line(2)]
    (tmp_path / "history.jsonl.zst").write_bytes(zst(rows))
    assert list(iter_rows(tmp_path)) == rows
    assert [o.to_dict() for o in read_history(tmp_path)] == rows
    write(tmp_path / "history.jsonl", rows)
    with pytest.raises(HistoryError, match=r"holds both history\.jsonl\.zst and history\.jsonl"):
        list(iter_rows(tmp_path))
    (tmp_path / "history.jsonl.zst").unlink()
    assert list(iter_rows(tmp_path)) == rows
    (tmp_path / "history.jsonl").unlink()
    with pytest.raises(HistoryError, match=r"history.jsonl.zst: missing \(nor history.jsonl\)"):
        list(iter_rows(tmp_path))


def test_a_compressed_history_cut_mid_frame_reads_as_its_prefix(tmp_path: Path) -> None:
    rows = [line(i) for i in range(400)]
    data = zst(rows, per_frame=100)
    path = tmp_path / "h.jsonl.zst"
    path.write_bytes(data[:-40])  # the last frame cut short
    rr = ReadResult()
    got = list(iter_rows(path, rr))
    assert got == rows[:len(got)] and 300 <= len(got) < 400 and rr.truncated is True


def test_a_corrupt_frame_is_one_clear_error(tmp_path: Path) -> None:
    data = bytearray(zst([line(i) for i in range(400)], per_frame=100))
    data[len(data) // 2] ^= 0xFF
    path = tmp_path / "h.jsonl.zst"
    path.write_bytes(bytes(data))
    with pytest.raises(HistoryError, match=r"h.jsonl.zst:\d+: not valid zstd"):
        list(iter_rows(path))


_KILLED_WRITER = """
import os, signal, sys, time
from faultline.history import HistoryWriter
w = HistoryWriter(sys.argv[1])
print(w._writer.pid, flush=True)
w.append_many([(0, "invoke", "send", {"topic": "t", "partition": 0, "value": i}, None)
               for i in range(50)])  # one batch: a flush writes all of it
deadline = time.monotonic() + 30
while os.path.getsize(sys.argv[1]) == 0 and time.monotonic() < deadline:
    time.sleep(0.01)  # polls the condition: the frame writer has written a frame
w.append(0, "invoke", "send", {"topic": "t", "partition": 0, "value": 50})
os.kill(os.getpid(), int(sys.argv[2]))
try:
    time.sleep(30)  # a Ctrl-C ends the sleep
finally:
    w.close()  # as a run does, on its way out
"""


def run_killed_writer(path: Path, sig: signal.Signals, *, group: bool = False) -> int:
    """Run _KILLED_WRITER until ``sig`` ends it (sent by itself or, with ``group``, to its
    process group, as a terminal's Ctrl-C is); wait for its frame writer; return how it
    ended."""
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(path),
                             str(0 if group else sig)],
                            stdout=subprocess.PIPE, process_group=0)
    assert proc.stdout is not None
    writer = int(proc.stdout.readline())
    if group:
        assert wait_until(lambda: path.stat().st_size > 0, time.monotonic() + 30)
        time.sleep(0.1)  # the last append made, not yet flushed
        os.killpg(proc.pid, sig)
    code = proc.wait(30)
    assert wait_until(lambda: not alive(writer), time.monotonic() + 30), "the frame writer ends"
    return code


def test_a_killed_writer_leaves_a_readable_prefix_of_whole_frames(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl.zst"
    assert run_killed_writer(path, signal.SIGKILL) == -signal.SIGKILL
    rr = ReadResult()
    got = [o.value["value"] for o in read_history(path, rr)]
    assert got[:50] == list(range(50)) and len(got) in (50, 51) and rr.truncated is False


def test_a_ctrl_c_leaves_the_whole_history(tmp_path: Path) -> None:
    """A Ctrl-C reaches the run's whole process group; the frame writer, in a group of its
    own, is still there to write what the run hands it on its way out."""
    path = tmp_path / "history.jsonl.zst"
    assert run_killed_writer(path, signal.SIGINT, group=True) != 0
    rr = ReadResult()
    got = [o.value["value"] for o in read_history(path, rr)]
    assert got == list(range(51)) and rr.truncated is False


def test_a_frame_writer_that_fails_is_one_clear_error_at_close(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl.zst"
    path.symlink_to("/dev/full")  # every write: no space left on device
    w = HistoryWriter(path)
    w.append(0, "invoke", "send", {"topic": "t", "partition": 0, "value": 0})
    with pytest.raises(HistoryError, match=r"history\.jsonl\.zst: writing the history failed: "
                       r".*No space left on device"):
        w.close()


def test_frames_compressed_outside_the_lock_reach_the_file_in_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Appends go on while a frame is compressed; the frames still land in index order."""
    monkeypatch.setattr("faultline.history.writer.FRAME_BYTES", 2048)  # a frame every ~20 appends
    path = tmp_path / "history.jsonl.zst"

    def appender(w: HistoryWriter, process: int) -> None:
        for i in range(1500):
            w.append_many([(process, "invoke", "send", {"topic": "t", "partition": 0, "value": i}, None)])

    with HistoryWriter(path) as w:
        threads = [threading.Thread(target=appender, args=(w, p)) for p in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    rows = list(iter_rows(path))
    assert [r["index"] for r in rows] == list(range(6000))
    assert [r["time"] for r in rows] == sorted(r["time"] for r in rows)
    assert len(frames(path.read_bytes())) > 100


@pytest.mark.parametrize("name", ["history.jsonl.zst", "history.jsonl"])
def test_a_followed_history_is_read_whole_while_it_is_written(tmp_path: Path, name: str) -> None:
    """A reader following a history its writer still appends to waits at its end (also
    before the first byte, and in the middle of a frame or a line), and stops once told
    the writer closed it, having read what the closed file holds."""
    path = tmp_path / name
    writer = HistoryWriter(path)
    closed = threading.Event()
    got: list[dict[str, Any]] = []
    read = ReadResult()
    reader = threading.Thread(target=lambda: got.extend(iter_rows(path, read, follow=closed.is_set)))
    reader.start()
    for i in range(400):
        writer.append_many([(0, "invoke", "send", {"topic": "t", "partition": 0, "value": i}, None),
                            (0, "ok", "send", {"topic": "t", "partition": 0, "value": i, "offset": i},
                             None)])
        if i % 100 == 0:
            time.sleep(0.3)  # past FLUSH_S: the reader waits with part of the history
    assert reader.is_alive(), "it waits for more until the history is closed"
    writer.close()
    closed.set()
    reader.join(10)
    assert not reader.is_alive() and not read.truncated
    assert got == list(iter_rows(path)) and len(got) == 800


def nemesis_line(i: int, size: int) -> bytes:
    """A nemesis op of index ``i`` whose line is ``size`` bytes, newline included."""
    def of(pad: str) -> bytes:
        return orjson.dumps(line(i, p="nemesis", typ="info", f="kill", value={"pad": pad})) + b"\n"
    return of("x" * (size - len(of(""))))


@pytest.mark.parametrize("name", ["h.jsonl", "h.jsonl.zst"])
def test_a_line_of_the_limit_is_read_and_a_longer_one_is_refused_naming_it(tmp_path: Path,
                                                                          name: str) -> None:
    """Found by review: a 300 MB line was read, in 23 s (what was read of it copied again
    for every MB read) and at 2.7 times its size in memory."""
    path = tmp_path / name
    pack = zstandard.ZstdCompressor().compress if name.endswith(".zst") else bytes
    first = orjson.dumps(line(0)) + b"\n"
    path.write_bytes(pack(first + nemesis_line(1, MAX_LINE_BYTES)))
    assert [r["index"] for r in iter_rows(path)] == [0, 1]
    path.write_bytes(pack(first + nemesis_line(1, MAX_LINE_BYTES + 1)))
    with pytest.raises(HistoryError, match=rf"^{path}:2: a line longer than {MAX_LINE_BYTES} bytes "
                                           r"\(docs/history.md's limit\): no run writes one$"):
        list(iter_rows(path))


def test_a_zstd_bomb_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    """Found by review: 64 KiB of history.jsonl.zst decompressed to 2.1 GB in one call."""
    path = tmp_path / "h.jsonl.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(orjson.dumps(line(0)) + b"\n" + b" " * (256 << 20)))
    assert path.stat().st_size < 64 << 10
    tracemalloc.start()
    try:
        with pytest.raises(HistoryError, match=r"h.jsonl.zst:2: a line longer than"):
            list(iter_rows(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * MAX_LINE_BYTES


def test_a_frame_past_its_limit_is_refused_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A frame is held to MAX_FRAME_BYTES (here made small) as it decompresses, exactly."""
    rows = [line(i) for i in range(50)]
    data = b"".join(orjson.dumps(r) + b"\n" for r in rows)
    path = tmp_path / "h.jsonl.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(data))
    monkeypatch.setattr(reader, "MAX_FRAME_BYTES", len(data))
    assert list(iter_rows(path)) == rows
    monkeypatch.setattr(reader, "MAX_FRAME_BYTES", len(data) - 1)
    with pytest.raises(HistoryError, match=rf"h.jsonl.zst:1: a zstd frame that decompresses to more "
                                           rf"than {len(data) - 1} bytes \(docs/history.md's limit\)"):
        list(iter_rows(path))


def test_a_line_there_is_no_memory_to_parse_is_no_invalid_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by review: under a memory limit, a valid line was "not valid JSON (Not enough
    memory to allocate buffer for parsing ...)", orjson's word for it, blaming the history
    for what the machine lacked. (Here orjson says so on demand: under a real limit it may
    as well crash.)"""
    def no_memory(raw: bytes) -> Any:
        raise orjson.JSONDecodeError("Not enough memory to allocate buffer for parsing", "", 0)

    monkeypatch.setattr(reader.orjson, "loads", no_memory)
    with pytest.raises(MemoryError):
        reader.parse_line("h.jsonl", 2, b'{"index": 1}\n')


def test_importing_the_history_loads_no_compiler() -> None:
    """The op model, writer and readers are light: whoever journals or reads ops (a
    workload, a nemesis, the frame writer's child) does not load numba; only the
    checkers' compiled pairing does."""
    code = ("import sys, faultline.history; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numba', 'llvmlite')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
