"""The controller's side of the model: ISR, ELR and leader elections for one partition.

KRaft's ``PartitionChangeBuilder`` reduced to one partition: every function here changes
only the controller's registration in ``State`` (``c_leader``, ``c_epoch``, ``c_isr``,
``c_elr``, ``c_last_leader``, ``fenced``) and returns a note; telling the brokers
(``replica.push_metadata``) is the caller's job, so the order of pushes stays where
``steps.py`` puts it. With ``config.elr`` off it is the pre-KIP-966 controller: the ISR
never shrinks below its last member and an election picks the first unfenced ISR member
(or, when unclean, any unfenced replica). With it on, KIP-966's rules, as
docs/design.md ("Eligible leader replicas") reads them in Kafka's source.
"""

from __future__ import annotations

from faultline.checkers.model.state import ModelConfig, State


def effective_min_isr(cfg: ModelConfig) -> int:
    """min.insync.replicas capped at the replication factor (Kafka's ``effectiveMinIsr``)."""
    return min(cfg.min_insync, cfg.replication_factor)


def change_isr(st: State, target: frozenset[int], unclean_shutdown: int | None = None) -> None:
    """Set the ISR to ``target``; with ELR, derive the ELR and the last known leader from it.

    ELR (``maybePopulateTargetElr``): cleared once ``target`` reaches the effective
    min ISR; otherwise the old ELR plus the old ISR, minus ``target`` and minus a
    broker that shut down uncleanly. The last known leader is recorded when the ISR
    first becomes empty (``maybeUpdateLastKnownLeader``). Without ELR only the ISR
    changes.
    """
    cfg = st.config
    if cfg.elr:
        if len(target) >= effective_min_isr(cfg):
            st.c_elr = frozenset()
        else:
            dropped = frozenset() if unclean_shutdown is None else frozenset({unclean_shutdown})
            st.c_elr = (st.c_elr | st.c_isr) - target - dropped
        if not target and st.c_isr:
            st.c_last_leader = st.c_leader
    st.c_isr = target


def elect(st: State, unacceptable: frozenset[int] = frozenset()) -> str:
    """Elect a leader; return what happened ("" if the leader stays the same).

    Candidates are unfenced replicas not in ``unacceptable``, in replica-id order
    (Kafka walks the assignment). First an ISR member; with ELR, when the ISR is
    empty, an ELR member (it becomes the ISR) and, when the ELR is empty too, the
    last known leader (Kafka's balanced recovery: an unclean-style election that
    needs no ``unclean`` setting); then, if ``unclean``, any candidate. An unclean
    election sets the ISR to the new leader and clears the ELR.
    """
    cfg = st.config
    ok = [i for i in sorted(st.replicas) if i not in st.fenced and i not in unacceptable]
    clean = [i for i in ok if i in st.c_isr]
    eligible = [i for i in ok if i in st.c_elr] if cfg.elr and not st.c_isr else []
    note = ""
    new: int | None = None
    if clean:
        new = clean[0]
    elif eligible:
        new = eligible[0]
        st.c_isr, st.c_elr = frozenset({new}), st.c_elr - {new}
        note = " from the ELR"
    elif cfg.elr and not st.c_isr and not st.c_elr and st.c_last_leader is not None \
            and st.c_last_leader in ok:
        new = st.c_last_leader
        st.c_isr = frozenset({new})
        note = " (last known leader, ISR and ELR empty)"
    elif cfg.unclean and ok:
        new = ok[0]
        st.c_isr, st.c_elr = frozenset({new}), frozenset()
        note = " UNCLEAN"
    if new == st.c_leader:
        return ""
    if new is not None:
        st.c_last_leader = None
    st.c_leader = new
    st.c_epoch += 1
    if new is None:
        return f"partition offline (epoch {st.c_epoch})"
    return f"controller elects {new}{note} (epoch {st.c_epoch})"


def fence(st: State, rid: int, elect_now: bool = True) -> str:
    """Fence broker ``rid``: out of the ISR, and a new leader if it led and ``elect_now``.

    Without ELR the ISR keeps its last member; with ELR it may become empty (the
    member leaving it may join the ELR, see ``change_isr``).
    """
    st.fenced = st.fenced | {rid}
    if rid in st.c_isr and (len(st.c_isr) > 1 or st.config.elr):
        change_isr(st, st.c_isr - {rid})
    note = f"controller fences {rid}"
    if elect_now and st.c_leader == rid:
        note += "; " + elect(st)
    return note


def unclean_shutdown(st: State, rid: int) -> str:
    """ELR only: ``rid`` re-registers without proof of a clean shutdown.

    Kafka's ``handleBrokerShutdown(isCleanShutdown=false)``: ``rid`` leaves the ISR
    and the ELR and is no acceptable leader for this change. Returns "" when it was
    in neither.
    """
    if rid not in st.c_isr and rid not in st.c_elr:
        return ""
    change_isr(st, st.c_isr - {rid}, unclean_shutdown=rid)
    note = f"controller drops {rid} from ISR and ELR (unclean shutdown)"
    elected = elect(st, unacceptable=frozenset({rid})) if st.c_leader == rid else ""
    return f"{note}; {elected}" if elected else note
