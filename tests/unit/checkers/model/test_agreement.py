"""The checker's guarantee envelope against the model's table, cell by cell.

The model's table for the default matrix is stored in the package
(``faultline/checkers/model/table.json``, written by ``faultline model --explore
--write``); ``test_every_stored_schedule_still_shows_its_anomaly`` replays every
stored schedule and ``test_a_small_search_finds_nothing_the_table_lacks`` re-explores
a sample of cells, so it cannot go stale. The matrix holds every cell twice, without
and with KIP-966 eligible leader replicas; each is compared with the checker's table
for the same setting (``GuaranteeConfig.eligible_leader_replicas``: Kafka < 4.1 and
>= 4.1), with the tokens a run of that cell gives the checker (:func:`checker_faults`).
For every cell, the anomalies the model can produce (restricted to
``MODEL_ANOMALIES``) are compared with ``guarantees.permitted``:

- model-only: the model shows it, the checker forbids it -> the checker would call
  legal Kafka behaviour a violation (a false alarm on a real run);
- checker-only: the checker permits it, the model never shows it -> the checker
  would let a real bug through.

Every difference must map to a reason in ``guarantees.BEYOND_MODEL`` (the test fails
on any other, and on a listed reason that no longer occurs);
``test_agreement_summary`` prints how many cells differ and why (``pytest -s``).
Before issue 17: 150 of 312 cells differed; the count is pinned in
:data:`DIFFERING_CELLS` so that a wider table shows here.
"""

from __future__ import annotations

import collections

import pytest

from faultline.checkers.faults_seen import fences
from faultline.checkers.guarantees import BEYOND_MODEL, GuaranteeConfig, permitted
from faultline.checkers.model.explore import LEADER_FAULT, Bound, legal_replay
from faultline.checkers.model.outcome import MODEL_ANOMALIES, outcome
from faultline.checkers.model.steps import STEP_KINDS, ModelStep
from faultline.checkers.model.table import (
    TABLE_BOUND,
    TARGETED,
    Cell,
    default_matrix,
    explore_cell,
    stored_table,
)
from faultline.checkers.partition_faults import DATA_LOSS_FAULTS, PartitionFaults
from faultline.faults import FAMILIES

#: Cells of the default matrix where model and checker differ, after issue 17 (40 at RF 3),
#: and with the RF 1 cells of issue 33 (32 more, every one acks=0).
DIFFERING_CELLS = 72


def checker_faults(cell: Cell) -> PartitionFaults:
    """The checker's faults for a run of a model cell: its fault kinds and leader fault,
    ``data_loss`` at its data-loss bound, ``faulted`` at its faulted bound (every replica
    when unbounded), and as many ``fenced`` when a kind may fence (the cell does not bound
    them apart: a ``partition`` cell isolates as well as cuts), but no more than its
    data-loss bound when wipe / lose-unflushed are its only such kinds."""
    touched = cell.replication_factor if cell.faulted is None else cell.faulted
    fencing = {kind for kind in cell.faults if fences(kind, {})}
    most = 0
    if fencing:  # wipe and lose-unflushed alone reach at most data_loss replicas
        most = (touched if fencing - DATA_LOSS_FAULTS or cell.data_loss is None
                else min(touched, cell.data_loss))
    return PartitionFaults(cell.faults - {LEADER_FAULT}, LEADER_FAULT in cell.faults, touched, most,
                           cell.data_loss or 0)


def checker_envelope(cell: Cell) -> frozenset[str]:
    cfg = GuaranteeConfig(acks=cell.acks, min_insync_replicas=cell.min_insync,
                          replication_factor=cell.replication_factor,
                          unclean_leader_election_enable=cell.unclean,
                          eligible_leader_replicas=cell.elr)
    return frozenset(permitted(cfg, checker_faults(cell))) & frozenset(MODEL_ANOMALIES)


def disagreements() -> dict[tuple[str, str], str]:
    """(cell key, anomaly) -> 'model-only' or 'checker-only'."""
    table = stored_table()
    out: dict[tuple[str, str], str] = {}
    for cell in default_matrix():
        model = frozenset(table[cell.key])
        checker = checker_envelope(cell)
        for name in model - checker:
            out[(cell.key, name)] = "model-only"
        for name in checker - model:
            out[(cell.key, name)] = "checker-only"
    return out


def _reason(d: tuple[str, str], kind: str) -> str | None:
    """The ``BEYOND_MODEL`` key that explains a difference; None if none does."""
    key, name = d
    if (kind == "checker-only" and name == "lost-write" and "acks=0" in key
            and ("leader-fault" not in key or key.startswith("rf=1 ")) and "toxics" not in key):
        return "acks0-no-promise"
    return None


def agreement_summary() -> str:
    """How many cells differ, and each difference's reason."""
    diffs = disagreements()
    cells = {key for key, _ in diffs}
    by_reason = collections.Counter(_reason(d, kind) for d, kind in diffs.items())
    lines = [f"{len(cells)} of {len(list(default_matrix()))} cells differ "
             f"({len(diffs)} cell x anomaly pairs)"]
    for reason, n in sorted(by_reason.items(), key=lambda x: str(x[0])):
        lines.append(f"  {n:4} {reason or 'UNEXPLAINED'}: {BEYOND_MODEL.get(reason or '', '')}")
    return "\n".join(lines)


def test_agreement_summary() -> None:
    summary = agreement_summary()
    print(summary)
    assert len({key for key, _ in disagreements()}) == DIFFERING_CELLS, summary


def test_checker_agrees_with_model_up_to_the_listed_reasons() -> None:
    unexplained = {d: kind for d, kind in disagreements().items() if _reason(d, kind) is None}
    assert unexplained == {}


def test_every_listed_reason_still_occurs() -> None:
    seen = {_reason(d, kind) for d, kind in disagreements().items()}
    assert set(BEYOND_MODEL) <= seen, f"no longer occurs, drop from BEYOND_MODEL: {set(BEYOND_MODEL) - seen}"


def test_every_targeted_schedule_is_beyond_the_bound_and_shows_something_somewhere() -> None:
    table = stored_table()
    stored = {text for found in table.values() for text in found.values()}
    for name, text in TARGETED.items():
        assert len(text.split()) > TABLE_BOUND.depth, name
        assert text in stored, f"{name} shows no anomaly the search lacks in any cell"


def test_stored_table_covers_the_default_matrix() -> None:
    assert {c.key for c in default_matrix()} <= set(stored_table())


def test_every_stored_schedule_still_shows_its_anomaly() -> None:
    stale = []
    for cell in default_matrix():
        bound = Bound(max_data_loss=cell.data_loss, max_faulted=cell.faulted)
        for name, text in stored_table()[cell.key].items():
            st = legal_replay(cell.model_config(), cell.faults, bound,
                              [ModelStep.parse(t) for t in text.split()])
            if st is None or name not in outcome(st).names:
                stale.append((cell.key, name, text))
    assert stale == []


def test_a_small_search_finds_nothing_the_table_lacks() -> None:
    for key in ("rf=3 acks=1 min.insync=2 unclean=false faults=kill+leader-fault",
                "rf=3 acks=all min.insync=2 unclean=false faults=leader-fault+wipe data-loss<=1",
                "rf=3 acks=all min.insync=2 unclean=false faults=leader-fault+wipe data-loss<=1 elr=true"):
        cell = next(c for c in default_matrix() if c.key == key)
        found = explore_cell(cell, Bound(depth=3, walks=50, walk_length=10, seed=3))
        assert set(found) <= set(stored_table()[key])


@pytest.mark.parametrize("elr", [False, True])
def test_with_one_replica_untouched_long_walks_lose_nothing_committed(elr: bool) -> None:
    # The multi-fault cells behind "kill(3) + wipe(1) with node 2 untouched": longer
    # walks than the table's find no committed loss, with or without ELR.
    for kinds in (("kill", "wipe", "leader-fault"), ("pause", "wipe", "leader-fault")):
        cell = Cell("all", 2, False, frozenset(kinds), 1, elr=elr, faulted=2)
        assert explore_cell(cell, Bound(depth=3, walks=800, walk_length=18, seed=7)) == {}
        assert stored_table()[cell.key] == {}


def test_an_untouched_follower_does_not_lag_out_of_a_bounded_cell() -> None:
    # Node 2 is never faulted but stops fetching until the leader drops it for lag; then
    # kill(3) + wipe(1) lose committed data. The faulted<=2 cell does not allow it: a lag
    # shrink counts as faulting the replica, so this is three replicas, not two.
    cell = Cell("all", 2, False, frozenset({"kill", "wipe", "leader-fault"}), 1, elr=True, faulted=2)
    text = ("produce fetch(2) fetch(3) fetch(2) fetch(3) produce fetch(3) fetch(3) "
            "tick tick tick crash(3) tick restart(3) wipe(1)")
    steps = [ModelStep.parse(t) for t in text.split(" ")]
    free = legal_replay(cell.model_config(), cell.faults, Bound(max_data_loss=1), steps)
    assert free is not None and "lost-write" in outcome(free).names
    assert free.faulted == frozenset({1, 2, 3})
    bounded = Bound(max_data_loss=1, max_faulted=2)
    assert legal_replay(cell.model_config(), cell.faults, bounded, steps) is None


def test_the_model_has_a_step_for_every_fault_family() -> None:
    # but clock, which permits nothing: the model has no wall clock for it to set off
    for family in FAMILIES.values():
        assert family.model_steps or family.name == "clock", family.name
        assert set(family.model_steps) <= set(STEP_KINDS), family.name


@pytest.mark.parametrize(("fault", "min_insync", "lost"), [
    ("cut(1,2)", 2, False), ("cut(1,2)", 1, True), ("pause(2)", 2, True)])
def test_with_elr_and_unclean_a_held_follower_is_elected_from_the_elr(
        fault: str, min_insync: int, lost: bool) -> None:
    # The model's side of the checker's fenced>=min.insync rule: 3 lags out, then 2 is
    # held (replication cut, controller link kept) until the ISR is the leader alone, and
    # the leader crashes. Held, 2 stays unfenced in the ELR and is elected: nothing is lost
    # at min.insync=2 (at 1 the leader alone was the ISR and acked alone). Paused, 2 is
    # fenced too, and 3, without the committed record, is elected uncleanly.
    cell = Cell("all", min_insync, True, frozenset({"kill", "pause", "partition", "leader-fault"}), elr=True)
    text = f"produce fetch(2) fetch(2) tick tick tick {fault} produce tick tick tick crash(1) tick produce"
    st = legal_replay(cell.model_config(), cell.faults, Bound(), [ModelStep.parse(t) for t in text.split()])
    assert st is not None
    assert ("lost-write" in outcome(st).names) == lost
