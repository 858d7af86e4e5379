"""The reference model's values: one partition's configuration and state.

Owns ``ModelConfig`` (the partition's settings in model terms, ticks for times),
``State`` with its ``Replica`` and ``Remote`` records and pending sends, and the
constants the other modules share. Nothing here changes a state: the steps
(``steps.py``), a replica's mechanics (``replica.py``) and the controller's rules
(``controller.py``) do, and all of them import this module, never the other way.

Conventions: replica ids are ``1..replication_factor``; replica 1 leads at epoch 0.
Node ``0`` (``CONTROLLER``) is the controller, a KRaft quorum that never fails in
this model. Time is the integer ``State.now``, in ticks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Acks = Literal["0", "1", "all"]
Truncation = Literal["leader-epoch", "hw"]
FollowerHw = Literal["modern", "seed"]
CONTROLLER = 0  # the controller's node id in ``State.cuts``
NEVER = -(10**6)  # a time long before any tick: "never happened"


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """One partition's configuration, in model terms (ticks for times)."""

    replication_factor: int = 3
    acks: Acks = "all"
    min_insync: int = 2
    unclean: bool = False
    truncation: Truncation = "leader-epoch"
    lag_ticks: int = 2
    checkpoint_ticks: int = 1
    # KRaft refuses a restarted broker's registration while its old session lives,
    # so the old incarnation is fenced (dropped from the ISR) first. False gives the
    # ZooKeeper-era quick restart that KIP-101's first case assumes.
    fence_on_restart: bool = True
    # KIP-966 eligible leader replicas (see controller.py). Off by default so
    # the seeds' scenarios keep their pre-KIP-966 step tables; the Kafka the harness
    # tests (4.1 and later) runs with it on.
    elr: bool = False
    # Which leader HW a fetch response carries. "modern": the HW read before the leader
    # processes the fetch offset, as Kafka's ``Partition.fetchRecords`` reads the log
    # (``readFromLocalLog``) and only then updates the follower's state
    # (``updateFollowerFetchState``, which may move the HW): the follower's HW trails by
    # a round. "seed": the HW after it, as seed 000's figures draw it (the leader
    # updates the remote LEO and its HW, then answers with the new HW).
    follower_hw: FollowerHw = "modern"

    def __post_init__(self) -> None:
        if self.replication_factor < 1:
            raise ValueError("replication_factor must be >= 1")
        if self.acks not in ("0", "1", "all"):
            raise ValueError(f"acks must be '0', '1' or 'all', not {self.acks!r}")
        if self.min_insync < 1:
            raise ValueError("min_insync must be >= 1")
        if self.truncation not in ("leader-epoch", "hw"):
            raise ValueError("truncation must be 'leader-epoch' or 'hw'")
        if self.follower_hw not in ("modern", "seed"):
            raise ValueError("follower_hw must be 'modern' or 'seed'")
        if self.lag_ticks < 1 or self.checkpoint_ticks < 1:
            raise ValueError("lag_ticks and checkpoint_ticks must be >= 1")


@dataclass(slots=True)
class Remote:
    """The leader's view of one follower (Kafka's remote replica state)."""

    leo: int = -1
    last_caught_up: int = NEVER
    last_fetch_time: int = NEVER
    last_fetch_leader_leo: int = -1


@dataclass(slots=True)
class Replica:
    """One replica: disk state, in-memory state, and its view of the metadata."""

    rid: int
    log: tuple[tuple[int, int], ...] = ()  # (leader epoch, value); offset = index
    hw: int = 0
    epochs: tuple[tuple[int, int], ...] = ()  # leader-epoch-checkpoint: (epoch, start offset)
    ckpt_hw: int = 0  # replication-offset-checkpoint
    flushed: int = 0  # recovery point: records below it survive lose-unflushed
    up: bool = True
    paused: bool = False
    leader: int | None = None  # the leader it believes in
    epoch: int = -1  # the leader epoch it knows
    isr: frozenset[int] = frozenset()
    epoch_start: int = 0  # as leader: start offset of its epoch
    must_truncate: bool = False  # became follower; reconcile with the leader on first fetch
    remote: dict[int, Remote] = field(default_factory=dict)
    clean_shutdown: bool = False  # down after a graceful stop: its restart registers as clean

    @property
    def leo(self) -> int:
        return len(self.log)

    @property
    def is_leader(self) -> bool:
        return self.up and self.leader == self.rid

    def clone(self) -> Replica:
        return Replica(self.rid, self.log, self.hw, self.epochs, self.ckpt_hw, self.flushed, self.up,
                       self.paused, self.leader, self.epoch, self.isr, self.epoch_start, self.must_truncate,
                       {k: Remote(r.leo, r.last_caught_up, r.last_fetch_time, r.last_fetch_leader_leo)
                        for k, r in self.remote.items()}, self.clean_shutdown)


@dataclass(slots=True)
class Pending:
    """An acks=all produce waiting for the HW: value at offset on leader rid in epoch."""

    value: int
    offset: int
    rid: int
    epoch: int


@dataclass(slots=True)
class State:
    """The whole model: replicas, controller, network, and what clients saw."""

    config: ModelConfig
    replicas: dict[int, Replica]
    now: int = 0
    c_leader: int | None = 1
    c_epoch: int = 0
    c_isr: frozenset[int] = frozenset()
    c_elr: frozenset[int] = frozenset()  # eligible leader replicas (config.elr); never meets c_isr
    c_last_leader: int | None = None  # Kafka's lastKnownElr: the leader when the ISR became empty
    fenced: frozenset[int] = frozenset()
    cuts: frozenset[frozenset[int]] = frozenset()  # links down; node 0 is the controller
    next_value: int = 1
    acked: dict[int, int] = field(default_factory=dict)  # value -> offset (-1: acks=0)
    failed: frozenset[int] = frozenset()  # certainly not written
    indeterminate: frozenset[int] = frozenset()
    pending: list[Pending] = field(default_factory=list)
    exposed: frozenset[tuple[int, int]] = frozenset()  # (offset, value) readable below a leader's HW
    data_lost: frozenset[int] = frozenset()  # replicas a wipe or lose-unflushed destroyed data on
    # replicas a fault step touched or the leader shrank out of the ISR by lag (see steps.FAULT_TOUCHES)
    faulted: frozenset[int] = frozenset()
    record_exposures: bool = True

    def clone(self) -> State:
        return State(self.config, {k: r.clone() for k, r in self.replicas.items()}, self.now,
                     self.c_leader, self.c_epoch, self.c_isr, self.c_elr, self.c_last_leader, self.fenced,
                     self.cuts, self.next_value, dict(self.acked), self.failed, self.indeterminate,
                     [Pending(p.value, p.offset, p.rid, p.epoch) for p in self.pending],
                     self.exposed, self.data_lost, self.faulted, self.record_exposures)

    def key(self) -> tuple[object, ...]:
        """A hashable summary for deduplicating states in exploration.

        Absolute time is folded into its phase and capped ages: two states that
        differ only in how long ago something happened beyond the lag are alike.
        ``faulted`` is left out: a search that bounds it adds it to the key.
        """
        cfg = self.config
        cap = cfg.lag_ticks + 2
        period = check_period(cfg) * cfg.checkpoint_ticks

        def age(t: int) -> int:
            return min(self.now - t, cap)

        reps = tuple(
            (r.log, r.hw, r.epochs, r.ckpt_hw, r.flushed, r.up, r.paused, r.leader, r.epoch, r.isr,
             r.epoch_start, r.must_truncate, r.clean_shutdown,
             tuple((k, m.leo, age(m.last_caught_up), age(m.last_fetch_time), m.last_fetch_leader_leo)
                   for k, m in sorted(r.remote.items())) if r.leader == r.rid else ())
            for r in self.replicas.values())
        return (reps, self.now % period, self.c_leader, self.c_epoch, self.c_isr, self.c_elr,
                self.c_last_leader, self.fenced, self.cuts,
                tuple(sorted(self.acked.items())), self.failed, self.indeterminate,
                tuple((p.value, p.offset, p.rid, p.epoch) for p in self.pending), self.exposed,
                self.data_lost)


def check_period(cfg: ModelConfig) -> int:
    """Ticks between two ISR expiration checks of a leader: ``max(1, lag_ticks // 2)``."""
    return max(1, cfg.lag_ticks // 2)

