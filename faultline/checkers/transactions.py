"""The txn checker: what the ``txn`` workload's transactions and reads show.

Each anomaly is one plain function over a :class:`TxnHistory` (made from a history by
:func:`txn_history`), saying what is an instance of it; whether the run's transaction
protocol and faults permit it is :mod:`faultline.checkers.guarantees`'s question
(:func:`~faultline.checkers.guarantees.transaction_rules`). A transaction's writes are
known by their values, unique within the run; with read-process-write
(``transactions.reads``) a transaction's completion also lists the records it read. What a
queue history lets one infer of transactions, and what not: docs/design.md, "Transactions".
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise
from typing import Any

from faultline.checkers.faults_seen import NemesisAction, Timeline, nemesis_actions, nodes_of
from faultline.checkers.groups import FaultWindows, OffsetsPartition
from faultline.checkers.guarantees import (
    CONCURRENT_WRITE_CYCLE,
    DELAYING_FAULTS,
    G0,
    G1C,
    PROCESSED_TWICE,
    TORN,
    TXN_ANOMALIES,
    GuaranteeConfig,
    TransactionConfig,
    transaction_forbidden,
    transaction_rules,
)
from faultline.checkers.result import ANOMALIES, MAX_ANOMALY_EXAMPLES, UNKNOWN, Result, Valid
from faultline.checkers.txn_log import PartitionLog
from faultline.checkers.verdict import PERMITTED_ON_ASSUMPTION, Permissions
from faultline.errors import HistoryError
from faultline.faults import FAMILIES, Actions, family_of_fault
from faultline.history import NEMESIS, Op
from faultline.spec import TestSpec


@dataclass(frozen=True)
class TxnSend:
    """One send of a transaction, with the offset its delivery report gave (None: none did)."""

    partition: int
    value: int
    offset: int | None = None


@dataclass(frozen=True)
class TxnRead:
    """A record read: by a consumer's poll (``reader`` its process), by the drain
    (``reader`` None), or by a read-process-write transaction (``reader`` its process);
    ``index`` and ``time`` are its op's (the transaction's completion)."""

    index: int
    time: int
    reader: int | None
    partition: int
    offset: int
    value: Any


@dataclass(frozen=True)
class Txn:
    """A transaction: its invoke (``index``, ``invoked``), how it ended (``outcome`` ok, fail
    or info; None while open) and when, whether the workload meant to abort it, and its sends."""

    index: int
    process: int
    invoked: int
    abort: bool
    sends: tuple[TxnSend, ...]
    outcome: str | None = None
    ended: int | None = None
    #: A read_committed reader (consumer or drain) read one of its records.
    read: bool = False
    #: When the workload asked to commit it (None: it never did, or the history predates it).
    committing: int | None = None
    #: The records it read (read-process-write; always read_committed).
    reads: tuple[TxnRead, ...] = ()

    @property
    def committed(self) -> bool:
        """Its commit was acknowledged, or it ended ``info`` and a read_committed reader read
        one of its records (the read proves the commit), unless it :attr:`never_committed`."""
        return self.outcome == "ok" or (self.outcome == "info" and self.read and not self.abort)

    @property
    def never_committed(self) -> bool:
        """It certainly did not commit: its abort was acknowledged, or the workload never
        asked to commit it (its producer's successor, fencing it, aborts it if it is open)."""
        return self.outcome == "fail" or self.abort

    def precedes(self, other: Txn) -> bool:
        """Whether it ended before ``other`` began."""
        return self.ended is not None and self.ended < other.invoked


@dataclass(frozen=True)
class FaultWindow:
    """One fault of the nemesis: its family, when it began, and when the heals that undid
    it had completed (None: never, as far as the history says)."""

    family: str
    start: int
    end: int | None = None

    def overlaps(self, start: int, end: int | None) -> bool:
        """Whether it was in effect at some time from ``start`` to ``end`` (None: the run's end)."""
        return (end is None or self.start <= end) and (self.end is None or self.end >= start)


@dataclass(frozen=True)
class TxnHistory:
    """A ``txn`` run's history: its transactions in invoke order, the records consumers
    polled and the drain read, the partitions whose drain is complete, whether readers
    read committed, the nemesis's faults (their windows, and its actions for the faults of
    each partition, :class:`~faultline.checkers.verdict.Permissions`), and per partition
    when its drain began and the high watermark its complete drain read to."""

    txns: Sequence[Txn] = ()
    polled: Sequence[TxnRead] = ()
    drained: Sequence[TxnRead] = ()
    complete: frozenset[int] = frozenset()
    read_committed: bool = True
    faults: Sequence[FaultWindow] = ()
    drain_began: Mapping[int, int] = field(default_factory=dict)
    high_watermark: Mapping[int, int] = field(default_factory=dict)
    actions: Sequence[NemesisAction] = ()

    @property
    def families(self) -> frozenset[str]:
        """The fault families the nemesis applied."""
        return frozenset(w.family for w in self.faults)

    @property
    def processed(self) -> list[TxnRead]:
        """The records transactions read (read-process-write), in their invoke order."""
        return [r for t in self.txns for r in t.reads]

    def isolated_reads(self) -> list[TxnRead]:
        """The reads of read_committed readers: the consumers' and the drain's where they
        read committed, and every transaction's."""
        return [*((*self.polled, *self.drained) if self.read_committed else ()), *self.processed]

    def writer(self) -> dict[int, Txn]:
        """Value -> the transaction that sent it."""
        return {s.value: t for t in self.txns for s in t.sends}

    def past_drain(self, t: Txn, s: TxnSend) -> bool:
        """Whether ``s`` of ``t`` may be past what its partition's drain read to: ``t`` ended
        (or is open) once that drain had begun, or ``s``'s offset is at or above its high
        watermark (docs/history.md, "drain")."""
        began = self.drain_began.get(s.partition)
        hw = self.high_watermark.get(s.partition)
        return ((began is not None and (t.ended is None or t.ended >= began))
                or (hw is not None and s.offset is not None and s.offset >= hw))

    def held(self, logs: Mapping[int, PartitionLog], s: TxnSend) -> bool:
        """Whether the complete drain read nothing at ``s``'s offset where every replica
        holds the same batch below the high watermark it read to, a committed
        transaction's by ``logs`` (the queue checker's ``drain-missed-held``): the history
        says missing, the brokers say held."""
        log, hw = logs.get(s.partition), self.high_watermark.get(s.partition)
        return (log is not None and hw is not None and s.offset is not None
                and log.replicas.held(s.offset, hw) and log.marker_at(s.offset) == "commit"
                and all(r.offset != s.offset for r in self.drained if r.partition == s.partition))


# -- the anomalies --------------------------------------------------------------------


def aborted_reads(h: TxnHistory, reads: Iterable[TxnRead] | None = None) -> list[tuple[Txn, TxnRead]]:
    """aborted-read: one of ``reads`` (by default :meth:`TxnHistory.isolated_reads`, where
    it is an anomaly) is of a record of a transaction that never committed
    (:attr:`Txn.never_committed`)."""
    writer = h.writer()
    return [(writer[r.value], r) for r in (h.isolated_reads() if reads is None else reads)
            if r.value in writer and writer[r.value].never_committed]


def precommitted_reads(h: TxnHistory) -> list[tuple[Txn, TxnRead]]:
    """precommitted-read: a read of a record of a transaction (not
    :attr:`Txn.never_committed`: that one's is an aborted read) before the workload asked
    to commit it: a consumer's poll that ended before its ``committing``, or any read (the
    drain's too) of one that ended ``info`` without asking, in a history that records
    ``committing`` (some transaction's completion carries it); an anomaly where readers
    read committed (:meth:`TxnHistory.isolated_reads`)."""
    writer = h.writer()
    recorded = any(t.committing is not None for t in h.txns)
    out = []
    for r in h.isolated_reads():
        t = writer.get(r.value)
        if t is None or t.never_committed:
            continue
        if (r.reader is not None and t.committing is not None and r.time < t.committing) or (
                recorded and t.outcome == "info" and t.committing is None):
            out.append((t, r))
    return out


def torn_transactions(h: TxnHistory) -> list[tuple[Txn, int | None, list[TxnSend]]]:
    """torn-transaction: a reader read some of a committed transaction's records and
    passed others: a consumer read a later offset of their partition (one process reads
    each partition once, from its start), the drain read their partition completely up to
    the records (:meth:`TxnHistory.past_drain` passes nothing). One instance per
    transaction and reader (None: the drain), with the records it passed; an anomaly where
    readers read committed."""
    writer = h.writer()
    seen: dict[tuple[int | None, int], set[int]] = defaultdict(set)  # (reader, txn index) -> values
    reach: dict[tuple[int | None, int], int] = {}  # (reader, partition) -> highest offset read
    for r in (*h.polled, *h.drained):
        t = writer.get(r.value)
        if t is not None and t.committed:
            seen[(r.reader, t.index)].add(r.value)
        reach[(r.reader, r.partition)] = max(reach.get((r.reader, r.partition), -1), r.offset)
    by_index = {t.index: t for t in h.txns}
    found = []
    for (reader, index), values in seen.items():
        t = by_index[index]
        passed = [s for s in t.sends if s.value not in values and (
            s.partition in h.complete and not h.past_drain(t, s) if reader is None else
            s.offset is not None and reach.get((reader, s.partition), -1) > s.offset)]
        if passed:
            found.append((t, reader, passed))
    return found


def lost_writes(h: TxnHistory) -> list[tuple[Txn, TxnSend]]:
    """lost-write: a committed transaction's record the complete drain of its partition did
    not read, unless it may be past what the drain read (:func:`after_drain`)."""
    return [(t, s) for t, s in _undrained(h) if not h.past_drain(t, s)]


def after_drain(h: TxnHistory) -> list[tuple[Txn, TxnSend]]:
    """A committed transaction's records the complete drain of their partition did not
    read and that may be past what it read (:meth:`TxnHistory.past_drain`): not known lost."""
    return [(t, s) for t, s in _undrained(h) if h.past_drain(t, s)]


def _undrained(h: TxnHistory) -> list[tuple[Txn, TxnSend]]:
    drained = {r.value for r in h.drained}
    return [(t, s) for t in h.txns if t.committed for s in t.sends
            if s.partition in h.complete and s.value not in drained]


def out_of_order_writes(h: TxnHistory) -> list[tuple[Txn, TxnSend, Txn, TxnSend]]:
    """nonmonotonic-send: two sends of one producer process to one partition, the later
    one (within its transaction, or in a later transaction) given an offset no higher
    than the earlier one's by their delivery reports. One instance per such later send,
    with the send of the process before it in that partition:
    ``(earlier txn, earlier send, later txn, later send)``."""
    last: dict[tuple[int, int], tuple[int, Txn, TxnSend]] = {}  # (process, partition) -> its last send
    out = []
    for t in h.txns:  # invoke order: a process's transactions one after another
        for s in t.sends:
            if s.offset is None:
                continue
            before = last.get((t.process, s.partition))
            if before is not None and s.offset <= before[0]:
                out.append((before[1], before[2], t, s))
            last[(t.process, s.partition)] = (s.offset, t, s)
    return out


#: An edge between two committed transactions: ``(before, after, partition, kind)``, kind
#: ``ww`` (write-write) or ``wr`` (write-read).
Edge = tuple[Txn, Txn, int, str]


def write_orders(h: TxnHistory) -> dict[int, list[Txn]]:
    """Per partition, the committed transactions of its records (those with an offset) in
    the order of their offsets, a transaction once for each run of its records."""
    records: dict[int, list[tuple[int, int, Txn]]] = defaultdict(list)
    for t in h.txns:
        if t.committed:
            for s in t.sends:
                if s.offset is not None:
                    records[s.partition].append((s.offset, t.index, t))
    out: dict[int, list[Txn]] = {}
    for partition, rs in records.items():
        rs.sort(key=lambda r: (r[0], r[1]))
        order: list[Txn] = []
        for *_, t in rs:
            if not order or order[-1] is not t:
                order.append(t)
        out[partition] = order
    return out


def ww_edges(orders: Mapping[int, Sequence[Txn]],
             skip: Callable[[Txn, int], bool] | None = None) -> list[Edge]:
    """Write-write edges (:func:`write_orders`): in each partition, each transaction before
    the next one, an edge per partition; ``skip``: records (a transaction, a partition) to
    leave out, their neighbours joined instead, so that the order of the others is kept."""
    kept = {p: [t for t in order if skip is None or not skip(t, p)] for p, order in orders.items()}
    return _distinct((a, b, p, "ww") for p, order in kept.items() for a, b in pairwise(order) if a is not b)


def _distinct(edges: Iterable[Edge]) -> list[Edge]:
    """``edges`` without repeats, in their order (a pair of transactions, a partition and a kind)."""
    return list({(a.index, b.index, p, kind): (a, b, p, kind) for a, b, p, kind in edges}.values())


def write_cycles(orders: Mapping[int, Sequence[Txn]]) -> list[list[Edge]]:
    """G0: committed transactions whose write-write order (:func:`ww_edges` of ``orders``,
    :func:`write_orders`) has a cycle. One instance per strongly connected set of
    transactions, as its edges."""
    return components(ww_edges(orders))


def read_cycles(h: TxnHistory, orders: Mapping[int, Sequence[Txn]]) -> list[list[Edge]]:
    """G1c: committed transactions whose write-write (``ww``, :func:`ww_edges` of ``orders``,
    :func:`write_orders`) and write-read order (``wr``, :func:`wr_edges`) together have a
    cycle with a ``wr`` edge. One instance per strongly connected set of transactions joined
    by a ``wr`` edge, as its edges: every edge between its members (a pair may be joined by
    several)."""
    wr = _distinct((w, t, r.partition, "wr") for w, t, r in wr_edges(h))
    return components([*ww_edges(orders), *wr], reads=True) if wr else []


def components(edges: Sequence[Edge], reads: bool = False) -> list[list[Edge]]:
    """The strongly connected sets of transactions ``edges`` make (with ``reads``, those a
    ``wr`` edge joins), each as its edges, sorted."""
    graph: dict[int, dict[int, None]] = defaultdict(dict)
    for a, b, *_ in edges:
        graph[a.index][b.index] = None
    found = _strongly_connected(graph)
    which = {n: i for i, c in enumerate(found) for n in c}
    inside: list[list[Edge]] = [[] for _ in found]
    for e in edges:
        i = which.get(e[0].index)
        if i is not None and which.get(e[1].index) == i:
            inside[i].append(e)
    return [sorted(es, key=lambda e: (e[0].index, e[1].index, e[2], e[3])) for es in inside
            if not reads or any(e[3] == "wr" for e in es)]


def shares(orders: Mapping[int, Sequence[Txn]],
           sets: Sequence[Collection[int]]) -> list[dict[int, list[Txn]]]:
    """Each of ``sets`` (transaction indexes, no two sharing one)'s share of ``orders``
    (:func:`write_orders`): its members' records alone, in order."""
    which = {n: i for i, members in enumerate(sets) for n in members}
    out: list[dict[int, list[Txn]]] = [defaultdict(list) for _ in sets]
    for partition, order in orders.items():
        for t in order:
            i = which.get(t.index)
            if i is not None:
                out[i][partition].append(t)
    return out


def against_real_time(orders: Mapping[int, Sequence[Txn]],
                      skip: Callable[[Txn, int], bool] | None = None) -> list[tuple[Txn, Txn, int]]:
    """Pairs ``(first, second, partition)`` where, in the partition's order
    (:func:`write_orders`), a record of ``first`` comes before one of ``second`` though
    ``second`` ended before ``first`` began (so that ``second``'s record landed late, or took
    a lost record's offset), the records ``skip`` names left out: at most one pair per
    partition, ``first`` the transaction that began last of those before ``second``."""
    out = []
    for partition, order in orders.items():
        latest: Txn | None = None  # of the records so far, the transaction that began last
        for t in order:
            if skip is not None and skip(t, partition):
                continue
            if latest is not None and latest is not t and t.precedes(latest):
                out.append((latest, t, partition))
                break
            if latest is None or t.invoked > latest.invoked:
                latest = t
    return out


def wr_edges(h: TxnHistory) -> list[tuple[Txn, Txn, TxnRead]]:
    """Write-read edges: ``(writer, reader, read)`` where committed transaction ``reader``
    read a record committed transaction ``writer`` (another) wrote."""
    writer = h.writer()
    return [(w, t, r) for t in h.txns if t.committed for r in t.reads
            if (w := writer.get(r.value)) is not None and w.committed and w is not t]


def processed_twice(h: TxnHistory) -> list[tuple[Txn, Txn, TxnRead]]:
    """processed-twice: a record (a partition's offset) two committed transactions read
    (read-process-write: the group's committed offsets hand each record to one);
    ``(first, second, second's read)``, one instance per later reader of a record."""
    first: dict[tuple[int, int], Txn] = {}
    out = []
    for t in h.txns:
        if t.committed:
            for r in t.reads:
                key = (r.partition, r.offset)
                if key in first and first[key] is not t:
                    out.append((first[key], t, r))
                first.setdefault(key, t)
    return out


def _strongly_connected(edges: Mapping[int, Mapping[int, object]]) -> list[list[int]]:
    """The strongly connected components of more than one node (Tarjan, iteratively)."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    stack: list[int] = []
    on_stack: set[int] = set()
    out: list[list[int]] = []
    for root in list(edges):
        if root in index:
            continue
        work = [(root, iter(edges.get(root, {})))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        n = stack.pop()
                        on_stack.discard(n)
                        component.append(n)
                        if n == node:
                            break
                    if len(component) > 1:
                        out.append(component)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(edges.get(child, {}))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return out


# -- from a history ---------------------------------------------------------------------


def txn_history(spec: TestSpec, rows: Iterable[Mapping[str, Any]], source: str = "history") -> TxnHistory:
    """The :class:`TxnHistory` of a ``txn`` run's rows (docs/history.md); HistoryError,
    naming the line, for a ``txn`` op whose value is not as docs/history.md says."""
    open_txns: dict[int, Txn] = {}
    txns: list[Txn] = []
    polled: list[TxnRead] = []
    drained: list[TxnRead] = []
    complete: set[int] = set()
    nemesis: list[Op] = []
    drain_began: dict[int, int] = {}
    high_watermark: dict[int, int] = {}
    for row in rows:
        f, typ, process, index, t = row["f"], row["type"], row["process"], row["index"], row["time"]
        value: Any = row.get("value")
        if process == NEMESIS:
            nemesis.append(Op.from_dict(dict(row)))
        elif f == "drain" and typ == "invoke" and isinstance(value, dict) and "partition" in value:
            drain_began.setdefault(value["partition"], t)
        elif f == "txn":
            abort, sends = _txn_value(value, source, index)
            if typ == "invoke":
                open_txns[process] = Txn(index, process, t, abort, sends)
            elif process in open_txns:
                invoked = open_txns.pop(process)
                txns.append(Txn(invoked.index, process, invoked.invoked, invoked.abort, sends, typ, t,
                                committing=value.get("committing"),
                                reads=_txn_reads(value, source, index, t, process)))
        elif f == "poll" and typ == "ok":
            polled += [TxnRead(index, t, process, r[1], r[2], r[3]) for r in value["records"]]
        elif f == "drain" and typ == "ok":
            drained += [TxnRead(index, t, None, value["partition"], o, v) for o, v in value["records"]]
            if value.get("last"):
                complete.add(value["partition"])
                high_watermark[value["partition"]] = value["high_watermark"]
    txns += open_txns.values()
    txns.sort(key=lambda x: x.index)
    actions = nemesis_actions(nemesis)
    h = TxnHistory(txns, polled, drained, frozenset(complete),
                   spec.consumer.isolation_level == "read_committed",
                   fault_windows(actions), drain_began, high_watermark, actions)
    read = {r.value for r in h.isolated_reads()}
    return replace(h, txns=[replace(x, read=True) if any(s.value in read for s in x.sends) else x
                            for x in txns])


def fault_windows(actions: Sequence[NemesisAction]) -> list[FaultWindow]:
    """The fault windows of a history's nemesis actions (:func:`nemesis_actions`), by
    start. A fault's window begins at its first op (a skipped one is dropped) and ends at
    the completion of the first heal, of its kind's heal action and begun after it, that
    left none of its nodes faulted, or of one naming no node (a fault naming none: only by
    the latter); never where none did."""
    open_: list[tuple[str, str, int, set[str]]] = [  # (family, action, start, nodes still faulted)
        (family.name, a.f, a.start, {str(n) for n in nodes_of(a.value)}) for a in actions
        if (family := family_of_fault(a.f)) is not None and not a.skipped]
    closed: list[FaultWindow] = []
    for heal in sorted((a for a in actions if a.end is not None and family_of_fault(a.f) is None),
                       key=lambda a: a.end or 0):
        healed = {str(n) for n in nodes_of(heal.value)}
        still = []
        for name, f, start, nodes in open_:
            if Actions(f, heal.f) in FAMILIES[name].all_actions and start <= heal.start:
                left = nodes - healed  # a fault naming no node: only a heal naming none undoes it
                if not healed or (nodes and not left):
                    closed.append(FaultWindow(name, start, heal.end))
                    continue
                nodes = left
            still.append((name, f, start, nodes))
        open_ = still
    return sorted([*closed, *(FaultWindow(n, s) for n, _, s, _ in open_)], key=lambda w: w.start)


def _txn_value(value: Any, source: str, index: int) -> tuple[bool, tuple[TxnSend, ...]]:
    try:
        abort = value["abort"]
        sends = tuple(TxnSend(s["partition"], s["value"], s.get("offset")) for s in value["sends"])
    except (KeyError, TypeError) as e:
        raise HistoryError(source, index + 1, f"a txn op's value lacks {e} (docs/history.md)") from None
    if not isinstance(abort, bool) or not all(
            type(s.partition) is int and type(s.value) is int and (s.offset is None or type(s.offset) is int)
            for s in sends):
        raise HistoryError(source, index + 1, "a txn op's value is not as docs/history.md says: abort "
                                              "a boolean, each send's partition, value and offset integers")
    return abort, sends


def _txn_reads(value: Mapping[str, Any], source: str, index: int, time: int,
               process: int) -> tuple[TxnRead, ...]:
    try:
        reads = tuple(TxnRead(index, time, process, p, o, v) for p, o, v in value.get("reads", ()))
    except (TypeError, ValueError):
        reads = None
    if reads is None or not all(type(r.partition) is int and type(r.offset) is int for r in reads):
        raise HistoryError(source, index + 1, "a txn op's reads are not as docs/history.md says: "
                                              "[partition, offset, value] each, partition and offset "
                                              "integers")
    return reads


# -- the verdict ------------------------------------------------------------------------


def check_transactions(spec: TestSpec, h: TxnHistory, config: TransactionConfig, *,
                       truncated: bool = False, timeline: Timeline | None = None,
                       logs: Mapping[int, PartitionLog] | None = None,
                       stable: Mapping[int, tuple[int, int]] | None = None,
                       offsets: OffsetsPartition | None = None) -> Result:
    """The verdict on ``h``, a run of ``spec`` whose transactions ran as ``config`` says
    (:meth:`~faultline.checkers.guarantees.TransactionConfig.from_spec`): every anomaly
    instance found, each permitted or not by
    :func:`~faultline.checkers.guarantees.transaction_rules` for the faults whose windows
    bear on it (:meth:`_Judge.excuse`; ``timeline``: the topic's partitions' states from
    the metadata log, where the run has one; a G0 set of transactions always is where none
    of its records comes before one of a transaction that ended before the first began,
    else where each such pair has a record that may have landed late or taken a lost one's
    offset; a G1c set only where, those records left out, no cycle with a wr edge remains;
    processed-twice by the
    faults that could send the group's position back from its first reader's invoke to the
    later reader's end, :meth:`_Judge.rewound`, given ``offsets``: the read-process-write
    group's ``__consumer_offsets`` partition as the run's records know it, None where they
    do not); aborted reads and torn
    transactions are anomalies only of read_committed readers
    (:meth:`TxnHistory.isolated_reads`; tears: consumers and the drain), each with how the
    replicas' ``logs`` (:func:`~faultline.checkers.txn_log.partition_logs`) ended the
    transaction of its records where they say; ``stable``: partition -> the last stable
    offset and HW the brokers answered at the end
    (:func:`~faultline.checkers.txn_log.final_stable_offsets`), which must agree with the
    logs on whether a transaction was left open. ``valid`` false with a
    forbidden one, else unknown where something was not judged or was permitted only by
    faults assumed (:func:`_undecided`), else true."""
    judge = _Judge(spec, config, h, timeline, offsets)
    run_loss, run_rewound = judge.run_loss(), judge.run_rewound()
    rules = transaction_rules(config, h.families, run_loss, run_rewound)
    forbidden = transaction_forbidden(config, h.families, run_loss, run_rewound)
    spans = _producer_spans(h)
    topic = spec.topic.name
    logs = logs or {}
    found: dict[str, list[dict[str, Any]]] = {name: [] for name in TXN_ANOMALIES}
    for t, r in aborted_reads(h):
        found["aborted-read"].append({"topic": topic, "partition": r.partition, "offset": r.offset,
                                      "value": r.value, "time": r.time, "process": r.reader,
                                      "txn_index": t.index, "txn_outcome": t.outcome,
                                      **_log_marker(logs, r.partition, r.offset),
                                      **judge.excuse("aborted-read", t.invoked, spans[t.index][1])})
    for t, r in precommitted_reads(h):
        found["precommitted-read"].append({
            "topic": topic, "partition": r.partition, "offset": r.offset, "value": r.value,
            "time": r.time, "process": r.reader, "txn_index": t.index, "committing": t.committing,
            **_log_marker(logs, r.partition, r.offset),
            **judge.excuse("precommitted-read", spans[t.index][0], t.ended)})
    missed = 0  # lost writes and the drain's tears of records every replica holds committed
    for t, reader, passed in torn_transactions(h) if h.read_committed else ():
        if reader is None and all(h.held(logs, s) for s in passed):
            missed += 1
            continue
        found[TORN].append({"topic": topic, "txn_index": t.index, "process": reader,
                            "values": [s.value for s in passed],
                            "partitions": sorted({s.partition for s in passed}),
                            **_log_markers(logs, t.sends),
                            **judge.excuse(TORN, spans[t.index][0], t.ended, t.invoked,
                                           [s.partition for s in passed])})
    for t, s in lost_writes(h):
        if h.held(logs, s):
            missed += 1
            continue
        found["lost-write"].append({"topic": topic, "partition": s.partition, "offset": s.offset,
                                    "value": s.value, "time": t.ended, "txn_index": t.index,
                                    **_log_marker(logs, s.partition, s.offset),
                                    **judge.excuse("lost-write", spans[t.index][0], t.ended,
                                                   t.invoked, [s.partition])})
    orders = write_orders(h)
    excuses: dict[tuple[str, int, int], dict[str, Any]] = {}

    def excused(name: str) -> Callable[[Txn, int], bool]:
        """Whether ``name`` is permitted of a transaction's record of a partition landing
        late or taking a lost record's offset (one excuse a record, asked once)."""
        def ask(t: Txn, partition: int) -> bool:
            key = (name, t.index, partition)
            if key not in excuses:
                excuses[key] = judge.excuse(name, t.invoked, spans[t.index][1], t.invoked, [partition])
            return bool(excuses[key]["permitted"])
        return ask

    cycles = write_cycles(orders)
    sets = [{a.index for a, *_ in c} for c in cycles]
    for cycle, members, theirs in zip(cycles, sets, shares(orders, sets), strict=True):
        # a cycle is no anomaly where none of its records goes against real time; one that
        # does (a record before another's that ended before it began) needs the later one
        # late or its offset reused: permitted where every such pair has a record that may
        # be so, forbidden where one remains among the records that may not
        if not against_real_time(theirs):
            excuse = {"reason": CONCURRENT_WRITE_CYCLE, "permitted": True}
        else:
            late = against_real_time(theirs, excused(G0))
            excuse = (excuses[(G0, late[0][1].index, late[0][2])] if late
                      else _first_permitted(excuses, G0, members))
        found[G0].append({"topic": topic, "txn_indexes": sorted(members),
                          "edges": [[a.index, b.index, p] for a, b, p, _ in cycle], **excuse})
    read_sets = read_cycles(h, orders)
    sets = [{a.index for a, *_ in c} for c in read_sets]
    for read_cycle, members, theirs in zip(read_sets, sets, shares(orders, sets), strict=True):
        # no cycle with a wr edge is possible without a late or lost write (docs/design.md,
        # "Transactions"): only a record that landed late or took a lost one's offset puts a
        # reader's record before its writer's. Leaving out every record that may be so (and
        # keeping the order of the others), a cycle with a wr edge that remains is forbidden
        bare = components([*ww_edges(theirs, excused(G1C)), *(e for e in read_cycle if e[3] == "wr")],
                          reads=True)
        if bare:
            excuse = next((excuses[(G1C, b.index, q)] for _, b, q, kind in bare[0] if kind == "ww"),
                          judge.forbid(G1C))
        else:
            excuse = _first_permitted(excuses, G1C, members)
        found[G1C].append({"topic": topic, "txn_indexes": sorted(members),
                           "edges": [[a.index, b.index, p, kind] for a, b, p, kind in read_cycle],
                           **excuse})
    for once, again, r in processed_twice(h):
        # the group's position may go back from the first reader's invoke to the later of
        # the two reads (docs/design.md, "Transactions")
        read_by = max(t.ended if t.ended is not None else t.invoked for t in (once, again))
        found[PROCESSED_TWICE].append({
            "topic": topic, "partition": r.partition, "offset": r.offset, "value": r.value,
            "time": r.time, "txn_indexes": [once.index, again.index],
            **judge.excuse(PROCESSED_TWICE, once.invoked, spans[again.index][1],
                           rewound=(r.partition, once.invoked, read_by))})
    for a, sent, b, then in out_of_order_writes(h):
        found["nonmonotonic-send"].append({
            "topic": topic, "partition": then.partition, "process": b.process, "time": b.invoked,
            "values": [sent.value, then.value], "offsets": [sent.offset, then.offset],
            "txn_indexes": [a.index, b.index],
            **judge.excuse("nonmonotonic-send", spans[a.index][0], b.ended, a.invoked, [then.partition])})
    anomalies: dict[str, list[dict[str, Any]]] = {}
    violations = []
    reasons = dict(rules)  # and, for a type only its instances permit, the first one's reason
    for name, instances in found.items():
        if any(not e["permitted"] for e in instances):
            violations.append(name)
        first = next((e["reason"] for e in instances if e["permitted"]), None)
        if first is not None:
            reasons.setdefault(name, first)
        if instances:
            kept = sorted(instances, key=lambda e: e["permitted"])[:MAX_ANOMALY_EXAMPLES]
            anomalies[name] = kept
    unknown = _undecided(spec, h, truncated, judge.assumed, logs, missed, stable or {})
    valid: Valid = False if violations else (UNKNOWN if unknown else True)
    outcomes = {"ok": 0, "fail": 0, "info": 0}
    sends = dict(outcomes)
    for t in h.txns:
        if t.outcome is not None:
            outcomes[t.outcome] += 1
            sends[t.outcome] += len(t.sends)
    return Result(
        valid=valid,
        anomaly_counts={**dict.fromkeys(ANOMALIES, 0), **{k: len(v) for k, v in found.items()}},
        anomalies=anomalies,
        permitted=[name for name in TXN_ANOMALIES if name in rules or any(
            e["permitted"] for e in found[name])],
        violations=violations,
        unknown=unknown,
        stats={"send": sends, "txn": outcomes, "txn_open": sum(t.outcome is None for t in h.txns),
               "records_polled": len(h.polled), "records_drained": len(h.drained),
               "records_processed": len(h.processed), "wr_edges": len(wr_edges(h))},
        extra={"permitted_reasons": reasons,
               "forbidden_reasons": forbidden,
               "transaction_protocol": config.protocol,
               "faults_seen": sorted(h.families)},
    )


def _first_permitted(excuses: Mapping[tuple[str, int, int], dict[str, Any]], name: str,
                     members: Collection[int]) -> dict[str, Any]:
    """The first permitting excuse of ``name`` asked of a record of ``members``."""
    return next(e for (n, t, _), e in excuses.items() if n == name and t in members and e["permitted"])


def _log_marker(logs: Mapping[int, PartitionLog], partition: int, offset: int | None) -> dict[str, Any]:
    """An example's ``log_marker``: how the log of ``partition`` ended the transaction of its
    record at ``offset`` (:meth:`~faultline.checkers.txn_log.PartitionLog.marker_at`; None
    without an offset); nothing where ``logs`` lacks the partition."""
    if partition not in logs:
        return {}
    return {"log_marker": None if offset is None else logs[partition].marker_at(offset)}


def _log_markers(logs: Mapping[int, PartitionLog], sends: Sequence[TxnSend]) -> dict[str, Any]:
    """A tear's ``log_markers``: ``[partition, offset, marker]`` of each of ``sends`` whose
    partition's log ``logs`` holds (:meth:`~faultline.checkers.txn_log.PartitionLog.marker_at`);
    nothing without logs."""
    if not logs:
        return {}
    return {"log_markers": [[s.partition, s.offset, logs[s.partition].marker_at(s.offset)]
                            for s in sends if s.offset is not None and s.partition in logs]}


def _producer_spans(h: TxnHistory) -> dict[int, tuple[int, int | None]]:
    """Transaction index -> (the invoke of its producer's previous transaction, the end of
    its producer's next one; None: not known to have ended). A process runs one producer's
    transactions one after another; the first of a process that replaced a retired one
    (its last transaction ``info``) may follow any retired one that had ended before it
    began, so its span reaches back to the earliest such, else to its own invoke."""
    by_process: dict[int, list[Txn]] = defaultdict(list)
    for t in h.txns:
        by_process[t.process].append(t)
    retired = [run[-1] for run in by_process.values() if run[-1].outcome == "info"]
    out: dict[int, tuple[int, int | None]] = {}
    for run in by_process.values():
        for i, t in enumerate(run):
            since = run[i - 1].invoked if i else min(
                (r.invoked for r in retired if r.ended is not None and r.ended <= t.invoked),
                default=t.invoked)
            out[t.index] = (since, run[i + 1].ended if i + 1 < len(run) else None)
    return out


@dataclass(frozen=True)
class _Loss:
    """Why committed records of some partitions may be lost, and those of them where only
    faults assumed (the permissive reading, :class:`~faultline.checkers.verdict.Ruling`)
    permit it."""

    reason: str
    assumed: tuple[int, ...]


class _Judge:
    """Whether the guarantees permit each anomaly instance of one run (:meth:`excuse`),
    keeping the partitions where a loss is permitted only by faults assumed (``assumed``:
    partition -> anomaly names)."""

    def __init__(self, spec: TestSpec, config: TransactionConfig, h: TxnHistory,
                 timeline: Timeline | None, offsets: OffsetsPartition | None) -> None:
        self._config, self._h = config, h
        self._parts = sorted({*range(spec.topic.partitions), *(s.partition for t in h.txns for s in t.sends)})
        self._tp = {p: i for i, p in enumerate(self._parts)}
        self._guarantees = GuaranteeConfig.from_spec(spec)
        self._permissions = Permissions(self._guarantees, h.actions,
                                        [(spec.topic.name, p) for p in self._parts], timeline)
        self._group = FaultWindows(h.actions, spec.topic.name, timeline, offsets)
        self.assumed: dict[int, set[str]] = defaultdict(set)

    def excuse(self, name: str, since: int, until: int | None, written: int | None = None,
               partitions: Sequence[int] = (),
               rewound: tuple[int, int, int] | None = None) -> dict[str, Any]:
        """Whether the guarantees permit anomaly ``name`` of one transaction, and why:
        :func:`~faultline.checkers.guarantees.transaction_rules` given the delaying faults
        whose windows overlap ``since`` to ``until`` (None: the run's end), where a request
        held in them could have landed late, and, for a loss or a tear (``written``: the
        transaction's invoke; for G0, that of an edge's earlier transaction, and the edge's
        partition), whether committed records of ``partitions`` written then may be lost
        (:meth:`loss`); for processed-twice, whether the group's committed position of a
        partition may have gone back from one time to another (``rewound``,
        :meth:`rewound`)."""
        delaying = frozenset(w.family for w in self._h.faults
                             if w.overlaps(since, until) and w.family in DELAYING_FAULTS)
        loss = None if written is None else self.loss(partitions, written)
        why = None if loss is None else loss.reason
        back, back_assumed = (None, False) if rewound is None else self.rewound(*rewound)
        allowed = transaction_rules(self._config, delaying, why, back)
        if name not in allowed:
            return {"permitted": False,
                    "reason": transaction_forbidden(self._config, delaying, why, back)[name]}
        if name not in transaction_rules(self._config, delaying):
            for p in () if loss is None else loss.assumed:
                self.assumed[p].add(name)
            if rewound is not None and back_assumed:
                self.assumed[rewound[0]].add(name)
        return {"permitted": True, "reason": allowed[name]}

    def rewound(self, partition: int, since: int, until: int) -> tuple[str | None, bool]:
        """Why the read-process-write group's committed position of ``partition`` may have
        gone back from ``since`` to ``until`` (None: it may not), and whether only faults
        assumed say so: as the group checker excuses ``redelivery-below-commit``
        (:meth:`~faultline.checkers.groups.FaultWindows.excused`), a truncation of the
        partition below it, or data destroyed on a replica of the group's
        ``__consumer_offsets`` partition."""
        return self._group.excused(self._guarantees, "redelivery-below-commit", partition, since, until)

    def run_rewound(self) -> str | None:
        """Why the group's committed position may have gone back somewhere in the run."""
        return next((why for p in self._parts if (why := self.rewound(p, 0, 2**63)[0]) is not None), None)

    def forbid(self, name: str) -> dict[str, Any]:
        """Anomaly ``name`` forbidden whatever the faults, with why."""
        return {"permitted": False, "reason": transaction_forbidden(self._config, frozenset())[name]}

    def loss(self, partitions: Iterable[int], written: int) -> _Loss | None:
        """Why committed records of every one of ``partitions`` written at ``written`` may
        be lost: the queue checker's ``lost-write`` rule (committed loss) by the faults of
        each partition's window (:meth:`~faultline.checkers.verdict.Permissions.ruling`),
        their reasons joined; None where one of them (or none given) does not permit it."""
        reasons, assumed = [], []
        for p in sorted(set(partitions)):
            tp = self._tp[p]
            ruling = self._permissions.ruling(tp, written, ("lost-write",))
            if not ruling.permitted:
                return None
            reasons.append(f"on partition {p}, {self._permissions.reason('lost-write', tp, written)}")
            if ruling.assumed:
                assumed.append(p)
        return _Loss("; ".join(reasons), tuple(assumed)) if reasons else None

    def run_loss(self) -> str | None:
        """Why committed records may be lost somewhere in the run: each partition's reason
        by the faults it saw over the run, naming the partitions it is theirs on."""
        on: dict[str, list[int]] = defaultdict(list)
        for p, found in zip(self._parts, self._permissions.rules, strict=True):
            if "lost-write" in found:
                on[found["lost-write"]].append(p)
        return "; ".join(f"on partition(s) {', '.join(map(str, ps))}, {why}"
                         for why, ps in on.items()) or None


def _undecided(spec: TestSpec, h: TxnHistory, truncated: bool, assumed: Mapping[int, set[str]],
               logs: Mapping[int, PartitionLog], missed: int,
               stable: Mapping[int, tuple[int, int]]) -> list[dict[str, Any]]:
    """Why the verdict may not be true although nothing forbidden was seen: an incomplete
    drain, committed records the drain may have ended below (``after-drain``), aborted
    reads and tears that read_uncommitted readers showed, which that isolation permits
    and so cannot judge (``isolation-unchecked``), anomalies on a partition (``assumed``)
    that only faults assumed permit (``permitted-on-assumption``), transactions a
    partition's log (``logs``) left open after the heal (``open-transaction``), or where
    the brokers' last stable offset at the end (``stable``) and the log disagree on that
    (``lso-disagrees``; with no log, the brokers' answer alone is the witness), lost
    writes and drain tears of records every replica holds committed (``missed`` of them,
    ``drain-missed-held``, :meth:`TxnHistory.held`), a cut history."""
    out = []
    short = sorted(set(range(spec.topic.partitions)) - h.complete)
    if short:
        out.append({"kind": "short-drain", "count": len(short), "affects_verdict": True,
                    "why": f"the drain of partition(s) {', '.join(map(str, short))} is not complete: "
                           "a committed record missing there, or a transaction torn, is not known"})
    past = after_drain(h)
    if past:
        out.append({"kind": "after-drain", "count": len(past), "affects_verdict": True,
                    "why": f"{len(past)} committed record(s) the complete drain did not read were "
                           "committed once their partition's drain had begun, or at or above the "
                           "high watermark it read to: whether they are lost is not known"})
    if not h.read_committed:
        unjudged = len(aborted_reads(h, (*h.polled, *h.drained))) + len(torn_transactions(h))
        if unjudged:
            out.append({"kind": "isolation-unchecked", "count": unjudged, "affects_verdict": True,
                        "why": f"readers read uncommitted ({unjudged} read(s) of an aborted "
                               "transaction's record or tear(s) of a committed one): the isolation "
                               "of transactions was not checked"})
    for p, names in sorted(assumed.items()):
        out.append({"kind": "permitted-on-assumption", "topic": spec.topic.name, "partition": p,
                    "anomalies": sorted(names), "affects_verdict": True,
                    "why": f"{', '.join(sorted(names))} seen here: {PERMITTED_ON_ASSUMPTION}"})
    for p, log in sorted(logs.items()):
        if log.open:
            first = ", ".join(f"producer id {pid} from offset {o}" for pid, o in sorted(log.open.items()))
            out.append({"kind": "open-transaction", "topic": spec.topic.name, "partition": p,
                        "count": len(log.open), "affects_verdict": True,
                        "why": f"the log of partition {p} (node {log.node}) holds records of "
                               f"transactions no commit or abort marker follows ({first}): left open "
                               f"after the heal, its last stable offset {log.last_stable_offset} stays "
                               f"below its log end {log.end}, so read_committed readers stop there and "
                               "whether they commit is not known"})
    for p, (lso, hw) in sorted(stable.items()):
        in_log = logs.get(p)
        if in_log is None and lso < hw:
            out.append({"kind": "open-transaction", "topic": spec.topic.name, "partition": p,
                        "count": 1, "affects_verdict": True,
                        "why": f"the brokers answered partition {p}'s last stable offset {lso} "
                               f"below its high watermark {hw} at the end (ListOffsets, "
                               "read_committed): a transaction was left open after the heal, and "
                               "whether it commits is not known"})
        elif in_log is not None and (logged := any(o < hw for o in in_log.open.values())) != (lso < hw):
            out.append({"kind": "lso-disagrees", "topic": spec.topic.name, "partition": p,
                        "count": 1, "affects_verdict": True,
                        "why": f"at the end the brokers answered partition {p}'s last stable "
                               f"offset {lso} with its high watermark {hw} (ListOffsets, "
                               f"read_committed), while the log of node {in_log.node} "
                               + ("holds a transaction open below it" if logged else
                                  "holds no transaction open below it")
                               + ": the brokers' own records disagree on whether one was left "
                                 "open, so what read_committed readers may read is not known"})
    if missed:
        out.append({"kind": "drain-missed-held", "count": missed, "affects_verdict": True,
                    "why": f"{missed} committed record(s) (or drain tears of them) the complete drain "
                           "did not read, at offsets it read nothing at below its HW where every "
                           "replica's log holds the same batch, a committed transaction's "
                           "(replicas.jsonl): the history says lost, the brokers say held; not "
                           "counted as lost writes or torn transactions"})
    if truncated:
        out.append({"kind": "truncated-history", "affects_verdict": True,
                    "why": "the history's last line was cut: the run's end is not known"})
    return out
