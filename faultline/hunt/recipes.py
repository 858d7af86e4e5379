"""The hunt's recipes: model schedules that show an anomaly, each compiled into a
targeted schedule (:mod:`faultline.targeted`) by
:func:`faultline.hunt.compile.compile_schedule`, whose per-step rule table derives each
wait from the model's replayed state; and the configs a hunt varies (:class:`HuntConfig`),
with what the model permits and predicts on each.

Why the recipes, and not the exploration's shortest schedules, are what is compiled:
a shortest schedule leans on what the model leaves out. A follower there fetches only
on ``fetch(k)``, so ``produce crash(1)`` means "the followers did not fetch", which on
a real cluster must become a hold placed before the produce and kept shorter than
``replica.lag.time.max.ms`` (no ``tick`` between); the search also faults single
followers in any order before anything binds them and pauses or wipes whichever
replica is shortest; and its controller never fails, so it may crash both followers
and tick (``crash(3) crash(2) tick``), which on 3 combined KRaft nodes takes the quorum
down. A recipe states the hold (``cut(1,2) cut(1,3)``, ``pause(2) pause(3)``), faults
the leader, both followers, or one of them once both are bound, and keeps a quorum
wherever the controller acts, which the rule table covers; its replay on the config
shows the same anomalies as the shortest schedule (``predicted``, printed beside it in
the table).
All recipes run on 3 nodes: a follower is held by cutting replication only (the
``hold`` step), so it stays in the KRaft quorum.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from faultline.checkers.guarantees import elr_enabled
from faultline.checkers.model.explore import LEADER_FAULT, replay
from faultline.checkers.model.outcome import outcome
from faultline.checkers.model.state import Acks, ModelConfig
from faultline.checkers.model.steps import ModelStep
from faultline.checkers.model.table import ON_DEMAND_BOUND, Cell, explore_cell
from faultline.hunt.compile import compile_schedule
from faultline.spec import DEFAULT_KAFKA_VERSION

#: The fault kinds the model explores for a hunt: what the recipes use, with data
#: destroyed on at most :data:`HUNT_DATA_LOSS` replica.
HUNT_FAULTS = frozenset({"kill", "pause", "wipe", LEADER_FAULT})
HUNT_DATA_LOSS = 1
#: The partition a compiled schedule faults (``leader of 0``, ``followers of 0``:
#: :func:`faultline.hunt.compile.compile_schedule`), the model's one partition: only an
#: anomaly there demonstrates a recipe.
TARGET_PARTITION = 0


@dataclass(frozen=True, slots=True)
class Recipe:
    """A model schedule that shows an anomaly, and the config it is compiled on.

    ``model`` is in the model's step syntax, replica 1 the first leader; it ends with a
    ``produce`` after the failover, as the real workload keeps writing. ``on`` is the
    model config whose replay the compiler reads its waits from (the one the recipe
    demonstrates); the compiled :attr:`schedule` runs unchanged on every config.
    ``time_limit_s`` covers the schedule. Every recipe runs on 3 nodes.
    """

    name: str
    model: str
    on: ModelConfig
    why: str
    time_limit_s: float = 20.0

    def model_steps(self) -> tuple[ModelStep, ...]:
        return tuple(ModelStep.parse(s) for s in self.model.split())

    @property
    def schedule(self) -> tuple[str, ...]:
        """The targeted schedule: :func:`faultline.hunt.compile.compile_schedule` of the model's
        (compiled once)."""
        return _compiled(self)


@functools.cache
def _compiled(recipe: Recipe) -> tuple[str, ...]:
    return compile_schedule(recipe.model_steps(), recipe.on)


def _on(acks: Acks, min_insync: int, unclean: bool = False, elr: bool = True) -> ModelConfig:
    return ModelConfig(replication_factor=3, acks=acks, min_insync=min_insync, unclean=unclean, elr=elr)


#: The recipes: model schedules compiled into targeted ones (see the module docstring).
#: Broker settings a targeted run with unclean election on needs: the KRaft controller looks
#: for partitions to elect uncleanly every unclean.leader.election.interval.ms (minutes by
#: default), far longer than a recipe's run.
UNCLEAN_BROKER_CONFIG = {"unclean.leader.election.interval.ms": "1000"}


def unclean_broker_config(unclean: bool) -> dict[str, str]:
    """The broker settings a targeted run needs for unclean election ``unclean`` (a new dict)."""
    return dict(UNCLEAN_BROKER_CONFIG) if unclean else {}


RECIPES: tuple[Recipe, ...] = (
    Recipe(
        "leader-crash-followers-held",
        "pause(2) pause(3) produce crash(1) resume(2) resume(3) tick produce restart(1) fetch(1)",
        _on("1", 2),
        "The model's 'produce crash(1)' with no fetch between: a real follower fetches on its own, so "
        "both are paused while the leader acknowledges, then the leader is killed; a follower still in "
        "the ISR takes over and the old leader truncates what only it had."),
    Recipe(
        "unclean-election-stale-follower",
        "cut(1,2) cut(1,3) produce tick tick tick crash(1) tick heal produce restart(1) fetch(1)",
        _on("all", 1, unclean=True),
        "The followers are held (replication cut, still in the KRaft quorum) until the leader drops "
        "them from the ISR for lag (the model's ticks): the ISR is the leader alone, which acknowledges "
        "alone; it is killed and a stale follower, registered all along, is elected uncleanly.",
        time_limit_s=30.0),
    Recipe(
        "wipe-last-isr-member",
        "produce fetch(2) fetch(3) fetch(2) fetch(3) cut(1,2) cut(1,3) produce tick tick tick wipe(1) heal "
        "tick fetch(2) fetch(3) produce",
        _on("all", 2, elr=False),
        "Committed writes on every replica; the followers are held until the leader drops them from "
        "the ISR for lag and the ISR is the leader alone; that last ISR member comes back empty. Without "
        "KIP-966 (Kafka before 4.1) it is the only electable replica and leads with an empty log; with "
        "it, a follower that left the ISR below min.insync is in the ELR and is elected instead.",
        time_limit_s=35.0),
    Recipe(
        "elr-limit-unclean-restarts",
        "produce fetch(2) fetch(3) fetch(2) fetch(3) cut(1,2) cut(1,3) produce tick tick tick crash(2) "
        "tick restart(2) tick crash(3) tick restart(3) tick wipe(1) heal tick fetch(2) fetch(3) produce",
        _on("all", 2),
        "KIP-966's limit (the model's elr-unclean-restart-loss): as wipe-last-isr-member until the ISR "
        "is the leader alone, then each held follower in turn is killed, fenced (the model's tick: the "
        "session timeout) and restarted: back from an unclean shutdown, it leaves the ELR (one at a "
        "time, so that two of the three KRaft voters stay up). The leader is wiped: ISR and ELR are "
        "empty, and the controller elects the last known leader, empty: committed data lost with one "
        "wipe, no unclean setting.",
        time_limit_s=100.0),
    Recipe(
        "lose-unflushed-last-isr-member",
        "produce fetch(2) fetch(3) fetch(2) fetch(3) cut(1,2) cut(1,3) produce tick tick tick "
        "lose-unflushed(1) heal tick fetch(2) fetch(3) produce",
        _on("all", 1),
        "As wipe-last-isr-member, but the last ISR member loses only what it had not flushed to disk (Kafka "
        "flushes on a segment roll, so in a short run nearly all of it): with min.insync=1 the ISR of the "
        "leader alone still acknowledges, nobody is in the ELR, and the leader comes back with its log "
        "cut and is elected again; the followers truncate to it.",
        time_limit_s=35.0),
)


@dataclass(frozen=True, slots=True)
class HuntConfig:
    """The settings a hunt varies."""

    acks: Acks
    min_insync: int
    unclean: bool
    kafka_version: str = DEFAULT_KAFKA_VERSION

    @property
    def label(self) -> str:
        return (f"acks={self.acks} min.insync={self.min_insync} unclean={str(self.unclean).lower()} "
                f"kafka={self.kafka_version}")

    @property
    def slug(self) -> str:
        return f"acks{self.acks}-misr{self.min_insync}{'-unclean' if self.unclean else ''}"

    def model_config(self) -> ModelConfig:
        return ModelConfig(replication_factor=3, acks=self.acks, min_insync=self.min_insync,
                           unclean=self.unclean, elr=elr_enabled(self.kafka_version))

    def permitted(self) -> dict[str, str]:
        """Anomaly -> the model's shortest schedule, for the hunt's fault kinds."""
        return dict(_permitted(Cell(self.acks, self.min_insync, self.unclean, HUNT_FAULTS,
                                    HUNT_DATA_LOSS, elr=self.model_config().elr)))

    def predicted(self, recipe: Recipe) -> frozenset[str]:
        """The anomalies the model shows when it replays ``recipe``'s model schedule (replayed
        once per config and recipe)."""
        return _predicted(self, recipe)


@functools.cache
def _predicted(config: HuntConfig, recipe: Recipe) -> frozenset[str]:
    return outcome(replay(config.model_config(), recipe.model_steps())).names


@functools.cache
def _permitted(cell: Cell) -> tuple[tuple[str, str], ...]:
    return tuple((name, " ".join(map(str, s))) for name, s in explore_cell(cell, ON_DEMAND_BOUND).items())


def safe(version: str) -> HuntConfig:
    """The safe config of the family: acks=all, min.insync=2, unclean off."""
    return HuntConfig("all", 2, False, version)
