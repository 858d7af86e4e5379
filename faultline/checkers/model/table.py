"""The model's guarantee table.

``explore_cell`` explores one cell of a matrix (acks x min.insync x unclean x
ELR x fault set, with bounds on the replicas whose data may be destroyed and on those
faults may touch) and says which of ``MODEL_ANOMALIES`` can occur, each with its
shortest schedule found, then replays the long ``TARGETED`` schedules the cell allows.
The default matrix's table is stored in ``table.json`` (written by ``faultline model
--explore --write``); the agreement tests hold the checker's guarantee rules to it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from faultline.checkers.model.explore import LEADER_FAULT, Bound, explore, legal_replay
from faultline.checkers.model.outcome import MODEL_ANOMALIES, outcome
from faultline.checkers.model.state import Acks, ModelConfig
from faultline.checkers.model.steps import ModelStep

TABLE_PATH = Path(__file__).with_name("table.json")
TABLE_BOUND = Bound(depth=5, walks=600, walk_length=12, seed=1)
ON_DEMAND_BOUND = Bound(depth=4, walks=400, walk_length=12, seed=1)


@dataclass(frozen=True, slots=True)
class Cell:
    """One matrix cell: a config, the fault kinds (maybe ``leader-fault``) and two bounds.

    ``data_loss`` bounds the distinct replicas wipe / lose-unflushed may touch,
    ``faulted`` the distinct replicas any fault (or a lag shrink) may touch
    (``State.faulted``); None is no bound. ``key`` names the cell in ``table.json``;
    a bound and ELR appear in it only when set, so older keys stay valid.
    """

    acks: Acks
    min_insync: int
    unclean: bool
    faults: frozenset[str]
    data_loss: int | None = None  # distinct replicas wipe / lose-unflushed may touch
    replication_factor: int = 3
    elr: bool = False  # KIP-966 eligible leader replicas
    faulted: int | None = None  # distinct replicas faults may touch

    @property
    def key(self) -> str:
        dl = "" if self.data_loss is None else f" data-loss<={self.data_loss}"
        fd = "" if self.faulted is None else f" faulted<={self.faulted}"
        return (f"rf={self.replication_factor} acks={self.acks} min.insync={self.min_insync} "
                f"unclean={str(self.unclean).lower()} faults={'+'.join(sorted(self.faults))}{dl}{fd}"
                + (" elr=true" if self.elr else ""))

    def model_config(self) -> ModelConfig:
        return ModelConfig(replication_factor=self.replication_factor, acks=self.acks,
                           min_insync=self.min_insync, unclean=self.unclean, elr=self.elr)


#: (fault kinds, data-loss bound, faulted bound). The single-fault sets come first;
#: then several kinds at once, with and without one replica left untouched.
_FAULT_SETS: tuple[tuple[tuple[str, ...], int | None, int | None], ...] = (
    (("kill",), None, None), (("kill", LEADER_FAULT), None, None),
    (("pause",), None, None), (("pause", LEADER_FAULT), None, None),
    (("stop", LEADER_FAULT), None, None),
    (("partition",), None, None), (("partition", LEADER_FAULT), None, None),
    (("toxics",), None, None),
    (("wipe",), 1, None), (("wipe", LEADER_FAULT), 1, None), (("wipe", LEADER_FAULT), 2, None),
    (("lose-unflushed", LEADER_FAULT), 1, None), (("lose-unflushed", LEADER_FAULT), 2, None),
    # one replica untouched
    (("kill", LEADER_FAULT), None, 2), (("wipe", LEADER_FAULT), 1, 1), (("wipe", LEADER_FAULT), 2, 2),
    # several kinds
    (("kill", "wipe"), 1, None),
    (("kill", "wipe", LEADER_FAULT), 1, None), (("kill", "wipe", LEADER_FAULT), 1, 2),
    (("pause", "wipe", LEADER_FAULT), 1, None), (("pause", "wipe", LEADER_FAULT), 1, 2),
)


_COMMITTED = "produce fetch(2) fetch(3) fetch(2) fetch(3)"  # m1 on all three, acked with acks=all
_LAGGED = "produce fetch(2) fetch(2) tick tick tick"  # 3 shrunk out by lag; m1 on 1 and 2 only
_LAGGED_TWICE = "produce fetch(3) fetch(3) tick tick tick produce tick tick tick"  # 2, then 3 out
_REFETCH = {  # undo each kind on 1 and 2, so that a new leader gets an ISR again
    "crash": "restart(1) restart(2) tick fetch(1) fetch(2)",
    "pause": "resume(1) resume(2) tick fetch(1) fetch(2)",
    "isolate": "heal tick fetch(1) fetch(2)",
    "stop": "restart(1) restart(2) tick fetch(1) fetch(2)",
}

#: Schedules longer than the table's bound, tried in every cell whose faults and bounds
#: allow each of their steps (``legal_replay``): a targeted search for losses the
#: breadth-first part cannot reach. Each is a real run of the model, judged like any
#: other; a ``...-rewritten`` one goes on until a new record is written at the lost
#: offset (``inconsistent-offsets``). Tried in this order, each only for anomalies
#: the cell still lacks; every one shows one in some cell (a test holds it to that).
TARGETED: dict[str, str] = {
    # The ISR shrinks to {1, 2} by lag, then both lose their copy (or their liveness,
    # which with unclean election or an empty ELR lets 3, without m1, lead).
    # (lose-unflushed: the search's walks find that loss in a shorter schedule)
    **{f"lagged-then-{k}-both": f"{_LAGGED} {k}(2) {k}(1) tick"
       for k in ("crash", "pause", "isolate", "wipe")},
    # Without ELR the ISR shrinks to the leader alone, which then comes back empty.
    "lagged-out-wipe-leader": f"{_COMMITTED} produce tick tick tick wipe(1)",
    "lagged-out-lose-unflushed-leader": f"{_COMMITTED} produce tick tick tick lose-unflushed(1)",
    # Killed followers restart uncleanly, so they leave the ELR; the wiped last known
    # leader is elected (Kafka's balanced recovery), or without ELR the last ISR member.
    "killed-out-wipe-leader": f"{_COMMITTED} crash(2) crash(3) tick restart(2) restart(3) wipe(1)",
    # m1 is acked by {1, 3} after 2 lagged out, then 3 lags out too; the wiped leader's
    # place goes uncleanly to 2, the first live replica, which never had m1.
    "lagged-twice-wipe-leader": f"{_LAGGED_TWICE} wipe(1)",
    "lagged-twice-lose-unflushed-leader": f"{_LAGGED_TWICE} lose-unflushed(1)",
    **{f"lagged-then-{k}-both-rewritten": f"{_LAGGED} {k}(2) {k}(1) tick {undo} produce"
       for k, undo in _REFETCH.items()},
    **{f"lagged-then-{k}-both-rewritten": f"{_LAGGED} {k}(2) {k}(1) tick fetch(2) fetch(3) produce"
       for k in ("wipe", "lose-unflushed")},
    "lagged-out-wipe-leader-rewritten": f"{_COMMITTED} produce tick tick tick wipe(1) tick fetch(2) produce",
    **{f"lagged-twice-{k}-leader-rewritten": f"{_LAGGED_TWICE} {k}(1) fetch(3) produce"
       for k in ("wipe", "lose-unflushed")},
    "killed-out-wipe-leader-rewritten":
        f"{_COMMITTED} crash(2) crash(3) tick restart(2) restart(3) wipe(1) tick fetch(2) fetch(3) produce",
    # with unclean election 3 leads after both wipes, so 1 and 2 refetch
    **{f"lagged-then-{k}-both-unclean-rewritten": f"{_LAGGED} {k}(2) {k}(1) tick fetch(1) fetch(2) produce"
       for k in ("wipe", "lose-unflushed")},
    # lagged-out-wipe-leader-rewritten's twin: with the HW frozen under min ISR (Kafka 3.7+),
    # only a record committed with the full ISR can be rewritten once the leader lost it.
    "lagged-out-lose-unflushed-leader-rewritten":
        f"{_COMMITTED} produce tick tick tick lose-unflushed(1) tick fetch(2) produce",
}


_ACKS: tuple[Acks, ...] = ("0", "1", "all")


def default_matrix() -> Iterator[Cell]:
    """ELR {off,on} x acks {0,1,all} x min.insync {1,2} x unclean {false,true} x the fault sets,
    RF 3; then RF 1 (min.insync 1) with the fault sets one replica can have: no other replica
    to elect, so what is lost is what its own log lost."""
    for elr in (False, True):
        for acks in _ACKS:
            for mi in (1, 2):
                for unclean in (False, True):
                    for faults, dl, fd in _FAULT_SETS:
                        yield Cell(acks, mi, unclean, frozenset(faults), dl, elr=elr, faulted=fd)
    for elr in (False, True):
        for acks in _ACKS:
            for unclean in (False, True):
                for faults, dl, fd in _FAULT_SETS:
                    if (dl or 0) <= 1 and fd is None:
                        yield Cell(acks, 1, unclean, frozenset(faults), dl, 1, elr, fd)


def explore_cell(cell: Cell, bound: Bound = TABLE_BOUND) -> dict[str, tuple[ModelStep, ...]]:
    """Anomaly -> shortest schedule found, for one cell: the search within ``bound``,
    then each of :data:`TARGETED` the cell allows, for anomalies still missing."""
    b = dataclasses.replace(bound, max_data_loss=cell.data_loss, max_faulted=cell.faulted)
    found = explore(cell.model_config(), cell.faults, b).found
    for text in TARGETED.values():
        steps = tuple(ModelStep.parse(t) for t in text.split())
        st = legal_replay(cell.model_config(), cell.faults, b, steps)
        if st is not None and (st.acked or st.exposed or st.failed):
            for name in outcome(st).names - set(found):
                found[name] = steps
    return dict(sorted(found.items()))


Found = dict[str, tuple[ModelStep, ...]]


def table_to_json(table: dict[Cell, Found]) -> dict[str, Any]:
    """Plain data: {"anomalies": [...], "cells": {cell key: {anomaly: schedule}}}."""
    cells = {c.key: {n: " ".join(map(str, s)) for n, s in found.items()} for c, found in table.items()}
    return {"anomalies": list(MODEL_ANOMALIES), "cells": cells}


@lru_cache(maxsize=1)
def stored_table() -> dict[str, dict[str, str]]:
    """The stored default-matrix table: cell key -> {anomaly: schedule}; empty if absent."""
    if not TABLE_PATH.exists():
        return {}
    data: dict[str, dict[str, str]] = json.loads(TABLE_PATH.read_text())["cells"]
    return data
