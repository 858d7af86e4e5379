"""White-box invariants on synthetic inputs: each passes on a good timeline and fails on
a broken one; results.json validates against the schema with and without white_box;
a broken metadata.jsonl is one line, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from faultline.checkers.guarantees import GuaranteeConfig
from faultline.checkers.results_file import check_run
from faultline.checkers.verdict import QueueFacts
from faultline.checkers.whitebox import (
    MAX_INVARIANT_EXAMPLES,
    BrokerFiles,
    Invariant,
    check_elections,
    check_hw_le_leo,
    check_hw_monotonic,
    check_replicas_agree,
    check_white_box,
    leader_changes,
    replicas_at,
)
from faultline.cli import main
from faultline.spec import TestSpec, TopicSpec
from tests.e2e.report_runs import Scenario, make_run
from tests.unit.test_schemas import RESULTS

T = "fl-queue"
#: A topic without and with unclean leader election.
CLEAN, UNCLEAN = GuaranteeConfig(), GuaranteeConfig(unclean_leader_election_enable=True)


def part(offset: int, leader: int | None, isr: list[int], elr: list[int] | None = None,
         lke: list[int] | None = None, epoch: int = 0, type_: str = "partition-change") -> dict[str, Any]:
    """A metadata.jsonl line of partition 0, with its effective state."""
    return {"offset": offset, "time": offset * 1_000_000_000, "type": type_, "topic": T, "partition": 0,
            "leader": leader, "isr": isr, "elr": elr or [], "last_known_elr": lke or [],
            "leader_epoch": epoch, "raw": {}}


def test_elections_from_isr_and_elr_hold() -> None:
    md = [part(0, 1, [1, 2, 3], type_="partition"), part(1, 2, [2, 3], epoch=1),
          part(2, None, [], elr=[2, 3], epoch=2), part(3, 3, [3], elr=[2], epoch=3)]
    changes = leader_changes(md, T)
    assert [(c["from"], c["to"], c["kind"], c["epoch"]) for c in changes] == [
        (1, 2, "isr", 1), (2, None, "offline", 2), (None, 3, "elr", 3)]
    inv = check_elections(changes, CLEAN)
    assert (inv.checked, inv.violations, inv.status) == (2, 0, "pass")


def test_an_unclean_election_is_a_violation_only_when_unclean_is_disabled() -> None:
    md = [part(0, 1, [1, 2, 3], type_="partition"), part(1, 1, [1], epoch=0), part(2, None, [], epoch=1),
          part(3, 3, [3], epoch=2)]
    changes = leader_changes(md, T)
    assert changes[-1]["kind"] == "unclean"
    bad = check_elections(changes, CLEAN)
    assert (bad.violations, bad.status) == (1, "fail")
    assert "unclean election of n3 (epoch 2)" in bad.examples[0]["what"] and bad.examples[0]["partition"] == 0
    ok = check_elections(changes, UNCLEAN)
    assert (ok.violations, ok.permitted, ok.status) == (0, 1, "pass")


def test_a_last_known_leader_election_is_unclean_but_permitted() -> None:
    md = [part(0, 3, [3], type_="partition"), part(1, None, [], elr=[3], lke=[3], epoch=1),
          part(2, None, [], elr=[], lke=[3], epoch=1), part(3, 3, [3], epoch=2)]
    changes = leader_changes(md, T)
    assert changes[-1]["kind"] == "last-known-leader"
    inv = check_elections(changes, CLEAN)
    assert (inv.violations, inv.permitted) == (0, 1)


def test_the_last_known_leader_elected_past_a_non_empty_elr_is_unclean() -> None:
    """KIP-966 elects the last known leader only with ISR and ELR both empty: elected
    while the ELR still holds another replica, it is an unclean election."""
    md = [part(0, 3, [3], type_="partition"), part(1, None, [], elr=[2], lke=[3], epoch=1),
          part(2, 3, [3], epoch=2)]
    changes = leader_changes(md, T)
    assert changes[-1]["kind"] == "unclean"
    bad = check_elections(changes, CLEAN)
    assert (bad.violations, bad.permitted, bad.status) == (1, 0, "fail")


def obs(t: int, hw: int | None, leo: dict[str, int | None] | None = None,
        ckpt: dict[str, int | None] | None = None, p: int = 0, epoch: int | None = None) -> dict[str, Any]:
    """A sample; ``epoch`` the leader epoch of the answer's ``hw`` (None: a sample of a
    file written before it was recorded)."""
    line = {"time": t, "topic": T, "partition": p, "leader": 1, "isr": [1, 2], "hw": hw,
            "leo": leo or {}, "hw_checkpoint": ckpt or {}}
    return line if epoch is None else {**line, "hw_epoch": epoch}


def test_hw_le_leo_compares_a_checkpoint_with_the_next_leo() -> None:
    # 120 > 110 within one sample is not certain (the reads are not atomic), and the next
    # sample's LEO 130 covers it: no violation
    good = [obs(0, 100, {"1": 110}, {"1": 120}), obs(1, 120, {"1": 130}, {"1": 125})]
    inv = check_hw_le_leo(good, T, {})
    assert (inv.checked, inv.violations) == (1, 0)
    bad = [obs(0, 100, {"1": 110}, {"1": 150}), obs(1, 120, {"1": 130}, {})]
    inv = check_hw_le_leo(bad, T, {})
    assert inv.violations == 1 and "n1's HW checkpoint 150 above its LEO 130" in inv.examples[0]["what"]
    assert check_hw_le_leo(bad, T, {1: 0}).checked == 0  # node 1's data was destroyed at 0
    # destroyed between the checkpoint's sample and the LEO's (a real run: lose-unflushed
    # cut n3 back to 0 after its checkpoint said 20484): not checked either
    assert check_hw_le_leo(bad, T, {1: 1}).checked == 0
    assert check_hw_le_leo(bad, T, {1: 2}).violations == 1


def test_client_hw_never_moves_backwards() -> None:
    assert check_hw_monotonic([obs(0, 5), obs(1, None), obs(2, 5), obs(3, 9)], T, set()).violations == 0
    inv = check_hw_monotonic([obs(0, 5), obs(1, 9), obs(2, 7)], T, set())
    assert (inv.checked, inv.violations) == (2, 1) and "HW 9" in inv.examples[0]["what"]
    assert check_hw_monotonic([obs(0, 9), obs(1, 7)], T, {0}).permitted == 1
    assert check_hw_monotonic([obs(0, 9), obs(1, 8)], T, set()).violations == 1  # one offset back


def hw_breaks(*samples: tuple[int, int | None]) -> list[int]:
    """The times of the hw-monotonic breaks of samples (HW, its leader epoch), one a second."""
    inv = check_hw_monotonic([obs(t, hw, epoch=e) for t, (hw, e) in enumerate(samples)], T, set())
    return [x["time"] for x in inv.examples]


def test_a_deposed_leaders_stale_hw_is_no_break() -> None:
    """Found by review: in a network partition the observer's ListOffsets can still reach
    the old leader, cut off from the controller: it still thinks it leads (under the old
    epoch) and answers with the HW it had, below the new leader's. That read as the HW
    moving back, and made a run whose brokers did nothing wrong unknown
    (broker-state-disagrees). The answer's leader epoch tells the stale answer apart."""
    assert hw_breaks((100, 5), (150, 6), (120, 5), (160, 6)) == []
    assert hw_breaks((100, 5), (150, 6), (120, 5), (140, 6)) == [3], "epoch 6 went back from 150"
    assert hw_breaks((150, 6), (160, 6), (140, 6)) == [2], "the same epoch"
    assert hw_breaks((150, 5), (140, 6)) == [1], "a later epoch below an earlier one's HW"
    assert hw_breaks((100, 5), (150, 6), (155, 5), (152, 6)) == [3], (
        "the deposed leader showed 155 committed: the new one may not show less")
    # a sample without an epoch is compared both ways, as every sample was before
    assert hw_breaks((150, 6), (120, None)) == [1]
    assert hw_breaks((150, None), (120, 5)) == [1]
    assert hw_breaks((150, 6), (120, -1)) == [1], "no epoch, as the schema has none below 0"
    assert hw_breaks((5, None), (9, None), (7, None), (8, None)) == [2]


#: The metadata log's last ISR of partition 0: every replica (check_replicas_agree compares
#: a replica outside it only below its own checkpointed HW).
ALL_IN_ISR = {0: frozenset({1, 2, 3})}


def rep(node: int, batches: list[list[int]], ckpt: int | None = None) -> dict[str, Any]:
    return {"topic": T, "partition": 0, "node": node, "log_start_offset": batches[0][0],
            "log_end_offset": batches[-1][1] + 1, "hw_checkpoint": ckpt, "batches": batches}


def test_replicas_agree_below_the_hw_only() -> None:
    a = rep(1, [[0, 4, 0, 11], [5, 9, 0, 22], [10, 14, 1, 33]])
    b = rep(2, [[0, 4, 0, 11], [5, 9, 0, 22], [10, 12, 2, 99]])  # differs above HW 10
    inv = check_replicas_agree([a, b], T, {0: 10}, set(), ALL_IN_ISR)
    assert (inv.checked, inv.violations) == (2, 0)
    c = rep(3, [[0, 4, 0, 11], [5, 9, 1, 23]])  # differs below the HW
    inv = check_replicas_agree([a, c], T, {0: 10}, set(), ALL_IN_ISR)
    assert inv.violations == 1 and inv.examples[0]["offset"] == 5 and inv.examples[0]["nodes"] == [1, 3]
    # no HW known: nothing checked
    assert check_replicas_agree([a, c], T, {0: None}, set(), ALL_IN_ISR).checked == 0
    assert check_replicas_agree([a, rep(3, c["batches"], ckpt=10)], T, {}, {0}, ALL_IN_ISR).permitted == 1


def test_a_gap_in_either_replica_is_a_difference() -> None:
    """Found by review: only the first replica's batches were walked, so a batch the first
    lacked (a gap in the lower node's log) went unseen."""
    full = rep(1, [[0, 2, 0, 7], [3, 5, 0, 8], [6, 9, 0, 9]])
    gap = rep(2, [[0, 2, 0, 7], [6, 9, 0, 9]])
    for pair in ([full, gap], [{**gap, "node": 1}, {**full, "node": 2}]):
        inv = check_replicas_agree(pair, T, {0: 10}, set(), ALL_IN_ISR)
        assert inv.violations == 1 and inv.examples[0]["offset"] == 3
        assert "no batch starting at 3" in inv.examples[0]["what"]


def test_results_validate_with_and_without_white_box(tmp_path: Path) -> None:
    plain = make_run(tmp_path / "plain", Scenario(metadata=False, observations=False))
    res = json.loads((plain.path / "results.json").read_text())
    assert "white_box" not in res
    RESULTS.validate(res)
    run = make_run(tmp_path / "white")
    res = json.loads((run.path / "results.json").read_text())
    RESULTS.validate(res)
    assert res["white_box"]["valid"] is True
    assert [i["name"] for i in res["white_box"]["invariants"]] == [
        "leader-from-isr-or-elr", "hw-le-leo", "hw-monotonic", "replicas-agree-below-hw"]
    assert [(c["from"], c["to"], c["kind"]) for c in res["white_box"]["leader_changes"]] == [(2, 3, "isr")]


def test_a_white_box_violation_makes_a_valid_run_unknown(tmp_path: Path) -> None:
    """The history and the brokers disagree: not valid, not a loss (was: stayed valid)."""
    run = make_run(tmp_path / "r", Scenario(kills=(), lost_per_kill=0))
    with (run.path / "metadata.jsonl").open("a") as fh:  # an unclean election of p0
        for line in (part(90, None, [], epoch=1), part(91, 3, [3], epoch=2)):
            fh.write(json.dumps(line) + "\n")
    result = check_run(run.path)
    assert result.valid == "unknown"
    assert [u["kind"] for u in result.unknown if u["affects_verdict"]] == ["broker-state-disagrees"]
    white = result.extra["white_box"]
    assert white["valid"] is False and white["invariants"][0]["violations"] == 1
    RESULTS.validate(result.to_json())


@pytest.mark.parametrize("stale_epoch, valid", [(0, True), (1, "unknown")])
def test_a_stale_hw_answer_leaves_a_valid_run_valid(tmp_path: Path, stale_epoch: int,
                                                    valid: bool | str) -> None:
    """The run's p0 gets a new leader epoch at 15 s; at 20.5 s the old leader answers with
    the HW of 14 s under its epoch 0: no break, the run stays valid. The same answer
    under epoch 1 is a break, and the run unknown."""
    run = make_run(tmp_path / "r", Scenario(kills=(), lost_per_kill=0))
    path = run.path / "observations.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    p0 = {x["time"] // 10**9: x for x in lines if x["partition"] == 0}
    for sec, x in p0.items():
        x["hw_epoch"] = 0 if sec < 15 else 1
    assert p0[14]["hw"] < p0[20]["hw"]
    stale = {**p0[20], "time": p0[20]["time"] + 5 * 10**8, "hw": p0[14]["hw"], "hw_epoch": stale_epoch}
    path.write_text("".join(json.dumps(x) + "\n" for x in [*lines, stale]))
    result = check_run(run.path)
    assert result.valid == valid
    hw = result.extra["white_box"]["invariants"][2]
    assert (hw["name"], hw["violations"]) == ("hw-monotonic", 0 if valid is True else 1)


@pytest.mark.parametrize("damage", ['{"offset": 1, "type": "x"\n', '[1, 2]\n',
                                    '{"offset": "1", "type": "x"}\n',
                                    '{"offset": 1, "type": "partition", "topic": "fl-queue"}\n'])
def test_a_broken_metadata_file_is_one_line(tmp_path: Path, damage: str) -> None:
    run = make_run(tmp_path / "r")
    with (run.path / "metadata.jsonl").open("a") as fh:
        fh.write(damage)
    out = CliRunner().invoke(main, ["check", str(run.path)])
    assert out.exception is None or isinstance(out.exception, SystemExit), out.exception
    (line,) = [x for x in out.output.splitlines() if "white-box input unreadable" in x]
    assert "metadata.jsonl:" in line
    res = json.loads((run.path / "results.json").read_text())
    RESULTS.validate(res)
    white = res["white_box"]
    assert white["valid"] == "unknown" and white["invariants"][0]["status"] == "not-checked"


@pytest.mark.parametrize("damage", [{"leo": [1]}, {"hw_checkpoint": "x"}, {"leo": {"n1": 5}},
                                    {"hw_checkpoint": {"1": "5"}}])
def test_a_broken_observations_file_is_one_line(tmp_path: Path, damage: dict[str, Any]) -> None:
    """Found by review: a sample whose ``leo`` or ``hw_checkpoint`` was no object of node
    ids to offsets was a traceback out of ``faultline check``."""
    run = make_run(tmp_path / "r")
    with (run.path / "observations.jsonl").open("a") as fh:
        for t in (10**12, 10**12 + 1):  # two samples: hw-le-leo reads the pair
            fh.write(json.dumps({**obs(t, 1, {"1": 5}, {"1": 5}), **damage}) + "\n")
    out = CliRunner().invoke(main, ["check", str(run.path)])
    assert out.exception is None or isinstance(out.exception, SystemExit), out.exception
    (line,) = [x for x in out.output.splitlines() if "white-box input unreadable" in x]
    assert "observations.jsonl:" in line
    white = json.loads((run.path / "results.json").read_text())["white_box"]
    assert white["valid"] == "unknown"


def test_no_white_box_files_no_white_box(tmp_path: Path) -> None:
    spec = TestSpec(topic=TopicSpec(name=T))
    assert check_white_box(spec, BrokerFiles.read(tmp_path), QueueFacts(GuaranteeConfig(), {}, {})) is None


def test_a_violation_is_among_the_examples_however_many_breaks_were_permitted() -> None:
    """An invariant broken MAX_INVARIANT_EXAMPLES times where permitted, then once where not: it is
    VIOLATED, and its examples must show that violation, not only the permitted breaks."""
    inv = Invariant("hw-monotonic")
    for i in range(MAX_INVARIANT_EXAMPLES):
        inv.add({"time": i, "partition": 0, "what": f"permitted {i}"}, permitted=True)
    inv.add({"time": MAX_INVARIANT_EXAMPLES, "partition": 1, "what": "forbidden"})
    assert inv.status == "fail" and len(inv.examples) == MAX_INVARIANT_EXAMPLES
    assert [e["what"] for e in inv.examples if not e["permitted"]] == ["forbidden"]


def _cut_observations(run_path: Path, extra: tuple[dict[str, Any], ...] = ()) -> int:
    """Append ``extra`` samples and then half a line, as a run that died writing its
    observations leaves them; return the cut line's number."""
    path = run_path / "observations.jsonl"
    lines = path.read_text().splitlines(keepends=True) + [json.dumps(x) + "\n" for x in extra]
    path.write_text("".join(lines) + lines[-1][: len(lines[-1]) // 2])
    return len(lines) + 1


def test_a_cut_last_observation_ends_a_readable_prefix(tmp_path: Path) -> None:
    """Found by review: a run that died writing observations.jsonl left it unreadable as a
    whole (the history's reader takes a cut last line for the end of its prefix): its HW
    invariants went unchecked. Now the lines before the cut are checked, the cut line
    named, and the white box stays unknown for what it lost."""
    run = make_run(tmp_path / "r", Scenario(kills=(), lost_per_kill=0))
    cut = _cut_observations(run.path)
    result = check_run(run.path)
    white = result.extra["white_box"]
    hw = {i["name"]: i for i in white["invariants"]}
    assert hw["hw-monotonic"]["status"] == hw["hw-le-leo"]["status"] == "pass"
    assert hw["hw-monotonic"]["checked"] > 0
    assert white["valid"] == "unknown"
    assert white["errors"] == [f"{run.path / 'observations.jsonl'}:{cut}: the last line was cut "
                               "(the run died writing it); only the lines before it were checked"]
    assert result.valid is True  # the observations judge the white box, not the history
    RESULTS.validate(result.to_json())


def test_a_forbidden_hw_drop_before_a_cut_line_still_disagrees_with_the_history(tmp_path: Path) -> None:
    """The readable prefix shows the HW clients see going back within an epoch: the run
    is no longer valid, cut line or not (it was, the whole file set aside)."""
    run = make_run(tmp_path / "r", Scenario(kills=(), lost_per_kill=0))
    samples = [json.loads(x) for x in (run.path / "observations.jsonl").read_text().splitlines()]
    last = max((x for x in samples if x["partition"] == 0), key=lambda x: x["time"])
    early = min((x for x in samples if x["partition"] == 0 and x["hw"]), key=lambda x: x["time"])
    assert early["hw"] < last["hw"]
    _cut_observations(run.path, ({**last, "time": last["time"] + 1, "hw": early["hw"]},))
    result = check_run(run.path)
    assert result.extra["white_box"]["valid"] is False
    assert result.valid == "unknown"
    assert [u["kind"] for u in result.unknown if u["affects_verdict"]] == ["broker-state-disagrees"]


def test_a_bad_observation_line_before_the_last_is_one_line_and_no_prefix(tmp_path: Path) -> None:
    run = make_run(tmp_path / "r")
    path = run.path / "observations.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join([*lines[:5], lines[5][:20] + "\n", *lines[6:]]))
    out = CliRunner().invoke(main, ["check", str(run.path)])
    assert out.exception is None or isinstance(out.exception, SystemExit), out.exception
    (line,) = [x for x in out.output.splitlines() if "white-box input unreadable" in x]
    assert "observations.jsonl:6: not valid JSON" in line
    white = json.loads((run.path / "results.json").read_text())["white_box"]
    assert white["valid"] == "unknown"
    assert {i["name"]: i["status"] for i in white["invariants"]}["hw-monotonic"] == "not-checked"


def test_a_story_reads_what_replicas_hold_whatever_items_their_batches_carry() -> None:
    """Lines of four, eight and nine items (the batch's kind, since transactions were
    summarized) are each told by their offsets, epoch, CRC and producer."""
    reps = [{"node": n, "log_end_offset": 5, "batches": [[0, 4, 1, 99, *extra]]}
            for n, extra in ((1, []), (2, [7, 0, 0, 4]), (3, [7, 0, 0, 4, "txn"]))]
    assert replicas_at(reps, 2) == ("the replicas' logs after the run hold at offset 2: batch 0..4 "
                                    "(leader epoch 1, crc 99) on n1; batch 0..4 (leader epoch 1, crc 99, "
                                    "producer id 7 epoch 0 sequences 0..4) on n2, n3")
