"""Which anomalies Kafka's guarantees permit, for a test's config and the faults it saw.

The table is docs/design.md's "Guarantees" table, written once, in :func:`rules`, each row
with the reason a person reads in the report. It is a hypothesis: the reference model
(``faultline/checkers/model/``) explores fault schedules per config and cross-checks
:func:`permitted`; keep that signature stable.

The faults of one partition (``faults``, a
:class:`~faultline.checkers.partition_faults.PartitionFaults`) are derived from a run's
history and the broker's own state by :mod:`faultline.checkers.faults_seen`. Every "is
this permitted here" question of the checkers is asked here: the anomalies
(:func:`rules`), committed data lost (:func:`committed_loss_reason`, which the white box's
invariants ask too), a leader elected from outside the ISR and the ELR
(:func:`unclean_election_permitted`) and a consumer group's anomalies
(:func:`group_permitted`, :data:`OVERLAP_AFTER_LOST`, :data:`OVERLAP_AFTER_FENCED`,
:func:`offsets_destroyed`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from faultline.checkers.partition_faults import NODE_FAULTS, PartitionFaults
from faultline.checkers.result import ANOMALIES
from faultline.spec import TestSpec, release

#: Rule keys beyond the anomaly names: inconsistent-offsets has two rows in docs/design.md.
ISO_ACK = "inconsistent-offsets:ack"
ISO_READS = "inconsistent-offsets:reads"


@dataclass(frozen=True, slots=True)
class GuaranteeConfig:
    """The settings the guarantees depend on (topic and producer), nothing else."""

    acks: Literal["0", "1", "all"] = "all"
    min_insync_replicas: int = 2
    replication_factor: int = 3
    unclean_leader_election_enable: bool = False
    enable_idempotence: bool = True
    max_in_flight: int = 5
    retries: int = 2147483647
    eligible_leader_replicas: bool = True
    #: The client under test: librdkafka re-sends without counting a retry where the
    #: Java client does not (the ``duplicate`` rule).
    client: Literal["librdkafka", "java"] = "librdkafka"

    @classmethod
    def from_spec(cls, spec: TestSpec) -> GuaranteeConfig:
        """Read the topic's and producer's settings, and the Kafka version, from a spec.

        ``eligible_leader_replicas`` (KIP-966) is on for Kafka 4.1 and later, which
        enable it on every new cluster, as the harness's clusters are.
        """
        t, p = spec.topic, spec.producer
        return cls(acks=p.acks, min_insync_replicas=t.min_insync_replicas,
                   replication_factor=t.replication_factor,
                   unclean_leader_election_enable=t.unclean_leader_election_enable,
                   enable_idempotence=p.enable_idempotence, max_in_flight=p.max_in_flight,
                   retries=p.retries, eligible_leader_replicas=elr_enabled(spec.kafka.version),
                   client=spec.workload.client)


def elr_enabled(version: str) -> bool:
    """Whether a new cluster of this Kafka version runs with eligible leader replicas."""
    return release(version) >= (4, 1)


def rules(config: GuaranteeConfig, faults: PartitionFaults) -> dict[str, str]:
    """Every rule that permits something, rule key -> reason; absent keys forbid.

    Keys are the anomaly names, except that inconsistent-offsets has two rows, as
    in docs/design.md: :data:`ISO_ACK` (one of the disagreeing associations is an ack)
    and :data:`ISO_READS` (only reads disagree). ``faults`` describe one partition
    (see the module docstring); committed data can be lost only as
    :func:`committed_loss_reason` says.
    """
    c = config
    out: dict[str, str] = {}
    committed_loss = committed_loss_reason(c, faults)

    # lost-write: an acknowledged value is not in the drain.
    if c.acks == "0":
        out["lost-write"] = "acks=0: the producer never hears whether a record was written"
    elif c.acks == "1" and faults.leader_fault and c.replication_factor > 1:
        out["lost-write"] = ("acks=1 and a fault hit the partition's leader: a record only the "
                             "leader had is truncated when another replica takes over")
    elif committed_loss is not None:
        out["lost-write"] = committed_loss

    # inconsistent-offsets: an ack's offset disagrees -> as lost-write (acks=0 acks carry
    # no offset); reads disagree -> only when committed data (below the HW) can be lost.
    if "lost-write" in out and c.acks != "0":
        out[ISO_ACK] = "as lost-write: " + out["lost-write"]
    if committed_loss is not None:
        out[ISO_READS] = committed_loss
        for name in ("phantom-read", "nonmonotonic-poll", "poll-skip"):
            out[name] = committed_loss
    if ISO_READS in out:
        out["inconsistent-offsets"] = out[ISO_READS]
    elif ISO_ACK in out:
        out["inconsistent-offsets"] = "only where an ack is involved, " + out[ISO_ACK]

    # duplicate: a retry of a batch whose first attempt was written writes it again.
    if not c.enable_idempotence and c.retries > 0 and c.acks != "0":
        out["duplicate"] = ("enable.idempotence=false with retries: a retried batch whose "
                            "first attempt was written is written again")
    elif (not c.enable_idempotence and c.acks != "0" and c.client == "librdkafka"
          and faults.leader_fault):
        out["duplicate"] = ("enable.idempotence=false and a leader fault: even with retries=0 "
                            "librdkafka re-sends a batch, without counting a retry, after an error "
                            "that refreshes metadata (NOT_LEADER_OR_FOLLOWER, a fenced broker), "
                            "and its first attempt may have been written")
    elif "producer-restart" in faults.families:
        out["duplicate"] = "a producer was restarted and may have re-sent values"

    # nonmonotonic-send: a later batch overtakes a retried earlier one.
    if not c.enable_idempotence and c.max_in_flight > 1 and c.retries > 0:
        out["nonmonotonic-send"] = (
            f"enable.idempotence=false, max.in.flight={c.max_in_flight} and retries: a "
            "retried batch can land after one sent later")

    # aborted-read and unexpected-value: never. A failed send was certainly not
    # written, and every value read must have been sent.
    return out


def committed_loss_reason(config: GuaranteeConfig, faults: PartitionFaults) -> str | None:
    """Why committed data (acked with acks=all, or below the HW) may be lost; None if it may not.

    Seed 003's guarantee: a committed record survives while one in-sync replica holding
    it is alive. A replica no fault touched keeps fetching, so it stays in the ISR
    with every committed record, and an election picks an in-sync replica while one is
    up. Committed loss therefore needs a leader fault and every replica of the
    partition faulted (``faulted`` at RF; see :func:`every_replica_faulted`), and then
    either an unclean election or data destroyed on :func:`committed_copies` replicas.
    With ELR an unclean election needs more: the ELR, which every replica that leaves
    an ISR below min.insync.replicas joins with every committed record, passed over.
    The controller elects an unfenced ISR member, else (ISR empty) an unfenced ELR
    member, and only then any unfenced replica; a fenced ELR member stays in the ELR,
    and only an unclean restart drops one. ISR and ELR together hold at least
    :func:`min_isr` replicas but for those dropped by unclean restarts, so every one of
    that many must have been fenced or restarted uncleanly (``fenced``, see
    :func:`faultline.checkers.faults_seen.fences`: a kill, pause, stop, network partition
    or data-loss fault, not a ``hold``, whose nodes stay unfenced); or data destroyed on
    as many replicas as a committed record is on (:func:`committed_copies`; at
    min.insync.replicas=3 two leave the third in the ELR). The reference model finds no committed loss
    without these (its cells bounded by ``faulted<=N``, where an untouched follower
    never lags out), and finds it with them (``table.TARGETED``). At replication factor 1
    there is no other replica to elect, cleanly or not: only destroyed data loses committed
    records (:func:`_lone_replica_loss_reason`).
    """
    c = config
    if not faults.leader_fault or not every_replica_faulted(c, faults):
        return None
    if c.replication_factor == 1:
        return _lone_replica_loss_reason(faults)
    node_faults = ", ".join(sorted(faults.families & NODE_FAULTS))
    # With ELR a replica leaving an ISR below min.insync joins the ELR and is elected
    # before any unclean candidate: only fencing (or uncleanly restarting) every member
    # of ISR and ELR, min_isr replicas, or unclean restarts of every copy of a committed
    # record let an out-of-sync one lead.
    elr_fenced = c.eligible_leader_replicas and faults.fenced >= min_isr(c)
    elr_passed_over = (not c.eligible_leader_replicas or elr_fenced
                       or faults.data_loss >= committed_copies(c, faults))
    if c.unclean_leader_election_enable and elr_passed_over:
        fenced = (f", and faults fenced or restarted uncleanly {min_isr(c)} or more replica(s), as many "
                  "as the ISR and the eligible leader replicas hold together" if elr_fenced else "")
        return ("unclean.leader.election.enable=true, the leader was faulted and so was every other "
                f"replica ({node_faults}){fenced}: no in-sync replica may be left, so an out-of-sync "
                "one may become leader")
    copies = committed_copies(c, faults)
    if faults.data_loss < copies:
        return None
    return (f"data was destroyed (wipe / lose-unflushed) on {copies} or more replica(s) at once, "
            "the leader was faulted and so was every other replica, and " + (
                "without eligible leader replicas the ISR can shrink to the leader alone, which "
                "is re-elected empty" if not c.eligible_leader_replicas else
                "a kill's unclean restart drops a replica from the eligible leader replicas with "
                "its log intact, so the last known leader is elected whatever it lost"
                if copies == 1 else
                f"with eligible leader replicas a committed record is on min.insync.replicas={copies}"))


def _lone_replica_loss_reason(faults: PartitionFaults) -> str | None:
    """Why committed data may be lost at replication factor 1 (given a leader fault): only
    destroyed data. No other replica exists to take over or be elected uncleanly, and a
    kill, stop, pause or network partition leaves the one replica's log as it was."""
    if faults.data_loss < 1:
        return None
    return ("replication.factor=1 and data was destroyed (wipe / lose-unflushed) on the partition's "
            "only replica: no other copy exists")


def every_replica_faulted(config: GuaranteeConfig, faults: PartitionFaults) -> bool:
    """Whether ``faults`` left no replica of the partition untouched (``faulted`` at the
    replication factor; :mod:`faultline.checkers.faults_seen` says what counts)."""
    return faults.faulted >= config.replication_factor


def committed_copies(config: GuaranteeConfig, faults: PartitionFaults) -> int:
    """How many replicas must lose their data before committed data can be gone,
    given a leader fault and every replica faulted (:func:`committed_loss_reason`).

    Without eligible leader replicas the ISR may shrink to the leader alone (the other
    replicas faulted out of it) after a record was committed, and KRaft re-elects that
    last ISR member even when it comes back empty: one replica suffices (the reference
    model's ``no-elr-wipe-leader``). The HW cannot advance while the ISR is smaller than
    min.insync.replicas (Kafka >= 3.7, with or without ELR), so committed data is on at
    least min.insync replicas; with ELR (KIP-966, Kafka >= 4.1) a replica that restarted
    uncleanly is not elected from the ELR. But a kill is an unclean shutdown too: it drops a replica
    from the ELR with its log intact, and with ISR and ELR empty the controller elects
    the last known leader whatever it lost, so after kills one replica suffices again
    (``elr-unclean-restart-loss``; the model's ``killed-out-wipe-leader``). Emptying
    them takes unclean restarts of every member, :func:`min_isr` replicas at least, so
    only when faults fenced that many (``fenced``): a kill of the wiped leader
    itself leaves a held follower in the ELR, which is elected.
    """
    if not config.eligible_leader_replicas:
        return 1
    if "kill" in faults.families and faults.fenced >= min_isr(config):
        return 1
    return min_isr(config)


def unclean_election_permitted(config: GuaranteeConfig, last_known_leader: bool) -> bool:
    """Whether a leader elected from neither the ISR nor the ELR before is permitted: with
    ``unclean.leader.election.enable=true``, or when it is the partition's last known
    leader (KIP-966: ISR and ELR both empty, the last leader comes back and is elected),
    Kafka 4.x's designed recovery, done whatever the unclean setting says."""
    return config.unclean_leader_election_enable or last_known_leader


def min_isr(config: GuaranteeConfig) -> int:
    """min.insync.replicas capped at the replication factor (Kafka's effective min ISR):
    with ELR, the fewest replicas ISR and ELR hold together, but for unclean restarts."""
    return min(config.min_insync_replicas, config.replication_factor)


#: Why nothing acknowledged is lost at replication factor 1 but to destroyed data.
_LONE_REPLICA_KEEPS = (
    "replication.factor=1: no other replica can take over or be elected uncleanly, and a kill, "
    "stop, pause or network partition leaves the only replica's log as it was (a SIGKILL keeps "
    "the page cache), so only destroyed data (wipe / lose-unflushed) loses an acknowledged write")


def forbidden(config: GuaranteeConfig, faults: PartitionFaults) -> dict[str, str]:
    """Anomaly name -> why the guarantees forbid it, for each type :func:`permitted` lacks.

    The reason names the guarantee that holds for this config and these faults, so a
    person reading a violation knows which promise Kafka (or the harness) broke.
    """
    c, allowed = config, permitted(config, faults)
    copies = committed_copies(c, faults)
    if c.replication_factor == 1 and faults.leader_fault:
        held = _LONE_REPLICA_KEEPS
    elif not faults.leader_fault:
        held = ("no fault that could move the partition's leader hit it, nor did an election move "
                "it, and it keeps every committed record")
    elif not every_replica_faulted(c, faults):
        held = ("a replica no fault touched stays in the ISR with every committed record, and "
                "an election picks an in-sync replica while one is up")
    else:
        held = f"no unclean election could happen and data was destroyed on fewer than {copies} replica(s)"
    committed = "committed data (below the high watermark) survives: " + held
    why = {
        "lost-write": (f"acks={c.acks}: " + (
            "an acknowledged write is on every in-sync replica, at least "
            f"min.insync.replicas={c.min_insync_replicas}, and " + committed if c.acks == "all"
            else _LONE_REPLICA_KEEPS if c.replication_factor == 1 and faults.leader_fault
            else "no fault that could move the partition's leader hit it, nor did an election move "
                 "it, and it is the one replica an ack vouches for")),
        "phantom-read": "consumers read only below the high watermark, and " + committed,
        "inconsistent-offsets": "an offset holds one record for good while " + committed,
        "nonmonotonic-poll": "a consumer's offsets only grow while " + committed,
        "poll-skip": "a consumer reads every offset in order while " + committed,
        "duplicate": ("enable.idempotence=true: the broker drops a retried batch it already has"
                      if c.enable_idempotence else
                      "nothing is sent twice: acks=0, or retries=0 (with librdkafka: and no fault hit "
                      "the leader, after which it re-sends uncounted), and no producer was restarted"),
        "nonmonotonic-send": ("enable.idempotence=true keeps each partition's order across retries"
                              if c.enable_idempotence else
                              "max.in.flight=1 or retries=0: no batch can overtake a retried one"),
        "aborted-read": "a send ends fail only when it was certainly not written",
        "unexpected-value": "every value read must have been sent by this run",
    }
    return {name: why[name] for name in ANOMALIES if name not in allowed}


#: Who broke a promise, by the cause :mod:`faultline.checkers.provenance` reads from the
#: batches of a duplicate or a reordering: ``broker`` (Kafka broke it), ``client`` (the
#: client under test broke idempotence; the broker could not have told), or ``unknown``
#: (the batches do not say). cause -> (culprit, what the batches show, for a person; a
#: story says whether it broke a promise, which only a forbidden instance does).
CULPRITS: Mapping[str, tuple[str, str]] = {
    "broker-dedup-failure": (
        "broker", "one producer id, epoch and sequence is stored twice: the broker's "
                  "de-duplication of a retried batch failed"),
    "broker-order-failure": (
        "broker", "one producer id and epoch numbered the sends in order, and the broker "
                  "stored them the other way round"),
    "broker-fencing-failure": (
        "broker", "the record written last is under an earlier epoch of its producer id than "
                  "one written before it: the broker appended an epoch it had fenced, which it "
                  "rejects from a client (INVALID_PRODUCER_EPOCH)"),
    "client-epoch-bump": (
        "client", "the record written last is under a later epoch of the same producer id: the "
                  "client under test bumped its epoch and sent it after the broker had written "
                  "the other one, and a new epoch's sequences start over, so the broker cannot "
                  "tell a re-send, nor one out of order"),
    "client-new-producer-id": (
        "client", "the records are under different producer ids: the client under test sent "
                  "them as two producers (after a restart or a producer id reset), and no broker "
                  "de-duplicates or orders one producer id's records against another's"),
    "client-resequenced": (
        "client", "one producer id and epoch gave the records sequence numbers that do not "
                  "follow the sends (one record numbered twice, or a later send numbered "
                  "first): the client under test numbered them wrongly"),
    "unknown": (
        "unknown", "the replicas' batches do not say who wrote the copies (no replicas.jsonl, "
                   "batches without a producer id: a producer without idempotence, or a run "
                   "before they were recorded; a copy in no replica's log, or replicas that "
                   "disagree on who wrote it)"),
}


def culprit(cause: str) -> tuple[str, str]:
    """``(culprit, reason)`` for a :mod:`~faultline.checkers.provenance` cause; see :data:`CULPRITS`."""
    return CULPRITS[cause]


#: Where the table permits what the reference model never shows, and why it stays so:
#: the one list of such cells (the model's agreement test maps every difference to a
#: key here and prints the count).
BEYOND_MODEL: Mapping[str, str] = {
    "acks0-no-promise":
        "acks=0 promises nothing (Kafka's docs: no guarantee the server received the record); "
        "the model loses acks=0 writes only to a leader fault or a dropped request, but a real "
        "producer also drops them on a reconnect or a leader move no nemesis caused "
        "(auto leader rebalancing), so the table does not forbid them; at replication factor 1 "
        "the model's kill, stop or cut-off of the one broker keeps what it wrote, where a real "
        "one drops the requests still unread in its sockets, unanswered",
}


def permitted(config: GuaranteeConfig, faults: PartitionFaults) -> dict[str, str]:
    """Anomaly name -> reason, for each anomaly type the guarantees permit.

    ``inconsistent-offsets`` is present when either of its rows permits it; its reason
    says whether only instances involving an ack are permitted (see :func:`rules`).
    """
    r = rules(config, faults)
    return {k: v for k, v in r.items() if k not in (ISO_ACK, ISO_READS)}


# -- transactions (the txn checker, :mod:`faultline.checkers.transactions`) -----------------

#: The txn checker's anomaly types beyond :data:`~faultline.checkers.result.ANOMALIES` (whose
#: ``lost-write`` and ``aborted-read`` it counts too, of transactions).
TORN = "torn-transaction"
G0 = "G0"
G1C = "G1c"
PROCESSED_TWICE = "processed-twice"
TXN_ANOMALIES: tuple[str, ...] = ("aborted-read", "precommitted-read", TORN, "lost-write", G0,
                                  "nonmonotonic-send", G1C, PROCESSED_TWICE)

#: The highest transaction protocol version each client under test speaks: librdkafka
#: implements no KIP-890 part 2 (confluentinc/librdkafka#5423), so its transactions run
#: version 1 on any cluster; the Java client speaks version 2 from Kafka 4.0.
CLIENT_TRANSACTION_VERSION: Mapping[str, int] = {"librdkafka": 1, "java": 2}

#: Fault families that can hold a client's request and let it land late (a paused broker, a
#: dropped, delayed or degraded link): the shape of KAFKA-17754. A kill or a stop drops what
#: the broker had not read.
DELAYING_FAULTS = frozenset({"pause", "partition", "toxics", "links"})


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    """What the transaction guarantees depend on beyond the topic's (a
    :class:`GuaranteeConfig`, for committed loss): the protocol version the run's
    transactions used (1 or 2)."""

    protocol: int = 1

    @classmethod
    def from_spec(cls, spec: TestSpec) -> TransactionConfig:
        """Version 2 when the cluster runs ``transaction.version`` 2 (set, or Kafka 4.0's
        default for a new cluster) and the client speaks it (:data:`CLIENT_TRANSACTION_VERSION`)."""
        cluster = spec.kafka.transaction_version or (2 if release(spec.kafka.version) >= (4, 0) else 1)
        return cls(protocol=min(cluster, CLIENT_TRANSACTION_VERSION[spec.workload.client]))


#: Why a write cycle is no violation where none of its edges goes against real time (puts a
#: transaction's write before that of one that had ended before it began).
CONCURRENT_WRITE_CYCLE = (
    "each edge of the cycle joins transactions that ran concurrently or in the order of the "
    "edge, and Kafka's transactions isolate readers "
    "from uncommitted writes (read committed, KIP-98), not writers from one another: each "
    "partition orders records as they are appended, so two transactions may meet two partitions "
    "in opposite orders (Jepsen, Redpanda 21.10.1: write cycles in the Kafka protocol)")


def transaction_rules(config: TransactionConfig, families: frozenset[str],
                      loss: str | None = None, rewound: str | None = None) -> dict[str, str]:
    """Every transaction anomaly the guarantees permit, name -> reason; absent names forbid
    (:func:`transaction_forbidden` says why). ``families``: the fault families that could
    have held a request of the transaction past its end (for an instance, those whose
    windows overlap its span, docs/design.md "Transactions"; for the run, every one it saw);
    ``loss``: why committed records of the partitions it concerns may be lost, where they
    may (the queue's ``lost-write`` rule, :func:`committed_loss_reason`, by those
    partitions' faults; for G0, of an edge's partition, written by its earlier
    transaction); ``rewound``: why the read-process-write group's committed position may
    have gone back in a processed-twice instance's window, where it may (the group
    checker's ``redelivery-below-commit`` excuse,
    :meth:`~faultline.checkers.groups.FaultWindows.excused`). A write cycle (G0) whose
    edges all agree with real time is always permitted (:data:`CONCURRENT_WRITE_CYCLE`);
    this rule is for the others."""
    out: dict[str, str] = {}
    delaying = sorted(families & DELAYING_FAULTS)
    if config.protocol == 1 and delaying:
        why = (f"transaction protocol version 1 and {', '.join(delaying)}: a produce, commit or abort "
               "request held past its transaction's end can land in the producer's next one, which "
               "the coordinator cannot tell apart (KAFKA-17754; version 2, KIP-890, bumps the epoch "
               "with every transaction and fences it)")
        for name in TXN_ANOMALIES:
            out[name] = why
    if loss is not None:
        why = f"committed records may be lost ({loss}), part of a transaction with them"
        out.setdefault("lost-write", why)
        out.setdefault(TORN, why)
        out.setdefault(G0, f"committed records may be lost ({loss}): a later transaction's record "
                           "can take the offset of a lost one, ahead of the earlier transaction's")
        out.setdefault("nonmonotonic-send", f"records may be lost ({loss}): a later record can take "
                                            "the offset of a lost one")
        out.setdefault(G1C, f"committed records may be lost ({loss}): a later transaction's record "
                            "can take the offset of a lost one, ahead of the earlier transaction's")
    if rewound is not None:
        out.setdefault(PROCESSED_TWICE, f"the group's committed position may have gone back after "
                                        f"the first transaction read the record ({rewound}), and "
                                        "the record was handed out again")
    return out


def transaction_forbidden(config: TransactionConfig, families: frozenset[str],
                          loss: str | None = None, rewound: str | None = None) -> dict[str, str]:
    """Anomaly name -> why the guarantees forbid it, for each transaction anomaly
    :func:`transaction_rules` does not permit (the same arguments)."""
    allowed = transaction_rules(config, families, loss, rewound)
    version = (f"transaction protocol version {config.protocol}"
               + (" fences a late request of an earlier transaction (KIP-890)" if config.protocol == 2
                  else ", and no fault could hold a request past its transaction's end"))
    why = {
        "aborted-read": ("a read_committed reader gets only committed transactions' records (KIP-98); "
                         + version),
        "precommitted-read": ("a read_committed reader gets a transaction's records only once its "
                              "commit marker is written, which only the producer's commit asks for "
                              "(KIP-98: the last stable offset stays below an open transaction); "
                              + version),
        TORN: f"a transaction commits all its records or none, and a read_committed reader gets all of "
              f"a committed one's where it reads past them; {version}",
        "lost-write": f"a committed transaction's records are below the high watermark, which no fault "
                      f"of their partition's window can lose (the queue's committed-loss rule); {version}",
        G0: f"a transaction's records follow, in every partition, those of a transaction that ended "
            f"before it began; {version}",
        "nonmonotonic-send": f"a transactional producer is idempotent: it appends its records of a "
                             f"partition in the order it sent them, within a transaction and from one "
                             f"to the next, which ends before the next begins (KIP-98); {version}",
        G1C: f"a read-process-write transaction reads only committed records (KIP-98), before it "
             f"appends its own: every record of a transaction it read, and that transaction's "
             f"commit, precede its own records, so a cycle with a write-read edge needs a late or "
             f"lost write; {version}",
        PROCESSED_TWICE: ("a read-process-write transaction commits its group's offsets with its "
                          "records, atomically (KIP-98), and a member of an older generation cannot "
                          "commit (KIP-447), so a record is handed to one committed transaction; no "
                          "fault could send the group's committed position back between the first "
                          "transaction's invoke and the second's read (a truncation of the record's "
                          "partition, or data destroyed on a replica of the group's "
                          "__consumer_offsets partition); " + version),
    }
    return {name: why[name] for name in TXN_ANOMALIES if name not in allowed}


#: Why two members may hold a partition at once when the first one's assignment ended
#: ``lost`` (docs/design.md, "Consumer groups").
OVERLAP_AFTER_LOST = (
    "the first owner's assignment ended lost: the coordinator expired its session and gave the "
    "partition to another member before the first heard; Kafka fences a lost member's commits "
    "(its generation or member epoch), not its fetches (KIP-848; classic: session.timeout.ms)")
#: Why two members may hold a partition at once when the first one's client was fenced for
#: good (a fatal error, ``_FATAL``, and retired) before it heard that its assignment was gone.
OVERLAP_AFTER_FENCED = (
    "the first owner was fenced for good (its client's fatal error: another member joined with "
    "its group.instance.id, KIP-345) before it heard that the partition was given away; Kafka "
    "fences a fenced member's commits (FENCED_INSTANCE_ID), not its fetches")
#: Why two members may hold a partition at once when the first one's process was paused
#: past its session over the second's assignment, and retired on resuming before it heard.
OVERLAP_AFTER_PAUSE = (
    "the first owner's process was stopped (SIGSTOP) longer than its session, over the second "
    "owner's assignment: it sent no heartbeat, the coordinator expired its session and gave the "
    "partition away (KIP-848's member epoch; classic: session.timeout.ms), and on resuming it "
    "was retired, reading nothing, before it heard")


def group_permitted(config: GuaranteeConfig, faults: PartitionFaults) -> dict[str, str]:
    """Group anomaly name -> reason, for the group anomalies (:mod:`faultline.checkers.groups`)
    a partition's faults permit: ``commit-backwards``, ``lost-to-group``,
    ``redelivery-below-commit`` and ``reset-without-cause`` where the partition may lose
    acknowledged writes (:func:`permitted`'s ``lost-write``), since a truncation below the
    group's committed position (or a member's) rewrites offsets members had read and sends
    the next fetch out of range, where ``auto.offset.reset`` rewinds the member
    (KAFKA-19902; docs/design.md, "Consumer groups"). The others are never permitted."""
    loss = permitted(config, faults).get("lost-write")
    if loss is None:
        return {}
    return {
        "commit-backwards": f"{loss}; a truncation below the committed offset moves the owner's "
                            "position back (its fetch out of range, where auto.offset.reset "
                            "rewinds it, or KIP-320's leader epoch validation finding the log "
                            "diverged), so it commits lower (KAFKA-19902)",
        "lost-to-group": f"{loss}; a truncation below the committed offset lets new records take "
                         "offsets members had already read",
        "redelivery-below-commit": f"{loss}; a truncation below the committed offset puts the new "
                                   "owner's fetch out of range, where auto.offset.reset=earliest "
                                   "rewinds it, or KIP-320's validation of the commit's leader "
                                   "epoch moves it back to where the logs diverged: below the "
                                   "commit (KAFKA-19902)",
        "reset-without-cause": f"{loss}; a truncation below a member's position puts its fetch out of "
                               "range (or KIP-320's leader epoch validation finds the log diverged), "
                               "and the consumer resets its position: the cause",
    }


def offsets_config(spec: TestSpec) -> GuaranteeConfig:
    """The guarantees of a group's commits, as its ``__consumer_offsets`` partition keeps
    them: the coordinator answers a commit once it is below the partition's HW, so on every
    ISR member, as an acks=all write (docs/design.md, "Consumer groups"), on
    ``offsets.topic.replication.factor`` replicas, at the broker-wide
    ``min.insync.replicas`` and ``unclean.leader.election.enable`` (the topic sets neither:
    1 and false unless ``kafka.broker_config`` does; a value Kafka would refuse to start
    with counts as unset)."""
    b = spec.kafka.broker_config
    return GuaranteeConfig(
        acks="all", min_insync_replicas=_setting(b, "min.insync.replicas", 1),
        replication_factor=_setting(b, "offsets.topic.replication.factor",
                                    spec.kafka.internal_replication_factor),
        unclean_leader_election_enable=b.get("unclean.leader.election.enable", "").strip().lower() == "true",
        eligible_leader_replicas=elr_enabled(spec.kafka.version))


def _setting(config: Mapping[str, str], name: str, default: int) -> int:
    value = config.get(name, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else default


def offsets_destroyed(families: Sequence[str], loss: str) -> str:
    """Why a group's commit may be lost (``commit-backwards``, ``commit-lost``, a read below
    or away from the committed position, the offsets log's replicas disagreeing, and
    ``processed-twice``) where faults of ``families`` destroyed data on a node holding a
    replica of the group's ``__consumer_offsets`` partition after the commit, and that
    partition's own faults permit losing a committed record there (``loss``:
    :func:`committed_loss_reason` of :func:`offsets_config`; which node, and whether the
    offsets log refutes it, is :meth:`faultline.checkers.groups.FaultWindows.destroyed`'s
    question)."""
    return (f"{', '.join(families)} destroyed data on a node of the group's __consumer_offsets "
            f"partition after the higher commit, and that partition may lose an acknowledged "
            f"commit ({loss}): the group's position may have gone with it")
