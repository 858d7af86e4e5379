"""The report says no more than results.json does: variants of the stored real run
(``data/kill-partition``) with its history edited, checked by ``faultline check``'s own
function and reported. Each case is one a user meets after a night of runs: an
invalid run whose drain did not finish, a type forbidden on one partition and
permitted on another, sends that never completed."""

from __future__ import annotations

import html as htmllib
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from faultline.checkers.cli import check_run
from faultline.report.page import build_report

pytestmark = pytest.mark.e2e

STORED = Path(__file__).parent / "data" / "kill-partition"
Ops = list[dict[str, Any]]


def _variant(tmp_path: Path, edit: Callable[[Ops], Ops],
             acks: str | None = None) -> tuple[dict[str, Any], str]:
    """A copy of the stored run with its history edited, checked and reported: its
    results.json and its page as text (tags dropped, entities decoded)."""
    run_dir = tmp_path / "run"
    shutil.copytree(STORED, run_dir)
    (run_dir / "results.json").unlink()
    hist = run_dir / "history.jsonl"
    ops = edit([json.loads(line) for line in hist.read_text().splitlines()])
    for i, op in enumerate(ops):
        op["index"] = i
    hist.write_text("".join(json.dumps(op, separators=(",", ":")) + "\n" for op in ops))
    if acks is not None:
        spec = json.loads((run_dir / "test.json").read_text())
        spec["producer"].update(acks=acks, enable_idempotence=False)
        (run_dir / "test.json").write_text(json.dumps(spec))
    check_run(run_dir)
    page = build_report(run_dir).read_text()
    page = re.sub(r"<(script|style)\b.*?</\1>", "", page, flags=re.S)
    return json.loads((run_dir / "results.json").read_text()), page


def _text(fragment: str) -> str:
    return re.sub(r"\s+", " ", htmllib.unescape(re.sub(r"<[^>]+>", " ", fragment))).strip()


def _header(page: str) -> str:
    return _text(page[page.index('<header'):page.index("</header>")])


def _partition_row(page: str, name: str) -> str:
    row = page[page.index(f"<td>{name}</td>"):]
    return row[:row.index("</tr>")]


def _drains(ops: Ops, partition: int) -> list[dict[str, Any]]:
    return [op["value"] for op in ops if op["f"] == "drain" and op["type"] == "ok"
            and op["value"]["partition"] == partition]


def _no_last(partition: int) -> Callable[[Ops], Ops]:
    def edit(ops: Ops) -> Ops:
        for d in _drains(ops, partition):
            d.pop("last", None)
        return ops
    return edit


def _short(partition: int) -> Callable[[Ops], Ops]:
    """The drain of ``partition`` ends 10 records before what every replica holds."""
    def edit(ops: Ops) -> Ops:
        for d in _drains(ops, partition):
            d["records"] = d["records"][:-10]
            d["high_watermark"] -= 10
        return ops
    return edit


def _duplicate(partition: int) -> Callable[[Ops], Ops]:
    """The drain of ``partition`` reads its first value again at a new offset."""
    def edit(ops: Ops) -> Ops:
        for d in _drains(ops, partition):
            d["records"].append([d["records"][-1][0] + 1, d["records"][0][1]])
            d["high_watermark"] += 1
        return ops
    return edit


def _acked_never_read(partition: int, n: int, first: int) -> Callable[[Ops], Ops]:
    """``n`` sends to ``partition`` acknowledged just before the drain, by a new process,
    whose values no drain reads: lost writes."""
    def edit(ops: Ops) -> Ops:
        at = next(i for i, op in enumerate(ops) if op["f"] == "drain")
        t = ops[at - 1]["time"]
        proc = max(op["process"] for op in ops if isinstance(op["process"], int)) + 1
        new: Ops = []
        for k in range(n):
            v = {"topic": "fl-queue", "partition": partition, "value": first + k}
            new += [{"time": t, "process": proc, "type": "invoke", "f": "send", "value": v},
                    {"time": t, "process": proc, "type": "ok", "f": "send",
                     "value": {**v, "offset": 5000 + k}}]
        return ops[:at] + new + ops[at:]
    return edit


@pytest.mark.parametrize("undecided", ["incomplete", "short"])
def test_an_invalid_run_whose_drain_did_not_finish_claims_no_loss(tmp_path: Path, undecided: str) -> None:
    """A forbidden duplicate on fl-queue/0 makes the run invalid, while fl-queue/1's
    drain never finished (or stopped short of what every replica holds): its lost
    writes are undecided, so neither the headline nor its partition row may say none
    were lost."""
    cut = _no_last(1) if undecided == "incomplete" else _short(1)
    results, page = _variant(tmp_path, lambda ops: cut(_duplicate(0)(ops)))
    assert results["valid"] is False and results["violations"] == ["duplicate"]
    assert any(u["kind"].endswith("-drain") and u.get("partition") == 1 for u in results["unknown"])
    header = _header(page)
    assert "INVALID" in header
    assert "no acknowledged write lost" not in header, header
    assert "undecided" in header, header
    row = _text(_partition_row(page, "fl-queue/1"))
    assert not row.endswith(" 0"), row  # the lost-writes column of a partition not fully drained


def test_an_invalid_run_with_an_unfinished_drain_says_its_count_is_a_floor(tmp_path: Path) -> None:
    results, page = _variant(tmp_path, lambda ops: _no_last(1)(_acked_never_read(0, 1, 100_000)(ops)))
    assert results["valid"] is False and results["anomaly_counts"]["lost-write"] == 1
    assert "at least 1 acknowledged write lost" in _header(page)


def test_a_type_forbidden_on_one_partition_and_permitted_on_another(tmp_path: Path) -> None:
    """acks=1: fl-queue/1's leader was hit, so its 3 lost writes are permitted; fl-queue/0's
    was not, so its one is a violation. The page must say which guarantee broke (the
    forbidden reason, not the permitted one), and not call all 4 forbidden."""
    results, page = _variant(tmp_path, lambda ops: _acked_never_read(0, 1, 100_000)(
        _acked_never_read(1, 3, 200_000)(ops)), acks="1")
    assert results["valid"] is False and results["anomaly_counts"]["lost-write"] == 4
    assert "lost-write" in results["permitted"] and results["violations"] == ["lost-write"]
    forbidden = results["forbidden_reasons"]["lost-write"]
    assert "(on fl-queue/0)" in forbidden
    section = page[page.index('id="anomaly-lost-write"'):]
    summary = _text(section[:section.index("</summary>")])
    assert "VIOLATION" in summary and forbidden in summary, summary
    expected = page[page.index('id="expected"'):page.index('id="timeline"')]
    row = _text(expected[expected.index('href="#anomaly-lost-write"'):][:4000].split("</tr>", 1)[0])
    assert forbidden in row, row
    assert "lost-write ×4: forbidden" not in _header(page)
    assert "fl-queue/0" in _header(page)


def test_sends_that_never_completed_are_counted(tmp_path: Path) -> None:
    """A send whose completion the history lacks is neither ok, failed nor info: the
    page's send summary must not lose it."""
    def drop_one_ack(ops: Ops) -> Ops:
        k = next(i for i, op in enumerate(ops) if op["f"] == "send" and op["type"] == "ok")
        return ops[:k] + ops[k + 1:]
    results, page = _variant(tmp_path, drop_one_ack)
    assert results["stats"]["send_open"] == 1
    start = page.index('<div class="meta">')
    meta = _text(page[start:page.index("</div>", start)])
    assert "1 never completed" in meta, meta
