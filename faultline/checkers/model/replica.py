"""One replica's own mechanics: reachability, its log and leader-epoch cache, what it
learns from the controller, and the leader's high watermark.

Functions here read the network and change only the replicas' own state, never the
controller's registration or what clients saw, and return no note: which step calls
them, and what the step reports, is ``steps.py``'s business. The rules, with their
sources: truncation by leader epoch (Kafka's
``LeaderEpochFileCache.endOffsetFor`` and the OffsetsForLeaderEpoch rounds of
KIP-101 and KIP-279), or to the HW for the pre-KIP-101 broker
(``ModelConfig.truncation == "hw"``); the leader HW as the minimum LEO over the ISR
and recently caught-up replicas, where a fenced broker does not hold it back
(KIP-841), and frozen while the ISR is below the effective min ISR
(``Partition.maybeIncrementLeaderHW``'s ``isUnderMinIsr`` check, Kafka 3.7 and later
with or without ELR: KAFKA-15583).
"""

from __future__ import annotations

from faultline.checkers.model.controller import effective_min_isr
from faultline.checkers.model.state import CONTROLLER, NEVER, Remote, Replica, State

# ---------------------------------------------------------------- network


def linked(st: State, a: int, b: int) -> bool:
    """No cut between nodes ``a`` and ``b`` (a replica id or ``CONTROLLER``)."""
    return frozenset((a, b)) not in st.cuts


def serving(r: Replica) -> bool:
    """Up and not paused: it answers requests and sends its own."""
    return r.up and not r.paused


def reaches_controller(st: State, r: Replica) -> bool:
    """Serving and linked to the controller: it heartbeats and learns metadata."""
    return serving(r) and linked(st, r.rid, CONTROLLER)


# ---------------------------------------------------------------- leader epochs


def end_offset_for(epochs: tuple[tuple[int, int], ...], leo: int, requested: int) -> tuple[int, int]:
    """Kafka's ``LeaderEpochFileCache.endOffsetFor``: (epoch, end offset), (-1, -1) if undefined."""
    if requested < 0 or not epochs:
        return (-1, -1)
    if requested == epochs[-1][0]:
        return (requested, leo)
    higher = next((e for e in epochs if e[0] > requested), None)
    if higher is None:
        return (-1, -1)
    floor = [e for e in epochs if e[0] <= requested]
    return (floor[-1][0] if floor else requested, higher[1])


def truncate(r: Replica, offset: int) -> None:
    """Truncate the log and the epoch cache (Kafka's truncateFromEnd: entries starting at or above)."""
    r.epochs = tuple(e for e in r.epochs if e[1] < offset)
    if offset >= r.leo:
        return
    r.log = r.log[:offset]
    r.hw = min(r.hw, offset)
    r.flushed = min(r.flushed, offset)


def append(r: Replica, records: tuple[tuple[int, int], ...]) -> None:
    """Append (epoch, value) records, opening an epoch-cache entry at each new epoch."""
    for ep, _ in records:
        if not r.epochs or ep > r.epochs[-1][0]:
            r.epochs = (*r.epochs, (ep, r.leo))
        r.log = (*r.log, (ep, _))


def reconcile_by_epoch(f: Replica, leader: Replica) -> int:
    """OffsetsForLeaderEpoch rounds (KIP-101, KIP-279); returns the truncation offset."""
    target = f.leo
    for _ in range(len(f.epochs) + 1):  # each intermediate round drops at least one epoch entry
        if not (f.log and f.epochs):
            break
        asked = f.epochs[-1][0]
        l_epoch, l_end = end_offset_for(leader.epochs, leader.leo, asked)
        if l_end < 0:
            return min(f.hw, f.leo)
        own_epoch, own_end = end_offset_for(f.epochs, f.leo, l_epoch)
        if own_end < 0:
            return min(l_end, f.leo)
        if own_epoch != l_epoch:
            target = min(own_end, f.leo)
            truncate(f, target)
            continue
        return min(l_end, own_end, f.leo)
    return target


# ---------------------------------------------------------------- metadata and HW


def apply_metadata(st: State, r: Replica) -> None:
    """The broker learns the controller's (leader, epoch, ISR): becomes leader or follower."""
    if st.c_epoch > r.epoch:
        r.epoch, r.leader, r.isr = st.c_epoch, st.c_leader, st.c_isr
        if st.c_leader == r.rid:
            _become_leader(st, r)
        else:
            r.remote = {}
            if st.c_leader is not None:
                if st.config.truncation == "hw":
                    truncate(r, r.hw)  # pre-KIP-101: truncate to the HW on becoming follower
                else:
                    r.must_truncate = True
    elif st.c_epoch == r.epoch and r.isr != st.c_isr:
        r.isr = st.c_isr
        if r.leader == r.rid:
            maybe_advance_hw(st, r)


def _become_leader(st: State, r: Replica) -> None:
    r.must_truncate = False
    if not r.epochs or r.epochs[-1][0] < r.epoch:
        r.epochs = (*r.epochs, (r.epoch, r.leo))
    r.epoch_start = r.epochs[-1][1]
    r.remote = {i: Remote(last_caught_up=st.now if i in r.isr else NEVER)
                for i in st.replicas if i != r.rid}
    maybe_advance_hw(st, r)


def push_metadata(st: State) -> None:
    """Every replica that reaches the controller learns its current registration."""
    for r in st.replicas.values():
        if reaches_controller(st, r):
            apply_metadata(st, r)


def maybe_advance_hw(st: State, r: Replica) -> None:
    """Leader HW = max(old HW, min LEO over the ISR and recently caught-up replicas).

    A fenced broker is not ISR-eligible (KIP-841), so it does not hold the HW back.
    The HW does not move while the leader's ISR is below the effective min ISR
    (``Partition.maybeIncrementLeaderHW``'s ``isUnderMinIsr`` check). Kafka has made
    that check since 3.7 (KAFKA-15583), whether ELR is on or not, so it applies to both
    versions the harness runs (3.9 without ELR, 4.x with it).
    """
    if len(r.isr) < effective_min_isr(st.config):
        return
    lag = st.config.lag_ticks
    leos = [r.leo]
    for i, m in r.remote.items():
        if i in r.isr or (st.now - m.last_caught_up <= lag and i not in st.fenced):
            leos.append(m.leo)
    r.hw = max(r.hw, min(leos))

