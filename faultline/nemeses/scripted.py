"""The scripted nemesis package: runs a targeted schedule (:mod:`faultline.targeted`) step by step.

Where the seeded package (:mod:`faultline.nemeses.package`) draws faults at random
times, this one runs the spec's ``nemesis.schedule`` in order from the start of the
main phase, resolving each role (``leader of 0``, ``followers of 0``, ``controller``)
from live metadata when its step runs, and waiting on what the metadata shows
(``until isr of 0 is {leader}``); live metadata is that of the brokers that answer, but
one that another leaves out of the registered brokers (:func:`trusted`); a group's
committed offsets are its coordinator's answer (``until group G has committed``), of the
one every node names (:func:`agreed_coordinator`), asked through its proxy; and a
partition's high watermark its leader's (read when ``committed past P`` begins, and at
every look of ``P has passed group G``); the partitions a consumer holds are its member's
own journal (``until consumers hold partitions``), read from the workload. It
drives the same family nemeses (kill, pause, stop, wipe, lose-unflushed, partition,
links, toxics, clients, clock), so it heals the same way, and keeps the runner's contract
(:class:`faultline.run.runner.NemesisSchedule`). Each step and wait is journaled as
docs/history.md ("nemesis") says; a wait not met in time, or a role with no node, ends
the schedule. Faults still in effect stay until ``heal_all``.

:class:`HandPackage` is the same package fed one step at a time from outside (a session
by hand, ``faultline cluster crash leader of 0``); there a failed step ends nothing.
"""

from __future__ import annotations

import logging
import math
import queue
import re
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaException

from faultline.cluster import kafka_client
from faultline.cluster.admin_child import AdminChild
from faultline.cluster.protocol import Cluster, PartitionState
from faultline.errors import NemesisError, SpecError
from faultline.history import HistoryWriter, Op
from faultline.nemeses.base import (
    LIVE_STATE_TIMEOUT_S,
    NodeFault,
    completed,
    error_text,
    leaders_json,
    with_timeout,
)
from faultline.nemeses.clients import ROLES, ClientsNemesis, CrashableClients
from faultline.nemeses.clock import STROBE_PERIOD_S, ClockNemesis
from faultline.nemeses.kill import KillNemesis
from faultline.nemeses.links import LinksNemesis
from faultline.nemeses.lose_unflushed import LoseUnflushedNemesis
from faultline.nemeses.partition import PartitionNemesis, complete, nodes_of, to_json
from faultline.nemeses.pause import PauseNemesis
from faultline.nemeses.schedule import ScheduledFault
from faultline.nemeses.stop import StopNemesis
from faultline.nemeses.toxics import ToxicsNemesis
from faultline.nemeses.wipe import WipeNemesis
from faultline.spec import TestSpec, TopicSpec
from faultline.targeted import (
    ACTIONS,
    CLOCK_VERBS,
    ENDS_WINDOW,
    OFFSETS_TOPIC,
    TRANSACTIONS_TOPIC,
    Action,
    Committed,
    Step,
    Target,
    View,
    Wait,
    condition_met,
    coordinator_partition,
    parse_schedule,
    resolve,
)

log = logging.getLogger(__name__)

#: How often a ``wait until`` looks at the metadata, in seconds.
POLL_S = 0.5
#: Seconds a coordinator's resolution asks every node again until each has answered itself.
COORDINATOR_ROUNDS_S = 5.0
#: How long one broker may take to answer a Metadata request of the schedule, in seconds.
METADATA_TIMEOUT_S = 2.0


class ScheduleEnded(Exception):
    """The schedule cannot go on (a role with no node, a wait not met); already journaled."""


class ScriptedPackage:
    """Runs ``steps`` against ``cluster``; see the module docstring.

    Thread-safety: ``heal_all`` may be called from another thread while ``run`` runs;
    it stops ``run`` after the action in progress (a wait stops at once) and heals.
    """

    def __init__(self, cluster: Cluster, steps: Sequence[Step],
                 states: Callable[[], dict[int, PartitionState]] | None = None,
                 registered: Callable[[], set[int]] | None = None, topic: TopicSpec | None = None,
                 committed: Callable[[str], Committed] | None = None) -> None:
        """``topic`` is the one whose partitions roles and waits name (default: the
        spec's); ``states`` reads its partitions live (default: :meth:`_states`,
        Metadata requests to every broker at once, the stale answers left out),
        ``registered`` the brokers registered and unfenced (default: :meth:`_registered`,
        likewise), ``committed`` a group's committed offsets (default: :meth:`_committed`);
        each raises NemesisError when nothing answers."""
        self.cluster = cluster
        self.topic = topic or cluster.spec.topic
        self.steps = tuple(steps)
        self._read_states = states or self._states
        self._read_registered = registered or self._registered
        self._read_committed = committed or self._committed
        self.kill, self.pause, self.stop = KillNemesis(), PauseNemesis(), StopNemesis()
        self.wipe, self.lose_unflushed = WipeNemesis(), LoseUnflushedNemesis()
        self.partition = PartitionNemesis()
        self.links = LinksNemesis()
        self.toxics = ToxicsNemesis()
        self.clients = ClientsNemesis()
        self.clock = ClockNemesis()
        #: the family nemeses that fault a node, in the order they are set up and torn down
        self._node_faults: tuple[NodeFault, ...] = (self.kill, self.stop, self.pause, self.wipe,
                                                    self.lose_unflushed)
        #: those of them that leave it down until a start
        self._down = tuple(n for n in self._node_faults if n.leaves_down)
        #: why the schedule ended before its last step (None: it ran to the end, or runs)
        self.ended: str | None = None
        self._grudge: dict[int, frozenset[int]] = {}
        self._replication: dict[int, frozenset[int]] = {}
        self._degraded: set[int] = set()  # nodes whose links a degrade may have degraded
        self._delayed: set[int] = set()  # nodes whose client links a delay may have delayed
        self._skewed: set[int] = set()  # nodes whose clocks a bump or strobe may have set off
        self._bindings: dict[str, tuple[int, ...]] = {}
        self._last_leader: dict[int, int | None] = {}
        self._lock = threading.RLock()
        self._halt = threading.Event()
        self._main_phase_over = threading.Event()  # set by the schedule's ``end``
        self._set_up = False
        self._completions: list[Op] = []  # of the step run_step runs
        #: the waits' admin clients, each made on first use and ended at heal_all: of every
        #: proxy (None; high watermarks) and of one node's (a coordinator's offsets)
        self._admins: dict[int | None, AdminChild] = {}
        self._admins_lock = threading.Lock()  # heal_all closes them from another thread
        #: the time (monotonic) the look of the wait in progress must end by, if one is
        self._look_by: float | None = None

    @classmethod
    def from_spec(cls, spec: TestSpec, cluster: Cluster) -> ScriptedPackage:
        """The nemesis for ``spec.nemesis.schedule`` (validated when the spec was built)."""
        steps = parse_schedule(spec.nemesis.schedule, spec.topic.partitions, spec.kafka.nodes)
        return cls(cluster, steps)

    def _needed(self) -> list[Any]:
        verbs = {s.verb for s in self.steps if isinstance(s, Action)}
        need: list[Any] = []
        if verbs & {"crash", "restart"}:
            need += [self.kill, self.stop]
        if verbs & {"pause", "resume"}:
            need.append(self.pause)
        if "wipe" in verbs:
            need.append(self.wipe)
        if "lose-unflushed" in verbs:
            need.append(self.lose_unflushed)
        if verbs & {"isolate", "hold", "release", "heal"}:
            need.append(self.partition)
        if verbs & {"degrade", "restore"}:
            need.append(self.links)
        if verbs & {"delay", "undelay"}:
            need.append(self.toxics)
        if any(s.on_clients for s in self.steps):
            need.append(self.clients)
        if verbs & CLOCK_VERBS:
            need.append(self.clock)
        return need

    def bind_clients(self, clients: CrashableClients) -> None:
        """Hand the workload's clients to the steps that crash them."""
        self.clients.bind(clients)

    def setup(self) -> None:
        """Bind the family nemeses the steps use; NemesisError if the backend lacks one."""
        for nemesis in self._needed():
            nemesis.setup(self.cluster)
        self._set_up = True

    @property
    def main_phase_over(self) -> bool:
        """Whether the schedule's ``end`` ran: the runner ends the main phase."""
        return self._main_phase_over.is_set()

    @property
    def active(self) -> list[ScheduledFault]:
        """Faults in effect now, as schedule steps (for the progress line)."""
        held = [ScheduledFault(0.0, n.family, n.family, 0.0, 0) for n in self._node_faults if n.faulted]
        if self._grudge:
            held.append(ScheduledFault(0.0, "partition", "isolate", 0.0, 0))
        if self._replication:
            held.append(ScheduledFault(0.0, "partition", "hold", 0.0, 0))
        if self._degraded:
            held.append(ScheduledFault(0.0, "links", "degrade", 0.0, 0))
        if self._delayed:
            held.append(ScheduledFault(0.0, "toxics", "latency", 0.0, 0))
        if any(self.clients.crashed_of(role) for role in ROLES):
            held.append(ScheduledFault(0.0, "clients", "crash", 0.0, 0))
        if any(self.clients.paused_of(role) for role in ROLES):
            held.append(ScheduledFault(0.0, "clients", "pause", 0.0, 0))
        if any(self.clients.stopped_of(role) for role in ROLES):
            held.append(ScheduledFault(0.0, "clients", "stop", 0.0, 0))
        if self._skewed:
            held.append(ScheduledFault(0.0, "clock", "bump", 0.0, 0))
        return held

    def in_effect(self) -> list[str]:
        """The faults in effect now, one line each in words for people, e.g. ``kill:
        node 2`` or ``isolate: node 1 drops 2,3; node 2 drops 1; node 3 drops 1``."""
        lines = [f"{n.family}: node{'s' if len(n.faulted) > 1 else ''} "
                 f"{','.join(map(str, sorted(n.faulted)))}" for n in self._node_faults if n.faulted]
        for kind, grudge in (("isolate", self._grudge), ("hold", self._replication)):
            if grudge:
                lines.append(f"{kind}: " + "; ".join(f"node {node} drops {','.join(map(str, drops))}"
                                                     for node, drops in to_json(grudge).items()))
        if self._degraded:
            lines.append(f"degrade: the links of node{'s' if len(self._degraded) > 1 else ''} "
                         f"{','.join(map(str, sorted(self._degraded)))}")
        if self._delayed:
            lines.append(f"delay: the client links of node{'s' if len(self._delayed) > 1 else ''} "
                         f"{','.join(map(str, sorted(self._delayed)))}")
        for f, of in (("crash-client", self.clients.crashed_of), ("pause-client", self.clients.paused_of),
                      ("stop-client", self.clients.stopped_of)):
            for role, who in (("clients", "producer(s)"), ("consumers", "consumer(s)")):
                if of(role):
                    lines.append(f"{f}: {who} {','.join(map(str, of(role)))}")
        return lines

    # -- running ------------------------------------------------------------------

    def run(self, until: float, history: HistoryWriter) -> None:
        """Run the steps in order until the last, the ``time.monotonic()`` deadline
        ``until``, ``heal_all``, or a step that cannot go on (journaled, in ``ended``)."""
        if not self._set_up:
            self.setup()
        try:
            for step in self.steps:
                if self._halt.is_set() or time.monotonic() >= until:
                    return
                self.run_step(step, history, until)
        except ScheduleEnded as e:
            self.ended = str(e)
            log.warning("targeted schedule ended early: %s", e)

    def run_step(self, step: Step, history: HistoryWriter, until: float = math.inf) -> list[Op]:
        """Run one step now, journaled; its completion ops (none once ``heal_all`` has
        stopped the nemesis). ScheduleEnded, already journaled, when the step could not
        be done (no target, an action that failed, a wait not met by its bound or ``until``).
        One step at a time: ``run`` and ``run_step`` are never called concurrently."""
        self._completions = []
        if isinstance(step, Wait):
            self._wait(step, until, history)
        else:
            with self._lock:
                if not self._halt.is_set():
                    self._act(step, history)
        return self._completions

    def _view(self, controller: bool = False, registered: bool = False, target: Target | None = None,
              committed: str | None = None, high_watermark: int | None = None) -> View:
        """Live state, with the coordinator of ``target``'s group or transaction if it names one,
        group ``committed``'s offsets and partition ``high_watermark``'s, if asked."""
        active = with_timeout(self.cluster.active_controller, LIVE_STATE_TIMEOUT_S,
                              "active controller") if controller else None
        brokers = frozenset(self._read_registered()) if registered else None
        group = target.group if target is not None else None
        transaction = target.transaction if target is not None else None
        coordinators = {} if group is None else {group: self._coordinator(OFFSETS_TOPIC, group)}
        transactions = {} if transaction is None else {
            transaction: self._coordinator(TRANSACTIONS_TOPIC, transaction)}
        offsets = {} if committed is None else {committed: self._read_committed(committed)}
        hws = {} if high_watermark is None else {
            high_watermark: self._high_watermark(high_watermark)[self.topic.name, high_watermark]}
        return View(self._read_states(), active, brokers, coordinators, offsets, transactions, hws)

    def _admin_child(self, node: int | None = None) -> AdminChild:
        """The admin client bootstrapped on every proxy, or on ``node``'s alone;
        NemesisError once ``heal_all`` has begun."""
        with self._admins_lock:
            if self._halt.is_set():
                raise NemesisError("healing: no admin request now")
            if node not in self._admins:
                bootstrap = self.cluster.bootstrap_servers()
                if node is not None:
                    bootstrap = dict(self._proxies())[node]
                self._admins[node] = AdminChild(bootstrap, METADATA_TIMEOUT_S)
            return self._admins[node]

    def _coordinator(self, topic: str, key: str) -> int | None:
        """The broker coordinating ``key``, as every node that answers names it
        (:func:`agreed_coordinator`). A client sends its request to any broker it has
        learned of, so a node's proxy is often answered by another broker: the nodes are
        asked again, for :data:`COORDINATOR_ROUNDS_S` at most (and not past the look of
        the wait in progress), until each node any round reached has given its own answer
        in this round or the one before, and they agree."""
        end = time.monotonic() + COORDINATOR_ROUNDS_S
        if self._look_by is not None:
            end = min(end, self._look_by)
        before: dict[int, kafka_client.Metadata] = {}
        reached: set[int] = set()
        while True:
            answers = self._answers(topic)
            now = {answer.broker: answer for _, answer in answers}
            reached |= {node for node, _ in answers}
            views = {**before, **now}
            try:
                return agreed_coordinator(views, reached - views.keys(), topic, key)
            except NemesisError:
                if time.monotonic() >= end or self._halt.wait(POLL_S):
                    raise
            before = now

    def _committed(self, group: str) -> Committed:
        """``group``'s committed offsets, asked once every broker names one coordinator and
        kept only if all name it again after: no broker can then have named another in
        between (a broker catches up, it does not fall behind again unfaulted). Asked
        through a client made for that coordinator (bootstrapped on its proxy), which can
        have cached no other (a client of all may have cached the old one, which answers
        from what it held until it unloads the group). NemesisError otherwise, or when
        none answers."""
        node = self._coordinator(OFFSETS_TOPIC, group)
        if node is None:
            raise NemesisError(f"group {group}'s partition of {OFFSETS_TOPIC} has no leader")
        try:
            offsets = self._admin_child(node).call(kafka_client.committed_offsets, group, METADATA_TIMEOUT_S)
        except (KafkaException, TimeoutError) as e:
            raise NemesisError(f"no committed offsets of group {group}: {e}") from None
        after = self._coordinator(OFFSETS_TOPIC, group)
        if after != node:
            raise NemesisError(f"group {group}'s coordinator was {node} when its offsets were asked "
                               f"and {after} once they came")
        return offsets

    def _high_watermark(self, partition: int) -> Committed:
        """The test topic's ``partition`` -> its high watermark, the floor of a ``committed
        past P`` wait and what a ``passed`` wait compares
        (:func:`~faultline.targeted.condition_met`); NemesisError when its leader does not
        answer."""
        try:
            answers = self._admin_child().call(kafka_client.high_watermarks, self.topic.name, [partition],
                                               METADATA_TIMEOUT_S)
            answer = answers[partition]
        except KafkaException as e:
            answer = str(e)
        if isinstance(answer, str):
            raise NemesisError(f"no high watermark of partition {partition}: {answer}")
        return {(self.topic.name, partition): answer.offset}

    def _courtesy(self) -> View:
        """The view for a step that names its nodes (``node 3``, a bound name): live state
        only feeds the op's ``leaders`` snapshot there, so none is no reason to stop."""
        try:
            return self._view()
        except NemesisError as e:
            log.info("no leader snapshot for the nemesis op: %s", e)
            return View({})

    def _states(self) -> dict[int, PartitionState]:
        """The topic's partitions, from the metadata :meth:`_metadata` trusts."""
        return self._metadata().states

    def _registered(self) -> set[int]:
        """The brokers registered and unfenced, from the metadata :meth:`_metadata` trusts."""
        return set(self._metadata().brokers)

    def _metadata(self) -> kafka_client.Metadata:
        """The test topic's metadata from the brokers that answer, the stale left out
        (:func:`trusted`)."""
        return trusted([answer for _, answer in self._answers(self.topic.name)])

    def _proxies(self) -> list[tuple[int, str]]:
        """Each node's id and proxy, in node order (:meth:`Cluster.bootstrap_servers`)."""
        proxies = self.cluster.bootstrap_servers().split(",")
        return [(node.id, proxy) for node, proxy in zip(self.cluster.nodes, proxies, strict=True)]

    def _answers(self, topic: str) -> list[tuple[int, kafka_client.Metadata]]:
        """The Metadata answers for ``topic`` through each node's proxy, in the order they
        came, each with the node asked: that node's own, or another broker's that the
        client had learned of and sent it to (the answer's ``broker``).

        A schedule pauses and isolates brokers on purpose, and a client that knows every
        broker may send its request to one that will never answer; so each proxy gets a
        short-lived client of its own, all at once, but for the nodes known not to answer
        (down, or paused by this nemesis). Every
        answer is awaited, for :data:`METADATA_TIMEOUT_S` and a second at most, as the
        first may be a stale one; a node that gives none by then is not heard.
        NemesisError with every broker's reason when none answers in time.
        """
        answers: queue.Queue[tuple[int, str, kafka_client.Metadata | Exception]] = queue.Queue()

        def ask(node: int, proxy: str) -> None:
            try:
                with kafka_client.new_admin(proxy, METADATA_TIMEOUT_S) as admin:
                    answer = kafka_client.topic_metadata(admin, topic, METADATA_TIMEOUT_S)
                    # -1: the bootstrap broker, whose id the client had not learned; answered
                    # before the client is closed, which may take a while
                    answers.put((node, proxy, answer if answer.broker >= 0 else answer._replace(broker=node)))
            except Exception as e:  # no answer from this broker: another may give one
                answers.put((node, proxy, e))

        live = {n.id for n in self.cluster.nodes if n.is_alive() and n.id not in self.pause.faulted}
        proxies = [(node, proxy) for node, proxy in self._proxies() if node in live]
        for node, proxy in proxies:
            threading.Thread(target=ask, args=(node, proxy), name="nemesis-metadata", daemon=True).start()
        deadline = time.monotonic() + METADATA_TIMEOUT_S + 1.0
        got: list[tuple[int, kafka_client.Metadata]] = []
        errors: list[str] = []
        for _ in proxies:
            try:
                node, proxy, answer = answers.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if isinstance(answer, Exception):
                errors.append(f"{proxy}: {answer}")
            else:
                got.append((node, answer))
        if not got:
            raise NemesisError(f"no broker gave {topic}'s metadata within {METADATA_TIMEOUT_S:.0f} s "
                               f"({'; '.join(errors) or 'no answer'})")
        return got

    def _act(self, step: Action, history: HistoryWriter) -> None:
        value: dict[str, Any] = {"step": step.text}
        if step.verb == "end":
            history.append("nemesis", "info", "end", value)
            self._main_phase_over.set()
            self._completions.append(history.append("nemesis", "info", "end",
                                                    {**value, "result": "main phase ended"}))
            return
        if step.verb == "heal":
            self._journaled(history, "heal", {**value, "kind": "isolate", "nodes": self._network_nodes()},
                            self.partition.invoke)
            self._grudge, self._replication = {}, {}
            return
        if step.verb == "restore":
            self._journaled(history, "restore", {**value, "kind": "links", "nodes": sorted(self._degraded)},
                            self.links.invoke)
            self._degraded.clear()
            return
        if step.verb == "undelay":
            self._journaled(history, "clear-toxics",
                            {**value, "kind": "latency", "nodes": sorted(self._delayed)}, self.toxics.invoke)
            self._delayed.clear()
            return
        if step.on_clients:
            self._client_step(step, value, history)
            return
        if step.verb == "reset":
            self._journaled(history, "reset-clock", {**value, "kind": "clock", "nodes": sorted(self._skewed)},
                            self.clock.invoke)
            self._skewed.clear()
            return
        assert step.target is not None
        live = step.target.role not in ("node", "name", "first", "second")
        try:
            view = self._view(controller=step.target.role == "controller",
                              target=step.target) if live else self._courtesy()
            targets = resolve(step.target, view, self._bindings)
        except (NemesisError, ValueError) as e:
            history.append("nemesis", "info", ACTIONS[step.verb], {**value, "role": str(step.target)})
            history.append("nemesis", "info", ACTIONS[step.verb],
                           {**value, "role": str(step.target), "nodes": [], "result": "skipped"},
                           error=f"no target: {e}")
            raise ScheduleEnded(f"{step.text!r}: no target: {e}") from None
        if step.target.partition is not None:
            self._last_leader[step.target.partition] = view.partitions[step.target.partition].leader
        if step.bind is not None:
            self._bindings[step.bind] = targets
        value.update(role=str(step.target), targets=list(targets),
                     leaders=leaders_json(self.topic.name, view.partitions))
        nodes = list(targets)
        node_faults: dict[str, tuple[str, NodeFault]] = {
            "crash": ("kill", self.kill), "pause": ("pause", self.pause),
            "resume": ("pause", self.pause), "wipe": ("wipe", self.wipe),
            "lose-unflushed": ("lose-unflushed", self.lose_unflushed)}
        if step.verb in node_faults:
            kind, nemesis = node_faults[step.verb]
            self._journaled(history, ACTIONS[step.verb], {**value, "kind": kind, "nodes": nodes},
                            nemesis.invoke)
            if nemesis.leaves_down:
                self.pause.forget(nodes)  # the backend killed them, paused or not
        elif step.verb in ("isolate", "hold"):
            group = set(targets)
            rest = {n.id for n in self.cluster.nodes} - group
            which = self._grudge if step.verb == "isolate" else self._replication
            for node, drops in complete([group, rest]).items():
                which[node] = which.get(node, frozenset()) | drops
            self._journaled(history, "partition", {**value, "kind": step.verb, **self._network(),
                                                   "nodes": nodes_of(which)}, self.partition.invoke)
        elif step.verb == "release":
            released = set(targets)
            self._replication = {n: d - released for n, d in self._replication.items()
                                 if n not in released and d - released}
            self._journaled(history, "heal", {**value, "kind": "release", **self._network(), "nodes": nodes},
                            self.partition.invoke)
        elif step.verb == "degrade":
            self._degraded.update(nodes)  # possibly degraded from here on, failed or not
            kind, amount = (("loss", {"loss": step.loss}) if step.loss is not None
                            else ("bandwidth", {"rate_kbit": step.rate_kbit}))
            peers = sorted({n.id for n in self.cluster.nodes} - set(nodes))
            self._journaled(history, "degrade", {**value, "kind": kind, "nodes": nodes, "peers": peers,
                                                 **amount}, self.links.invoke)
        elif step.verb == "delay" and step.ends:
            assert step.delay_ms is not None
            self._delayed.update(nodes)  # possibly held from here on, failed or not
            timeout_ms = self.cluster.spec.producer.request_timeout_ms
            window_ms = max(1, min(step.delay_ms, int(ENDS_WINDOW * timeout_ms)))
            self._journaled(history, "toxic", {**value, "kind": "late-end", "nodes": nodes,
                                               "window_ms": window_ms, "hold_ms": step.delay_ms},
                            self.toxics.invoke)
        elif step.verb == "delay":
            self._delayed.update(nodes)  # possibly delayed from here on, failed or not
            toxic = {"kind": "latency", "streams": ["upstream"],
                     "attributes": {"latency": step.delay_ms, "jitter": 0},
                     "toxicity": 1.0 if step.share is None else step.share}
            self._journaled(history, "toxic", {**value, "kind": "latency", "nodes": nodes, "toxic": toxic},
                            self.toxics.invoke)
        elif step.verb in ("bump", "strobe"):
            assert step.clock is not None
            self._skewed.update(nodes)  # possibly set off from here on, failed or not
            change: dict[str, Any] = {"offset_s": step.clock.offset_s}
            if step.verb == "strobe":
                change.update(period_s=STROBE_PERIOD_S, for_s=step.clock.for_s)
            self._journaled(history, "clock", {**value, "kind": step.verb, "nodes": nodes, **change},
                            self.clock.invoke)
        elif step.verb == "restart":
            running = [n for n in nodes if self.cluster.node(n).is_alive()]
            if running:
                down: NodeFault = self.kill if step.unclean else self.stop
                self._journaled(history, down.family, {**value, "kind": down.family, "nodes": running},
                                down.invoke)
                self.pause.forget(running)  # a stop resumes a paused node first, a kill kills it
            self._journaled(history, "start", {**value, "kind": "restart", "nodes": nodes}, self._start)

    def _client_step(self, step: Action, value: dict[str, Any], history: HistoryWriter) -> None:
        """``crash client N`` / ``crash clients`` / ``crash consumer N``: one ``crash-client``
        per client; ``restart ...``: one ``restart-client`` of the crashed; ``pause ... for
        S s``: a ``pause-client``, S seconds (cut short by the heal, which resumes it), then
        its ``resume-client``; ``stop consumer N``: a ``stop-client``; ``start consumer N``:
        a ``start-client`` of the stopped."""
        role = "clients" if step.clients is not None else "consumers"
        named = step.clients if step.clients is not None else step.consumers
        indexes = list(named or range(self.clients.workload.clients))
        if step.verb == "crash":
            for index in indexes:
                self._journaled(history, "crash-client", {**value, "kind": "crash", role: [index]},
                                self.clients.invoke)
        elif step.verb == "restart":
            self._journaled(history, "restart-client", {**value, "kind": "crash", role: indexes},
                            self.clients.invoke)
        elif step.verb in ("stop", "start"):
            self._journaled(history, f"{step.verb}-client", {**value, "kind": "stop", role: indexes},
                            self.clients.invoke)
        else:
            self._journaled(history, "pause-client", {**value, "kind": "pause", role: indexes,
                                                      "for_s": step.for_s}, self.clients.invoke)
            if not self._halt.wait(step.for_s):
                self._journaled(history, "resume-client", {**value, "kind": "pause", role: indexes},
                                self.clients.invoke)

    def _network(self) -> dict[str, Any]:
        """The network faults in effect, in the history form."""
        return {"grudge": to_json(self._grudge), "replication": to_json(self._replication)}

    def _network_nodes(self) -> list[int]:
        return sorted(set(nodes_of(self._grudge)) | set(nodes_of(self._replication)))

    def _start(self, op: Op) -> Op:
        """Start each node of ``op``, through the nemesis that took it down (so its
        teardown no longer counts it), or directly if none did."""
        for node in (op.value or {}).get("nodes", []):
            owners = [n for n in self._down if node in n.faulted] or [self.kill]
            for owner in owners:
                owner.invoke(Op(op.index, op.time, op.process, op.type, "start", {"nodes": [node]}))
        return completed(op, result="started")

    def _journaled(self, history: HistoryWriter, f: str, value: dict[str, Any],
                   invoke: Callable[[Op], Op]) -> None:
        """One action as an invoke and a completion op; a failure (raised, or the
        completion's ``error``) is journaled on the completion and ends the schedule
        (teardown heals what may be left)."""
        op = history.append("nemesis", "info", f, value)
        try:
            done = invoke(op)
        except Exception as e:  # journaled, then the schedule stops
            error = error_text(e)
            history.append("nemesis", "info", f, value, error=error)
            raise ScheduleEnded(f"{value.get('step')!r} failed: {error}") from e
        self._completions.append(history.append("nemesis", "info", done.f, done.value, error=done.error))
        if done.error is not None:
            raise ScheduleEnded(f"{value.get('step')!r} failed: {done.error}")

    def _wait(self, wait: Wait, until: float, history: HistoryWriter) -> None:
        started = time.monotonic()
        value: dict[str, Any] = {"step": wait.text, "within_s": wait.seconds}
        history.append("nemesis", "info", "wait", value)
        if wait.kind == "for":
            self._halt.wait(max(0.0, min(started + wait.seconds, until) - started))
            self._completions.append(history.append("nemesis", "info", "wait", {**value, "result": "waited"}))
            return
        deadline = min(started + wait.seconds, until)
        previous = self._last_leader.get(wait.partition) if wait.partition is not None else None
        known = wait.partition in self._last_leader
        before: Committed | None = None  # the group's offsets at the first read
        commits_before: dict[int, int] | None = None  # the producers' commits at the first read
        seen = "nothing yet"
        while True:
            self._look_by = deadline  # a look's coordinator rounds end there
            try:
                if wait.kind == "holds":
                    view = View({}, holdings=self.clients.holdings())
                elif wait.kind == "client-committed":
                    commits = self.clients.commits()
                    if commits_before is None:
                        commits_before = commits
                    view = View({}, commits={i: n - commits_before.get(i, 0) for i, n in commits.items()})
                else:
                    view = self._view(registered=wait.kind in ("registered", "fenced"),
                                      target=wait.target,
                                      committed=wait.group,
                                      high_watermark=wait.partition if wait.kind == "passed" else None)
                if not known and wait.partition is not None:
                    state = view.partitions.get(wait.partition)
                    previous, known = (state.leader if state is not None else None), True
                if before is None and wait.kind == "committed" and wait.group is not None:
                    before = (view.committed[wait.group] if wait.partition is None
                              else self._high_watermark(wait.partition))
                met, seen = condition_met(wait, view, self._bindings, previous, before)
            except NemesisError as e:
                met, seen = False, f"no metadata: {e}"
            finally:
                self._look_by = None
            if met:
                self._completions.append(history.append("nemesis", "info", "wait", {
                    **value, "result": f"met after {time.monotonic() - started:.1f} s", "seen": seen}))
                return
            if time.monotonic() >= deadline or self._halt.wait(POLL_S):
                break
        if self._halt.is_set():
            history.append("nemesis", "info", "wait", {**value, "result": "stopped", "seen": seen})
            raise ScheduleEnded(f"{wait.text!r}: stopped by the heal")
        bound = min(wait.seconds, until - started)
        history.append("nemesis", "info", "wait", {**value, "result": "not met", "seen": seen},
                       error=f"not met within {bound:.0f} s")
        raise ScheduleEnded(f"{wait.text!r} not met within {bound:.0f} s (last seen: {seen})")

    # -- healing ------------------------------------------------------------------

    def heal_all(self, history: HistoryWriter | None = None) -> None:
        """Stop ``run`` and undo every fault in effect: journaled heals first (network,
        paused nodes, nodes down), then every family nemesis's teardown regardless.
        Raises NemesisError only if a teardown could not heal, after trying all; ends the
        waits' admin clients."""
        self._halt.set()
        with self._admins_lock:  # _halt is set: no admin client is made after
            admins, self._admins = list(self._admins.values()), {}
        for admin in admins:
            admin.close()
        errors: list[str] = []
        with self._lock:
            if history is not None:
                heals: list[tuple[str, dict[str, Any], Callable[[Op], Op]]] = []
                if self._grudge or self._replication:
                    heals.append(("heal", {"kind": "isolate", "nodes": self._network_nodes()},
                                  self.partition.invoke))
                if self._degraded:
                    heals.append(("restore", {"kind": "links", "nodes": sorted(self._degraded)},
                                  self.links.invoke))
                if self._skewed:
                    heals.append(("reset-clock", {"kind": "clock", "nodes": sorted(self._skewed)},
                                  self.clock.invoke))
                if self.pause.faulted:
                    heals.append(("resume", {"kind": "pause", "nodes": sorted(self.pause.faulted)},
                                  self.pause.invoke))
                down = sorted(frozenset[int]().union(*(n.faulted for n in self._down)))
                if down:
                    heals.append(("start", {"kind": "restart", "nodes": down}, self._start))
                for role in ROLES:
                    for f, kind, held in (("resume-client", "pause", self.clients.paused_of(role)),
                                          ("restart-client", "crash", self.clients.crashed_of(role)),
                                          ("start-client", "stop", self.clients.stopped_of(role))):
                        if held:
                            heals.append((f, {"kind": kind, role: held}, self.clients.invoke))
                if self._delayed:  # last: it waits until what a delay of ends held has landed
                    heals.append(("clear-toxics", {"kind": "latency", "nodes": sorted(self._delayed)},
                                  self.toxics.invoke))
                for f, value, invoke in heals:
                    try:
                        self._journaled(history, f, value, invoke)
                    except ScheduleEnded:  # journaled; the teardown below tries again
                        pass
                    except Exception as e:  # e.g. a closed history: the teardowns still run
                        errors.append(f"{f}: {e}")
            self._grudge, self._replication = {}, {}
            self._degraded, self._delayed, self._skewed = set(), set(), set()
            for nemesis in self._needed():
                try:
                    nemesis.teardown()
                except Exception as e:  # every nemesis gets its teardown
                    errors.append(f"{nemesis.family}: {e}")
        if errors:
            raise NemesisError(f"could not heal every fault: {'; '.join(errors)}")


def describe(step: str, ops: Sequence[Op]) -> str:
    """One line for a step done: the step, whom its role resolved to (unless it named
    its node), then each action and its result, e.g. ``crash leader of 0 (leader of 0 =
    node 2) -> kill 2: killed node 2``."""
    first = ops[0].value if ops and isinstance(ops[0].value, dict) else {}
    head = step
    role, targets = first.get("role"), first.get("targets")
    if role is not None and targets is not None and not str(role).startswith("node "):
        head += f" ({role} = node{'s' if len(targets) != 1 else ''} {','.join(map(str, targets))})"
    parts = []
    for op in ops:
        v = op.value if isinstance(op.value, dict) else {}
        what = f"{op.f} {','.join(map(str, v['nodes']))}" if v.get("nodes") else op.f
        seen = f" ({v['seen']})" if "seen" in v else ""
        parts.append(f"{what}: {v.get('result', 'done')}{seen}")
    return f"{head} -> {'; '.join(parts)}" if parts else head


#: ``TOPIC/P`` in a step: a Kafka topic name (letters, digits, ``._-``) and a partition.
_TOPIC_PARTITION = re.compile(r"(?<![\w./-])([A-Za-z0-9._-]+)/(\d+)\b")


def topics_named(text: str) -> list[str]:
    """The topics a step names as ``TOPIC/P``, in order."""
    return [m.group(1) for m in _TOPIC_PARTITION.finditer(text)]


def trusted(answers: Sequence[kafka_client.Metadata]) -> kafka_client.Metadata:
    """The first of ``answers`` (in the order they came) whose broker no answer leaves out
    of the brokers it lists: a broker cut off from the controller answers from a cache
    frozen since (itself leader, every broker registered), while the brokers in touch saw
    it fenced. NemesisError when another answer leaves out each one's broker."""
    for answer in answers:
        if all(answer.broker in other.brokers for other in answers):
            return answer
    raise NemesisError("the brokers disagree on who is registered, so none's metadata is trusted: "
                       + "; ".join(f"broker {a.broker} lists {sorted(a.brokers)}" for a in answers))


def agreed_coordinator(views: Mapping[int, kafka_client.Metadata], unheard: Collection[int],
                       topic: str, key: str) -> int | None:
    """The broker coordinating ``key`` (a group's id with the offsets topic for ``topic``,
    a transactional id's with the transaction state topic), the leader of its partition
    of ``topic`` (:func:`~faultline.targeted.coordinator_partition`), as each broker's
    own Metadata answer in ``views`` names it; None when all say it has none. A broker
    that has not yet learned it was replaced (cut off from the controller, or healed and
    not yet caught up) names itself, so answers a client's FindCoordinator, and an
    OffsetFetch with the offsets it held then. NemesisError saying who names whom when
    they do not all name one, or naming the nodes ``unheard`` (reached, their own
    answer not given)."""
    if unheard:
        raise NemesisError(f"no answer of node(s) {sorted(unheard)}'s own (another broker answered "
                           f"through each proxy), so none on who coordinates {key} in {topic}")
    named = {broker: state.leader if (state := view.states.get(coordinator_partition(key, len(view.states))))
             else None for broker, view in views.items()}
    if len(set(named.values())) == 1:
        return next(iter(named.values()))
    raise NemesisError(f"the brokers do not all name one coordinator of {key} in {topic}: "
                       + "; ".join(f"broker {b} names {c if c is not None else 'none'}"
                                   for b, c in sorted(named.items())))


class HandPackage(ScriptedPackage):
    """A targeted schedule typed one step at a time: a hand-driven session's nemesis.

    :meth:`submit` (from any thread) hands a step to :meth:`run`, which runs it as the
    scripted nemesis runs a step of its schedule, journaled the same way, and returns
    its completion ops; a step that fails is journaled and reported, and the next one
    runs all the same (it does not end anything). ``run`` serves steps until
    ``heal_all`` or its deadline; a step submitted after that is refused. Every family
    nemesis is bound at ``setup``, since any step may come. Names bound with ``as``
    stay bound for later steps.
    """

    def __init__(self, cluster: Cluster, states: Callable[[], dict[int, PartitionState]] | None = None,
                 topic: TopicSpec | None = None) -> None:
        super().__init__(cluster, (), states, topic=topic)
        #: set once ``run`` serves steps, with ``journal`` the history it journals to
        self.serving = threading.Event()
        self.journal: HistoryWriter | None = None
        self._inbox: queue.Queue[_Request] = queue.Queue()
        self._closed = False
        self._texts: list[str] = []  # every step accepted so far: later ones may use its names

    def _needed(self) -> list[Any]:
        return [*self._node_faults, self.partition, self.links, self.toxics, self.clients]

    def parse(self, text: str) -> Step:
        """``text`` as a step, checked against the topic's partitions, the nodes and the
        names bound so far; ``TOPIC/P`` reads as ``P`` (``TOPIC`` must be :attr:`topic`).
        SpecError with what is wrong."""
        for other in set(topics_named(text)) - {self.topic.name}:
            raise SpecError(f"{other!r} is not the topic these steps act on ({self.topic.name}): "
                            "every step names the same topic")
        text = _TOPIC_PARTITION.sub(r"\2", text.strip())
        if text.lower() == "end":
            raise SpecError("a session's main phase ends with 'faultline cluster down', not 'end'")
        lines = [*self._texts, text]
        try:
            return parse_schedule(lines, self.topic.partitions, self.cluster.spec.kafka.nodes)[-1]
        except SpecError as e:  # the schedule's own error names its index: only this step can be wrong
            raise SpecError(str(e).removeprefix(f"nemesis.schedule[{len(lines) - 1}] ")) from None

    def _accept(self, text: str) -> Step:
        """:meth:`parse` ``text`` and remember it for later steps' names (under the lock);
        NemesisError once the nemesis no longer serves steps."""
        step = self.parse(text)
        if self._closed:
            raise NemesisError("the session is ending: it takes no more steps")
        self._texts.append(step.text)
        return step

    def submit(self, text: str) -> list[Op]:
        """Run the step ``text`` in ``run``'s thread and wait for it; its completion ops.
        SpecError when it does not parse; NemesisError when it failed (journaled) or
        the nemesis no longer serves steps."""
        with self._lock:
            request = _Request(self._accept(text))
            self._inbox.put(request)
        request.done.wait()
        if request.error is not None:
            raise NemesisError(request.error)
        return request.ops

    def run_text(self, text: str, history: HistoryWriter) -> list[Op]:
        """Run the step ``text`` now, in the caller's thread, journaled to ``history``
        (instead of :meth:`run`, never beside it); its completion ops. SpecError when it
        does not parse; NemesisError when it failed (journaled) or after ``heal_all``."""
        if not self._set_up:
            self.setup()
        with self._lock:
            step = self._accept(text)
            if self._halt.is_set():
                raise NemesisError(f"{text!r}: not run, every fault was healed for good")
        try:
            return self.run_step(step, history)
        except ScheduleEnded as e:
            raise NemesisError(str(e)) from None

    def run(self, until: float, history: HistoryWriter) -> None:
        """Serve submitted steps, one at a time, until ``heal_all`` or ``until``."""
        if not self._set_up:
            self.setup()
        self.journal = history
        self.serving.set()
        try:
            while not self._halt.is_set() and time.monotonic() < until:
                try:
                    request = self._inbox.get(timeout=POLL_S)
                except queue.Empty:
                    continue
                try:
                    request.ops = self.run_step(request.step, history, until)
                    if not request.ops:
                        request.error = request.not_run()
                except ScheduleEnded as e:
                    request.error = str(e)
                except Exception as e:  # reported to whoever typed the step; the session goes on
                    log.exception("step %r failed", request.step.text)
                    request.error = f"{request.step.text!r} failed: {error_text(e)}"
                finally:
                    request.done.set()
        finally:
            with self._lock:
                self._closed = True
            while not self._inbox.empty():
                left = self._inbox.get()
                left.error = left.not_run()
                left.done.set()


class _Request:
    """One submitted step and, once ``done``, its completion ops or its error."""

    __slots__ = ("done", "error", "ops", "step")

    def __init__(self, step: Step) -> None:
        self.step = step
        self.done = threading.Event()
        self.ops: list[Op] = []
        self.error: str | None = None

    def not_run(self) -> str:
        """The error of a step the ending session did not run."""
        return f"{self.step.text!r}: not run, the session is ending"
