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

from faultline.checkers.results_file import check_run
from faultline.report.page import build_report

pytestmark = pytest.mark.e2e

STORED = Path(__file__).parent / "data" / "kill-partition"
Ops = list[dict[str, Any]]


def _variant(tmp_path: Path, edit: Callable[[Ops], Ops],
             acks: str | None = None, without: tuple[str, ...] = (),
             cluster: dict[str, Any] | None = None) -> tuple[dict[str, Any], str]:
    """A copy of the stored run with its history edited (the files ``without`` removed,
    ``cluster`` merged into cluster.json), checked and reported: its results.json and
    its page (scripts and styles dropped)."""
    run_dir = tmp_path / "run"
    shutil.copytree(STORED, run_dir)
    for name in ("results.json", *without):
        (run_dir / name).unlink()
    if cluster is not None:
        facts = json.loads((run_dir / "cluster.json").read_text())
        (run_dir / "cluster.json").write_text(json.dumps({**facts, **cluster}))
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


def _acked_never_read(partition: int, n: int, first: int, before: str = "drain") -> Callable[[Ops], Ops]:
    """``n`` sends to ``partition`` acknowledged just before the first op ``before`` (the
    drain, or ``start``: the restart of node 2, killed as fl-queue/1's leader, whose
    election the metadata log shows after it), by a new process, whose values no drain
    reads: lost writes."""
    def edit(ops: Ops) -> Ops:
        at = next(i for i, op in enumerate(ops) if op["f"] == before)
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
    """acks=1: fl-queue/1's leader was hit, and an election moved it after its 3 lost
    writes, so they are permitted; fl-queue/0's was not, so its one is a violation. The
    page must say which guarantee broke (the forbidden reason, not the permitted one),
    and not call all 4 forbidden."""
    results, page = _variant(tmp_path, lambda ops: _acked_never_read(0, 1, 100_000)(
        _acked_never_read(1, 3, 200_000, before="start")(ops)), acks="1")
    assert results["valid"] is False and results["anomaly_counts"]["lost-write"] == 4
    assert "lost-write" in results["permitted"] and results["violations"] == ["lost-write"]
    forbidden = results["forbidden_reasons"]["lost-write"]
    # fl-queue/2's leader was isolated, but the metadata log shows it kept leading (no
    # election): it kept its log, so a loss there would be forbidden too
    assert "(on fl-queue/0, fl-queue/2)" in forbidden
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


def _unwitnessed(ops: Ops) -> Ops:
    """The nemesis ops no longer say who led each partition when they struck."""
    for op in ops:
        if op["process"] == "nemesis" and isinstance(op.get("value"), dict):
            op["value"].pop("leaders", None)
    return ops


def test_a_loss_permitted_only_on_an_assumption_is_not_shown_as_permitted(tmp_path: Path) -> None:
    """acks=1, fl-queue/1 lost 3 writes, and with no metadata log and no leaders
    snapshot in the nemesis ops the fault on its leader is assumed, not witnessed: the
    checker says unknown (permitted-on-assumption). The page may give the excuse only as
    an assumption: not as "seen, permitted", nor as the partition's established reason,
    nor under the examples' own "Permitted: ..." explanations."""
    results, page = _variant(tmp_path, lambda ops: _acked_never_read(1, 3, 200_000)(_unwitnessed(ops)),
                             acks="1", without=("metadata.jsonl",))
    assert results["valid"] == "unknown" and results["violations"] == []
    [entry] = [u for u in results["unknown"] if u["kind"] == "permitted-on-assumption"]
    assert entry["partition"] == 1
    assert "UNKNOWN" in _header(page)
    expected = page[page.index('id="expected"'):page.index('id="timeline"')]
    row = _text(expected[expected.index('href="#anomaly-lost-write"'):].split("</tr>", 1)[0])
    assert "seen, permitted" not in row and "UNKNOWN" in row, row
    assert "not established (permitted-on-assumption fl-queue/1)" in row, row
    part = _text(_partition_row(page, "fl-queue/1"))
    assert "not established (permitted-on-assumption fl-queue/1): permitted only if acks=1" in part, part
    section = page[page.index('id="anomaly-lost-write"'):]
    summary = _text(section[:section.index("</summary>")])
    assert "UNKNOWN" in summary and "not established" in summary, summary
    examples = re.findall(r'<tr class="example[^"]*" data-anomaly="lost-write".*?</tr>', section, flags=re.S)
    assert len(examples) == 3
    assert all("Whether it is permitted is not established (permitted-on-assumption fl-queue/1)"
               in _text(x) for x in examples)
    assert entry["anomalies"] == ["lost-write"]  # which types rest on the assumption
    # from a checker that did not name them: every type seen there and permitted there
    del entry["anomalies"]
    run_dir = tmp_path / "run"
    (run_dir / "results.json").write_text(json.dumps(results))
    page = build_report(run_dir).read_text()
    assert "not established (permitted-on-assumption fl-queue/1)" in _text(_partition_row(page, "fl-queue/1"))


def test_a_loss_judged_with_eligible_leader_replicas_the_cluster_lacked_is_not_shown_as_permitted(
        tmp_path: Path) -> None:
    """acks=1, fl-queue/1's leader was hit and it lost 3 writes, judged with eligible
    leader replicas (Kafka 4.3) while cluster.json says the cluster ran without them: the
    checker says unknown (broker-state-disagrees), so whether the loss is permitted is
    not established, and the page must not say "seen, permitted"."""
    results, page = _variant(tmp_path, _acked_never_read(1, 3, 200_000, before="start"), acks="1",
                             cluster={"eligible_leader_replicas": False})
    assert results["valid"] == "unknown" and results["violations"] == []
    assert [u["kind"] for u in results["unknown"] if u["affects_verdict"]] == ["broker-state-disagrees"]
    expected = page[page.index('id="expected"'):page.index('id="timeline"')]
    row = _text(expected[expected.index('href="#anomaly-lost-write"'):].split("</tr>", 1)[0])
    assert "seen, permitted" not in row and "not established (broker-state-disagrees)" in row, row
    part = _text(_partition_row(page, "fl-queue/1"))
    assert "not established (broker-state-disagrees): permitted only if acks=1" in part, part


def test_a_forbidden_loss_is_not_hidden_among_a_thousand_permitted_ones(tmp_path: Path) -> None:
    """acks=1: fl-queue/1's leader was hit and it lost 1005 writes, permitted; fl-queue/0
    lost one, forbidden. results.json keeps 1000 examples: the forbidden one must be among
    them, and the page must show it first, marked, not as row 1000 of a scrolled table."""
    results, page = _variant(tmp_path, lambda ops: _acked_never_read(0, 1, 100_000)(
        _acked_never_read(1, 1005, 200_000, before="start")(ops)), acks="1")
    assert results["valid"] is False and results["anomaly_counts"]["lost-write"] == 1006
    kept = results["anomalies"]["lost-write"]
    assert len(kept) == 1000 and [e["value"] for e in kept if not e["permitted"]] == [100_000]
    section = page[page.index('id="anomaly-lost-write"'):]
    first = re.search(r'<tr class="example[^"]*" data-anomaly="lost-write".*?</tr>', section, flags=re.S)
    assert first is not None and 'data-value="100000"' in first.group(0)
    assert "VIOLATION" in _text(first.group(0))


def test_an_unknown_verdict_still_names_the_forbidden_anomaly_it_saw(tmp_path: Path) -> None:
    """A forbidden duplicate on fl-queue/0, judged with eligible leader replicas the
    cluster says it ran without: the verdict is unknown (broker-state-disagrees), but
    results.json still lists the violation, and the headline must not leave it unsaid."""
    results, page = _variant(tmp_path, _duplicate(0), cluster={"eligible_leader_replicas": False})
    assert results["valid"] == "unknown" and results["violations"] == ["duplicate"]
    header = _header(page)
    assert "UNKNOWN" in header and "duplicate ×1 seen where Kafka's guarantees" in header, header
    assert "broker-state-disagrees" in header, header
