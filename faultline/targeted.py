"""Targeted fault schedules: steps named by roles and observed states, not node numbers. Pure.

A targeted schedule is a list of steps, one line each, run in order from the start of
the main phase (:mod:`faultline.nemeses.scripted` executes it). Partitions ``P`` are
partition numbers of the test topic; ``N`` a node id; ``NAME`` a name an earlier step
bound with ``as NAME``::

    crash   TARGET [as NAME]        SIGKILL; the node stays down
    restart TARGET [unclean]        a down node: start it; a running one: stop it
                                    (SIGTERM, controlled shutdown; unclean: SIGKILL),
                                    then start it
    pause   TARGET [as NAME]        SIGSTOP
    resume  TARGET                  SIGCONT
    wipe    TARGET [as NAME]        SIGKILL and delete its partition data; stays down
    lose-unflushed TARGET [as NAME] SIGKILL and cut each log back to its recovery point
                                    (what was not flushed is gone); stays down
    isolate TARGET [as NAME]        cut the target's nodes (as one group) off from the
                                    others; adds to any isolation already in effect
    hold    TARGET [as NAME]        cut only replication between the target's nodes (as
                                    one group) and the others: inter-broker traffic is
                                    dropped, the controller listener and the clients'
                                    proxies are not, so a held node stays registered,
                                    unfenced and in the KRaft quorum, but neither fetches
                                    from nor serves fetches to the others; adds to any
                                    hold already in effect
    release TARGET                  lift the holds on the target's nodes
    heal                            remove every network partition and hold
    degrade TARGET loss P%          drop P% of the packets between the target's node
                                    (one node) and every other node, either way
    degrade TARGET rate N kbit      limit the traffic between them to N kbit/s each way
    restore                         remove every degradation of links
    delay   TARGET by MS ms         hold the clients' requests to the target's nodes MS
                                    milliseconds in their proxies (a Toxiproxy latency
                                    toxic, upstream: the replies come back at once), so a
                                    request can land after its client gave up on it
    delay   TARGET by MS ms on P% of connections   the same on each connection to the
                                    target's proxies with probability P% (Toxiproxy's
                                    toxicity, drawn for each connection open when the toxic
                                    is added and each opened later; again when another toxic
                                    of that proxy is added or removed), so a client's retry
                                    on a new connection may land at once while the request
                                    it retries is held
    delay ends at TARGET by MS ms   hold each client connection to the target's nodes
                                    that carries a transaction's end (an EndTxn request)
                                    in the step's first 0.8 of the producers' request
                                    timeout (at most MS milliseconds): its
                                    packets are dropped until MS milliseconds after the
                                    step began (the step lasts that long; MS at most
                                    10000), so the request lands at its next
                                    retransmission after that, while a client's retry on
                                    a new connection goes through at once
                                    (:mod:`faultline.cluster.host.ends`). Every client's
                                    EndTxn to the target's nodes, not one producer's. With
                                    MS above the producers' request timeout, a commit or
                                    abort can land in the producer's next transaction
                                    (KAFKA-17754)
    undelay                         remove every delay; after a ``delay ends``, complete
                                    once every request it held has landed (twice the
                                    time from its start to its release, and 2 s more:
                                    :func:`faultline.nemeses.toxics.landed_by`)
    crash client N | crash clients  SIGKILL producer N (from 0), or every producer, of the
                                    workload (client crashes, the ``clients`` family);
                                    its open sends end info; it stays down
    restart client N | restart clients   start a crashed producer (or every crashed one)
                                    again, under a new process number
    crash consumer N                SIGKILL consumer N (from 0) of the group workload; its
                                    open poll or commit, if any, ends info; it stays down
    restart consumer N              start a crashed consumer again: a new member under a
                                    new process number (the same group.instance.id with
                                    consumer.static)
    pause client N for S s          SIGSTOP producer N, SIGCONT it S seconds later (the
    pause consumer N for S s        step lasts S seconds); a consumer paused past the
                                    session timeout is expelled from the group
    stop consumer N                 consumer N leaves the group: it closes (LeaveGroup,
                                    its partitions revoked) and its process ends; it
                                    stays down
    start consumer N                start a stopped consumer again: a new member under a
                                    new process number
    bump TARGET clock +S s          set the wall clock of the target's nodes S seconds
                                    ahead (-S: behind) of the true time
    strobe TARGET clock S s for D s make their clocks jump S seconds ahead and back,
                                    every 2 s, for D seconds; then they are true again
    reset clocks                    set every node's clock true again (ends any strobe)
    wait for SECONDS s
    wait until CONDITION [within SECONDS s]     (default bound: 30 s)
    end                             end the main phase now (the last step only): the
                                    workload stops and settles and every fault heals, as
                                    at the time limit, which still bounds the phase

    TARGET     leader of P | followers of P | follower of P | controller | node N | N | NAME
               | first of NAME | second of NAME  (the lowest, the next node id NAME bound)
               | coordinator of group G         (G in lower case, as every word)
               | coordinator of transaction T   (T a transactional.id, likewise)
    CONDITION  isr of P is {MEMBER, ...}       MEMBER: leader | N | NAME
               P has a new leader
               P caught up | caught up          (every replica of P, or of every
                                                 partition, in the ISR)
               TARGET registered                (every node of TARGET registered and
                                                 unfenced: listed in the brokers' metadata)
               TARGET fenced                    (no node of TARGET listed: fenced, or
                                                 never registered)
               group G has committed            (G's committed offsets, as its coordinator
                                                 answers, changed since the wait first read
                                                 them: one appeared or moved; read
                                                 while every broker names one
                                                 coordinator of G)
               group G has committed past P     (G's committed offset of P above the high
                                                 watermark P had when the wait began)
               P has passed group G             (P's high watermark above G's committed
                                                 offset of P)
               consumer N holds partitions      (group consumer N's live member holds a
                                                 partition: assigned, by its own journal,
                                                 and not since revoked or lost)
               consumers hold partitions        (every group consumer's does: never with
                                                 more consumers than partitions)
               client N has committed           (txn producer N, or its replacement,
                                                 committed a transaction since the wait
                                                 began: a txn it journaled ok)

Roles are resolved from live state when their step runs: ``leader of P`` is P's
current leader, ``followers of P`` every other replica of P, ``follower of P`` the
lowest-numbered follower in P's ISR, ``controller`` the active KRaft controller,
``coordinator of group G`` the leader of G's ``__consumer_offsets`` partition,
``coordinator of transaction T`` the leader of T's ``__transaction_state`` partition
(both :func:`coordinator_partition`), each as every broker that answers names it (none
while one that was replaced names itself still).
``P has a new leader`` holds once P is led by a node other than the leader that the
schedule last resolved for P (or, before any, the one P had when the wait began).
``group G has committed`` cannot see a commit of the offsets G had committed already.
``group G has committed past P`` holds once G's committed offset of P is above the high
watermark P had when the wait began (so never on a partition nobody writes to): past
every record P held then, and after ``isr of P is {leader}`` has held a moment (the
leader raises the HW to its log end when the ISR shrinks) past every other replica's
log end. ``P has passed group G`` holds once P's high watermark is above G's committed
offset of P: a member that starts from that offset finds records there (after a
truncation below it, new ones). It never holds while G has no offset of P, and holds at
once while G's members read behind the log's end: it means something once they are
stopped.
``consumers hold partitions`` is the members' own word, not the coordinator's: a member
holds what its client was given (the ``assign`` it journaled) until it journals the
``revoke`` or ``lost`` of it, or is retired; a crashed or stopped consumer holds nothing,
a paused one what it held. So a step after it finds each member with partitions to give
up, to lose, or to leave with.
Every wait is bounded; a wait that is not met in time ends the schedule.

Words are case-insensitive; ``the`` and ``a`` are ignored (``crash the leader of 0``).
:func:`parse_schedule` validates a whole schedule up front and raises SpecError with
one line naming the step; :func:`resolve` and :func:`condition_met` are the pure
halves of execution, over a :class:`View` of live state.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from faultline.errors import SpecError
from faultline.faults import family_of_fault

#: Verbs that take a target, and whether they may bind a name with ``as``.
VERBS: Mapping[str, bool] = {"crash": True, "restart": False, "pause": True, "resume": False,
                             "wipe": True, "lose-unflushed": True, "isolate": True, "hold": True,
                             "release": False, "degrade": False, "bump": False, "strobe": False,
                             "delay": False}
#: The default bound of ``wait until``, in seconds.
DEFAULT_WAIT_S = 30.0
#: The longest any wait may be, in seconds.
MAX_WAIT_S = 600.0
#: The farthest a clock step may set a clock from the true time, in seconds: an hour, the
#: broker's default ``log.message.timestamp.after.max.ms`` (a clock further behind rejects
#: every record as from the future) and far below a day, its ``producer.id.expiration.ms``.
MAX_CLOCK_OFFSET_S = 3600
#: The longest a ``delay`` may hold a request, in milliseconds: the longest wait.
MAX_DELAY_MS = int(MAX_WAIT_S * 1000)
#: How long a ``delay ends`` marks the connections that carry a transaction's end, from its
#: start, as a share of the producers' request timeout (at most the hold): a client's retry
#: comes a request timeout after the request it retries, so it comes after the window.
ENDS_WINDOW = 0.8
#: The longest a ``delay ends`` may hold, in milliseconds: past a request timeout is all it
#: needs, and the step (and a heal after it, until the held requests landed) blocks the
#: schedule that long.
MAX_ENDS_MS = 10_000

_RESERVED = frozenset({*VERBS, "heal", "restore", "reset", "clock", "clocks", "loss", "rate", "kbit",
                       "wait", "for", "until", "within",
                       "as", "of", "leader", "followers", "follower", "controller", "node", "isr", "is",
                       "has", "new", "caught", "up", "unclean", "clean", "registered", "fenced", "first",
                       "second", "s", "coordinator", "group", "committed", "client", "clients",
                       "transaction", "by", "ms", "connections", "undelay", "consumer", "consumers", "stop",
                       "start", "holds", "partitions", "end", "ends", "at"})
#: The steps that take nothing and undo every fault of a kind, and what each removes.
_UNDOES: Mapping[str, str] = {"heal": "partition and hold", "restore": "degradation of links",
                              "undelay": "delay"}
_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")
_SECONDS = re.compile(r"^(\d+(?:\.\d+)?)s?$")

Role = Literal["leader", "followers", "follower", "controller", "node", "name", "first", "second",
               "coordinator"]
#: The topic that holds the groups' offsets; a group's coordinator leads its partition of it.
OFFSETS_TOPIC = "__consumer_offsets"
#: The topic that holds the transactions' states; a transactional id's coordinator leads its
#: partition of it.
TRANSACTIONS_TOPIC = "__transaction_state"
WaitKind = Literal["for", "isr", "new-leader", "caught-up", "registered", "fenced", "committed", "passed",
                   "holds", "client-committed"]
#: A group's committed offsets: (topic, partition) -> the offset committed.
Committed = Mapping[tuple[str, int], int]


@dataclass(frozen=True, slots=True)
class Target:
    """Whom a step acts on: a role of partition ``partition``, node ``node``, ``name``, the
    ``first`` or ``second`` node of ``name``, or the ``coordinator`` of ``group`` or of
    ``transaction`` (a transactional id; one of the two is set)."""

    role: Role
    partition: int | None = None
    node: int | None = None
    name: str | None = None
    group: str | None = None
    transaction: str | None = None

    def __str__(self) -> str:
        if self.role in ("leader", "followers", "follower"):
            return f"{self.role} of {self.partition}"
        if self.role == "node":
            return f"node {self.node}"
        if self.role == "name":
            return str(self.name)
        if self.role in ("first", "second"):
            return f"{self.role} of {self.name}"
        if self.role == "coordinator":
            return (f"coordinator of group {self.group}" if self.group is not None
                    else f"coordinator of transaction {self.transaction}")
        return self.role


@dataclass(frozen=True, slots=True)
class Action:
    """A fault or heal step; ``text`` is the step as written. ``verb`` is one of
    :data:`VERBS`, ``heal``, ``restore``, ``undelay``, ``reset`` or ``end`` (which have no target); a
    ``degrade`` has its ``loss`` (a probability) or its ``rate_kbit``, a ``bump`` or ``strobe``
    its ``clock``, a ``delay`` its ``delay_ms`` and ``share`` of connections (None: all), or, of
    transactions' ends only (``ends``), its ``delay_ms``; a ``crash``,
    ``restart`` or ``pause`` of clients has no target but ``clients``, the producers' indexes
    (empty: every one), or ``consumers``, the group consumers'; a ``pause`` of a client lasts
    ``for_s`` seconds; a ``stop`` or ``start`` (of a consumer only) has its ``consumers``."""

    verb: str
    target: Target | None
    text: str
    bind: str | None = None
    unclean: bool = False
    loss: float | None = None
    rate_kbit: int | None = None
    clients: tuple[int, ...] | None = None
    clock: ClockChange | None = None
    delay_ms: int | None = None
    share: float | None = None
    consumers: tuple[int, ...] | None = None
    for_s: float | None = None
    ends: bool = False

    @property
    def on_clients(self) -> bool:
        """Whether the step acts on clients under test (producers or consumers), not nodes."""
        return self.clients is not None or self.consumers is not None


@dataclass(frozen=True, slots=True)
class ClockChange:
    """What a ``bump`` or ``strobe`` does to a clock: an ``offset_s`` from the true time,
    held, or (``for_s`` set) taken and dropped in turn for ``for_s`` seconds."""

    offset_s: int
    for_s: float | None = None


#: The verbs of clock steps: ``bump``, ``strobe`` (with a target) and ``reset`` (without).
CLOCK_VERBS = frozenset({"bump", "strobe", "reset"})


#: A verb that takes a target -> the history action its step is journaled as, when it has
#: no target too (:mod:`faultline.nemeses.scripted`); a fault's action names its family
#: (:func:`faultline.faults.family_of_fault`).
ACTIONS: Mapping[str, str] = {
    "crash": "kill", "restart": "start", "pause": "pause", "resume": "resume", "wipe": "wipe",
    "lose-unflushed": "lose-unflushed", "isolate": "partition", "hold": "partition", "release": "heal",
    "degrade": "degrade", "bump": "clock", "strobe": "clock", "delay": "toxic"}
#: The verbs that leave their target down.
_DOWNS = frozenset({"crash", "wipe", "lose-unflushed"})


@dataclass(frozen=True, slots=True)
class FaultStep:
    """A step of a schedule that applies a fault: its family, the step, and the most nodes
    of one partition's replicas it may touch (``followers of P``: all but one; a bound
    name: as many as the step that bound it; a step on clients: none; any other: one)."""

    family: str
    step: Action
    nodes: int


def fault_steps(steps: Sequence[Step], replicas: int) -> tuple[FaultStep, ...]:
    """The steps of ``steps`` that may apply a fault, with a partition of ``replicas``
    replicas: each fault step, but a restart of a name (or its first or second node) that
    an earlier crash, wipe or lose-unflushed bound, not restarted nor bound again since,
    which only starts it; a crash, pause or stop of clients (producers or consumers) is of
    ``clients``."""
    out: list[FaultStep] = []
    down: set[str] = set()  # the names bound by a step that took their nodes down
    reach: dict[str, int] = {}  # the nodes each name may stand for
    for s in steps:
        if not isinstance(s, Action):
            continue
        t = s.target
        name = t.name if t is not None and t.role in ("name", "first", "second") else None
        nodes = (0 if t is None else replicas - 1 if t.role == "followers" else
                 reach.get(t.name or "", 1) if t.role == "name" else 1)
        if s.on_clients:
            if s.verb in ("crash", "pause", "stop"):
                out.append(FaultStep("clients", s, 0))
        elif s.verb == "restart":  # a running node's: stopped, or killed when unclean
            if name in down:
                down.discard(name)
            else:
                out.append(FaultStep("kill" if s.unclean else "stop", s, nodes))
        elif (family := family_of_fault(ACTIONS.get(s.verb, ""))) is not None:
            out.append(FaultStep(family.name, s, nodes))
        if s.bind is not None:
            (down.add if s.verb in _DOWNS else down.discard)(s.bind)
            reach[s.bind] = nodes
    return tuple(out)


def is_clock_step(text: str) -> bool:
    """Whether step ``text`` is a clock step (False for a step that does not parse)."""
    try:
        return isinstance(step := parse_step(text), Action) and step.verb in CLOCK_VERBS
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class Wait:
    """A wait: ``for`` a fixed time, or until a condition within ``seconds``.

    ``members`` (for ``isr``) are ``"leader"``, node ids, or bound names; ``target``
    (for ``registered`` and ``fenced``) whose nodes must be listed, or not; ``group``
    (for ``committed`` and ``passed``) the group whose commits are awaited or passed, and
    ``partition`` (for ``committed past P`` and ``passed``) the partition whose high
    watermark they must pass or that must pass them; ``consumers`` (for ``holds``) the
    group consumers that must hold partitions (empty: every one); ``clients`` (for
    ``client-committed``) the producer that must commit.
    """

    kind: WaitKind
    seconds: float
    text: str
    partition: int | None = None
    members: tuple[int | str, ...] = ()
    target: Target | None = None
    group: str | None = None
    consumers: tuple[int, ...] | None = None
    clients: tuple[int, ...] | None = None

    @property
    def on_clients(self) -> bool:
        """Whether the wait reads clients under test (members' partitions, producers'
        commits), not nodes."""
        return self.consumers is not None or self.clients is not None


Step = Action | Wait


class PartitionLike(Protocol):
    """What a step reads of one partition (``faultline.cluster.protocol.PartitionState``)."""

    @property
    def leader(self) -> int | None: ...
    @property
    def isr(self) -> tuple[int, ...]: ...
    @property
    def replicas(self) -> tuple[int, ...]: ...


@dataclass(frozen=True, slots=True)
class View:
    """Live state at one moment: the test topic's partitions, the active controller, the
    brokers registered and unfenced (None: not read), groups' coordinators (group ->
    the leader of its offsets partition, None: it has none; a group not read is absent),
    groups' committed offsets (a group not read is absent), transactional ids'
    coordinators (id -> the leader of its transaction state partition, likewise), the
    test topic's high watermarks (partition -> offset; a partition not read is absent) and
    the group consumers' holdings (index -> how many partitions its live member holds,
    None: none runs; None: not read) and the producers' commits (index -> how many
    transactions it and its replacements committed since the wait began; None: not read)."""

    partitions: Mapping[int, PartitionLike]
    controller: int | None = None
    registered: frozenset[int] | None = None
    coordinators: Mapping[str, int | None] = field(default_factory=dict)
    committed: Mapping[str, Committed] = field(default_factory=dict)
    transaction_coordinators: Mapping[str, int | None] = field(default_factory=dict)
    high_watermarks: Mapping[int, int] = field(default_factory=dict)
    holdings: Mapping[int, int | None] | None = None
    commits: Mapping[int, int] | None = None


def parse_schedule(lines: Sequence[str], partitions: int | None = None,
                   nodes: int | None = None) -> tuple[Step, ...]:
    """Parse and validate a whole schedule; SpecError naming the first bad step.

    With ``partitions`` and ``nodes`` known, partition numbers and node ids are checked
    against them. A name must be bound (``as NAME``) by an earlier step before use.
    """
    steps: list[Step] = []
    bound: set[str] = set()
    for i, line in enumerate(lines):
        where = f"nemesis.schedule[{i}] {line!r}"
        try:
            step = parse_step(line)
            _check(step, bound, partitions, nodes)
        except ValueError as e:
            raise SpecError(f"{where}: {e}") from None
        if isinstance(step, Action) and step.bind is not None:
            bound.add(step.bind)
        if steps and isinstance(steps[-1], Action) and steps[-1].verb == "end":
            raise SpecError(f"{where}: end must be the last step: nothing after it would run")
        steps.append(step)
    return tuple(steps)


def parse_step(text: str) -> Step:
    """One step; ValueError saying what is wrong and what would be right."""
    words = [w for w in re.findall(r"\{[^}]*\}|[^\s{}]+", text.lower()) if w not in ("the", "a")]
    if not words:
        raise ValueError("empty step")
    verb, rest = words[0], words[1:]
    if verb == "end":
        if rest:
            raise ValueError("end takes nothing after it (it ends the main phase)")
        return Action(verb, None, text)
    if verb in _UNDOES:
        if rest:
            raise ValueError(f"{verb} takes nothing after it (it removes every {_UNDOES[verb]})")
        return Action(verb, None, text)
    if verb == "degrade":
        return _parse_degrade(rest, text)
    if verb == "delay":
        return _parse_delay(rest, text)
    if verb in ("crash", "restart", "pause") and rest[:1] in (["client"], ["clients"], ["consumer"],
                                                              ["consumers"]):
        return _parse_client(verb, rest, text)
    if verb in ("stop", "start"):
        if len(rest) == 2 and rest[0] == "consumer":
            return Action(verb, None, text, consumers=(_int(rest[1], "consumer index"),))
        raise ValueError(f"{verb} takes 'consumer N' (a group consumer, from 0)")
    if verb in ("bump", "strobe"):
        return _parse_clock(verb, rest, text)
    if verb == "reset":
        if rest != ["clocks"]:
            raise ValueError("reset takes 'clocks' (it sets every node's clock true again)")
        return Action("reset", None, text)
    if verb == "wait":
        return _parse_wait(rest, text)
    if verb not in VERBS:
        raise ValueError(f"unknown step {verb!r}; steps: "
                         f"{', '.join([*VERBS, *_UNDOES, 'reset', 'stop', 'start', 'wait'])}")
    bind: str | None = None
    unclean = False
    if len(rest) >= 2 and rest[-2] == "as":
        if not VERBS[verb]:
            raise ValueError(f"{verb} cannot bind a name (as ...): it only undoes a fault")
        bind = rest[-1]
        if not _NAME.match(bind) or bind in _RESERVED:
            raise ValueError(f"{bind!r} cannot be a name: use a word such as old_leader, not one of "
                             "the schedule's own words")
        rest = rest[:-2]
    if verb == "restart" and rest and rest[-1] in ("clean", "unclean"):
        unclean = rest[-1] == "unclean"
        rest = rest[:-1]
    return Action(verb, _parse_target(rest), text, bind, unclean)


def _parse_client(verb: str, words: Sequence[str], text: str) -> Action:
    if verb == "pause":
        seconds = _SECONDS.match("".join(words[3:]))
        if len(words) in (4, 5) and words[0] in ("client", "consumer") and words[2] == "for" \
                and seconds and 0 < float(seconds.group(1)) <= MAX_WAIT_S:
            producer = words[0] == "client"
            index = (_int(words[1], f"{'producer' if producer else 'consumer'} index"),)
            return Action(verb, None, text, clients=index if producer else None,
                          consumers=None if producer else index, for_s=float(seconds.group(1)))
        raise ValueError(f"pause takes 'client N for S s' (a producer, from 0) or 'consumer N for S s' "
                         f"(a group consumer, from 0), S above 0 and at most {MAX_WAIT_S:g}")
    if words == ["clients"]:
        return Action(verb, None, text, clients=())
    if len(words) == 2 and words[0] == "client":
        return Action(verb, None, text, clients=(_int(words[1], "producer index"),))
    if len(words) == 2 and words[0] == "consumer":
        return Action(verb, None, text, consumers=(_int(words[1], "consumer index"),))
    raise ValueError(f"{verb} takes 'client N' (a producer, from 0), 'clients' (every one) "
                     "or 'consumer N' (a group consumer, from 0)")


def _parse_degrade(words: Sequence[str], text: str) -> Action:
    if len(words) >= 3 and words[-2] == "loss":
        m = re.fullmatch(r"(\d+(?:\.\d+)?)%", words[-1])
        if m and 0 < float(m.group(1)) <= 100:
            return Action("degrade", _parse_target(words[:-2]), text, loss=float(m.group(1)) / 100)
    if len(words) >= 4 and words[-3] == "rate" and words[-1] == "kbit" and words[-2].isdigit() \
            and int(words[-2]) > 0:
        return Action("degrade", _parse_target(words[:-3]), text, rate_kbit=int(words[-2]))
    raise ValueError("degrade needs 'TARGET loss P%' (0 < P <= 100) or 'TARGET rate N kbit' (N > 0)")


def _parse_delay(words: Sequence[str], text: str) -> Action:
    if words[:2] == ["ends", "at"]:
        at = words.index("by") if "by" in words else len(words)
        m = re.fullmatch(r"(\d+)ms", "".join(words[at + 1:]))
        if m and 0 < int(m.group(1)) <= MAX_ENDS_MS:
            return Action("delay", _parse_target(words[2:at]), text, delay_ms=int(m.group(1)), ends=True)
        raise ValueError(f"delay ends needs 'at TARGET by MS ms' (MS whole milliseconds, above 0, at most "
                         f"{MAX_ENDS_MS})")
    if "by" in words:
        at = len(words) - 1 - words[::-1].index("by")
        m = re.fullmatch(r"(\d+)ms(?:on(\d+(?:\.\d+)?)%ofconnections)?", "".join(words[at + 1:]))
        share = None if m is None or m.group(2) is None else float(m.group(2)) / 100
        if m and 0 < int(m.group(1)) <= MAX_DELAY_MS and (share is None or 0 < share <= 1):
            return Action("delay", _parse_target(words[:at]), text, delay_ms=int(m.group(1)), share=share)
    raise ValueError(f"delay needs 'TARGET by MS ms' or 'TARGET by MS ms on P% of connections' (MS whole "
                     f"milliseconds, above 0, at most {MAX_DELAY_MS}; P above 0, at most 100)")


def _parse_clock(verb: str, words: Sequence[str], text: str) -> Action:
    words = list(words)  # "+5 s" and "5 s for 10 s" as "+5s" and "5s for 10s"
    if words[-1:] == ["s"]:
        words.pop()
    at = words.index("for") if "for" in words else 0
    if at and words[at - 1] == "s":
        del words[at - 1]
    seconds = r"([+-]?\d+)s?"
    if verb == "bump" and len(words) >= 3 and words[-2] == "clock":
        m = re.fullmatch(seconds, words[-1])
        if m and int(m.group(1)) != 0 and abs(int(m.group(1))) <= MAX_CLOCK_OFFSET_S:
            return Action("bump", _parse_target(words[:-2]), text, clock=ClockChange(int(m.group(1))))
    if verb == "strobe" and len(words) >= 5 and words[-4] == "clock" and words[-2] == "for":
        m, d = re.fullmatch(seconds, words[-3]), _SECONDS.match(words[-1])
        if m and d and 0 < abs(int(m.group(1))) <= MAX_CLOCK_OFFSET_S and 0 < float(d.group(1)) <= MAX_WAIT_S:
            return Action("strobe", _parse_target(words[:-4]), text,
                          clock=ClockChange(int(m.group(1)), float(d.group(1))))
    raise ValueError(f"bump needs 'TARGET clock +S s', strobe 'TARGET clock S s for D s' "
                     f"(S whole seconds, not 0, at most {MAX_CLOCK_OFFSET_S}; D at most {MAX_WAIT_S:g})")


def _parse_target(words: Sequence[str]) -> Target:
    if len(words) == 3 and words[0] in ("leader", "followers", "follower") and words[1] == "of":
        return Target(words[0], partition=_int(words[2], "partition"))  # type: ignore[arg-type]
    if len(words) == 3 and words[0] in ("first", "second") and words[1] == "of" and _NAME.match(words[2]) \
            and words[2] not in _RESERVED:
        return Target(words[0], name=words[2])  # type: ignore[arg-type]
    if words == ["controller"]:
        return Target("controller")
    if len(words) == 4 and words[:3] == ["coordinator", "of", "group"]:
        return Target("coordinator", group=words[3])
    if len(words) == 4 and words[:3] == ["coordinator", "of", "transaction"]:
        return Target("coordinator", transaction=words[3])
    if len(words) == 2 and words[0] == "node":
        return Target("node", node=_int(words[1], "node id"))
    if len(words) == 1 and words[0].isdigit():
        return Target("node", node=int(words[0]))
    if len(words) == 1 and _NAME.match(words[0]) and words[0] not in _RESERVED:
        return Target("name", name=words[0])
    raise ValueError(f"no target {' '.join(words) or '(none)'!r}; targets: leader of P, followers of P, "
                     "follower of P, controller, node N, N, a name bound with 'as', first of NAME, "
                     "second of NAME, coordinator of group G, coordinator of transaction T")


def _parse_wait(words: Sequence[str], text: str) -> Wait:
    if words[:1] == ["for"]:
        return Wait("for", _seconds(words[1:], "wait for"), text)
    if words[:1] != ["until"]:
        raise ValueError("wait needs 'for SECONDS s' or 'until CONDITION [within SECONDS s]'")
    cond = list(words[1:])
    bound = DEFAULT_WAIT_S
    if "within" in cond:
        at = cond.index("within")
        bound = _seconds(cond[at + 1:], "within")
        cond = cond[:at]
    if len(cond) == 4 and cond[0] == "isr" and cond[1] == "of" and cond[3] == "is":
        raise ValueError("isr of P is needs a set, e.g. {leader} or {1,2}")
    if len(cond) == 5 and cond[:2] == ["isr", "of"] and cond[3] == "is":
        return Wait("isr", bound, text, _int(cond[2], "partition"), _members(cond[4]))
    if len(cond) == 4 and cond[1:] == ["has", "new", "leader"]:
        return Wait("new-leader", bound, text, _int(cond[0], "partition"))
    if cond == ["caught", "up"]:
        return Wait("caught-up", bound, text)
    if len(cond) == 3 and cond[1:] == ["caught", "up"]:
        return Wait("caught-up", bound, text, _int(cond[0], "partition"))
    if len(cond) == 4 and cond[0] == "group" and cond[2:] == ["has", "committed"]:
        return Wait("committed", bound, text, group=cond[1])
    if len(cond) == 6 and cond[0] == "group" and cond[2:5] == ["has", "committed", "past"]:
        return Wait("committed", bound, text, _int(cond[5], "partition"), group=cond[1])
    if len(cond) == 5 and cond[1:4] == ["has", "passed", "group"]:
        return Wait("passed", bound, text, _int(cond[0], "partition"), group=cond[4])
    if len(cond) == 4 and cond[0] == "consumer" and cond[2:] == ["holds", "partitions"]:
        return Wait("holds", bound, text, consumers=(_int(cond[1], "consumer index"),))
    if cond == ["consumers", "hold", "partitions"]:
        return Wait("holds", bound, text, consumers=())
    if len(cond) == 4 and cond[0] == "client" and cond[2:] == ["has", "committed"]:
        return Wait("client-committed", bound, text, clients=(_int(cond[1], "producer index"),))
    if len(cond) >= 2 and cond[-1] in ("registered", "fenced"):
        return Wait(cond[-1], bound, text, target=_parse_target(cond[:-1]))  # type: ignore[arg-type]
    raise ValueError(f"unknown condition {' '.join(cond) or '(none)'!r}; conditions: isr of P is {{...}}, "
                     "P has a new leader, P caught up, caught up, TARGET registered, TARGET fenced, "
                     "group G has committed, group G has committed past P, P has passed group G, "
                     "consumer N holds partitions, consumers hold partitions, client N has committed")


def _members(word: str) -> tuple[int | str, ...]:
    if not (word.startswith("{") and word.endswith("}")):
        raise ValueError(f"expected a set such as {{leader}} or {{1,2}}, not {word!r}")
    out: list[int | str] = []
    for m in re.split(r"[\s,]+", word[1:-1].strip()):
        if not m:
            continue
        if m.isdigit():
            out.append(int(m))
        elif m == "leader" or (_NAME.match(m) and m not in _RESERVED):
            out.append(m)
        else:
            raise ValueError(f"{m!r} in {word} is not leader, a node id or a name")
    if not out:
        raise ValueError("an ISR is never empty while it has a leader: name at least one member")
    return tuple(out)


def _seconds(words: Sequence[str], what: str) -> float:
    text = "".join(words)
    m = _SECONDS.match(text)
    if m is None:
        raise ValueError(f"{what} needs a number of seconds, e.g. '2 s', not {' '.join(words)!r}")
    value = float(m.group(1))
    if not 0 < value <= MAX_WAIT_S:
        raise ValueError(f"{what}: seconds must be above 0 and at most {MAX_WAIT_S:.0f}, not {value:g}")
    return value


def _int(word: str, what: str) -> int:
    if not word.isdigit():
        raise ValueError(f"expected a {what} (a number), not {word!r}")
    return int(word)


def _check(step: Step, bound: Collection[str], partitions: int | None, nodes: int | None) -> None:
    parts: list[int] = []
    ids: list[int] = []
    names: list[str] = []
    t = step.target
    if t is not None:
        parts += [t.partition] if t.partition is not None else []
        ids += [t.node] if t.node is not None else []
        names += [t.name] if t.name is not None else []
    if isinstance(step, Wait):
        parts += [step.partition] if step.partition is not None else []
        ids += [m for m in step.members if isinstance(m, int)]
        names += [m for m in step.members if isinstance(m, str) and m != "leader"]
    for p in parts:
        if partitions is not None and p >= partitions:
            raise ValueError(f"the topic has partitions 0 to {partitions - 1}, not {p}")
    for n in ids:
        if nodes is not None and not 1 <= n <= nodes:
            raise ValueError(f"nodes are 1 to {nodes}, not {n}")
    for name in names:
        if name not in bound:
            raise ValueError(f"{name!r} is not bound: name a target first, "
                             f"e.g. 'crash leader of 0 as {name}'")


def resolve(target: Target, view: View, bindings: Mapping[str, tuple[int, ...]]) -> tuple[int, ...]:
    """The node ids ``target`` names in ``view``, sorted; ValueError when there are none
    (no leader, no follower in the ISR, no active controller, an unbound name)."""
    if target.role == "node":
        assert target.node is not None
        return (target.node,)
    if target.role in ("name", "first", "second"):
        assert target.name is not None
        if target.name not in bindings:
            raise ValueError(f"{target.name!r} is not bound")
        if target.role == "name":
            return bindings[target.name]
        nodes = sorted(bindings[target.name])
        at = 0 if target.role == "first" else 1
        if at >= len(nodes):
            raise ValueError(f"{target.name!r} names {len(nodes)} node(s): it has no {target.role}")
        return (nodes[at],)
    if target.role == "controller":
        if view.controller is None:
            raise ValueError("there is no active controller")
        return (view.controller,)
    if target.role == "coordinator":
        what, topic, coordinator = (
            (f"group {target.group!r}", OFFSETS_TOPIC, view.coordinators.get(target.group))
            if target.group is not None else
            (f"transaction {target.transaction!r}", TRANSACTIONS_TOPIC,
             view.transaction_coordinators.get(str(target.transaction))))
        if coordinator is None:
            raise ValueError(f"{what}'s partition of {topic} has no leader")
        return (coordinator,)
    assert target.partition is not None
    state = view.partitions.get(target.partition)
    if state is None:
        raise ValueError(f"partition {target.partition} is not in the metadata")
    if state.leader is None:
        raise ValueError(f"partition {target.partition} has no leader")
    if target.role == "leader":
        return (state.leader,)
    if target.role == "followers":
        followers = tuple(sorted(set(state.replicas) - {state.leader}))
        if not followers:
            raise ValueError(f"partition {target.partition} has no follower")
        return followers
    in_sync = sorted(set(state.isr) - {state.leader})
    if not in_sync:
        raise ValueError(f"partition {target.partition} has no follower in its ISR {sorted(state.isr)}")
    return (in_sync[0],)


def condition_met(wait: Wait, view: View, bindings: Mapping[str, tuple[int, ...]],
                  previous_leader: int | None, committed_before: Committed | None = None) -> tuple[bool, str]:
    """Whether ``wait``'s condition holds in ``view``, and what was seen (for the
    journal and for a wait that times out). ``previous_leader`` is the leader a ``new
    leader`` must differ from; ``committed_before`` the offsets a ``committed`` wait's
    group must have moved from (None: none before), or for ``committed past P`` P's
    high watermark when the wait began, under any topic's name (the group's offset of P
    must be above it: the workloads' groups commit the test topic alone); a ``passed``
    wait compares ``view.high_watermarks`` with the group's offset instead. ``for`` waits
    are never met here: they only take time."""
    if wait.kind == "for":
        return False, "waiting"
    if wait.kind in ("committed", "passed"):
        assert wait.group is not None
        offsets = view.committed.get(wait.group)
        if offsets is None:
            return False, f"group {wait.group}'s committed offsets not read"
        if wait.kind == "passed":
            assert wait.partition is not None
            hw = view.high_watermarks.get(wait.partition)
            mine = max((o for (_, p), o in offsets.items() if p == wait.partition), default=None)
            return (hw is not None and mine is not None and hw > mine,
                    f"{wait.partition}: high watermark {hw}, group {wait.group} committed {mine}")
        before = committed_before or {}
        if wait.partition is not None:
            floor = max((o for (_, p), o in before.items() if p == wait.partition), default=None)
            mine = max((o for (_, p), o in offsets.items() if p == wait.partition), default=None)
            return (floor is not None and mine is not None and mine > floor,
                    f"group {wait.group}: committed {mine} on {wait.partition}, past {floor} awaited")
        moved = sum(1 for tp, offset in offsets.items() if before.get(tp) != offset)
        return moved > 0, (f"group {wait.group}: {len(offsets)} partition(s) committed, "
                           f"{moved} since the wait began")
    if wait.kind == "holds":
        return _held(wait, view)
    if wait.kind == "client-committed":
        assert wait.clients is not None
        [client] = wait.clients
        if view.commits is None:
            return False, "the producers' commits not read"
        commits = view.commits.get(client, 0)
        return commits > 0, f"client {client}: {commits} transaction(s) committed since the wait began"
    if wait.kind in ("registered", "fenced"):
        assert wait.target is not None
        if view.registered is None:
            return False, "registered brokers not read"
        seen = f"registered {sorted(view.registered)}"
        try:
            nodes = set(resolve(wait.target, view, bindings))
            return (nodes <= view.registered if wait.kind == "registered"
                    else not nodes & view.registered), seen
        except ValueError as e:
            return False, f"{seen}; {wait.target}: {e}"
    parts = [wait.partition] if wait.partition is not None else sorted(view.partitions)
    seen = "; ".join(f"{p}: leader {_show(view.partitions.get(p), 'leader')} isr "
                     f"{_show(view.partitions.get(p), 'isr')}" for p in parts)
    if wait.kind == "caught-up":
        ok = bool(parts) and all(_full(view.partitions.get(p)) for p in parts)
        return ok, seen
    assert wait.partition is not None
    state = view.partitions.get(wait.partition)
    if state is None or state.leader is None:
        return False, seen
    if wait.kind == "new-leader":
        return state.leader != previous_leader, seen
    want: set[int] = set()
    for m in wait.members:
        if m == "leader":
            want.add(state.leader)
        elif isinstance(m, int):
            want.add(m)
        else:
            want.update(bindings.get(m, ()))
    return set(state.isr) == want, seen


def _held(wait: Wait, view: View) -> tuple[bool, str]:
    """Whether each consumer ``wait`` names (every one, if none) holds a partition in ``view``."""
    if view.holdings is None:
        return False, "the consumers' partitions not read"
    consumers = wait.consumers or sorted(view.holdings)
    counts = {c: view.holdings.get(c) for c in consumers}
    seen = "; ".join(f"consumer {c}: " + ("not running" if n is None else f"{n} partition(s)")
                     for c, n in counts.items())
    return bool(counts) and all(counts.values()), seen


def _full(state: PartitionLike | None) -> bool:
    return (state is not None and state.leader is not None and bool(state.replicas)
            and set(state.isr) == set(state.replicas))


def _show(state: PartitionLike | None, what: str) -> str:
    if state is None:
        return "?"
    if what == "leader":
        return str(state.leader) if state.leader is not None else "none"
    return "{" + ",".join(map(str, sorted(state.isr))) + "}"


def coordinator_partition(key: str, partitions: int) -> int:
    """The partition (of ``partitions``) of :data:`OFFSETS_TOPIC` that holds group ``key``'s
    offsets, or of :data:`TRANSACTIONS_TOPIC` that holds transactional id ``key``'s state,
    as Kafka picks either (GroupCoordinator, TransactionStateManager.partitionFor):
    ``Utils.abs(key.hashCode()) % partitions``, Java's String.hashCode over UTF-16 code units."""
    h = 0
    units = key.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    signed = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if signed == -(1 << 31) else abs(signed)) % partitions
