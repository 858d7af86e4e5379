"""White-box invariants: what the brokers' own state says, beside the black-box verdict.

Inputs are files of the run directory, all optional: ``metadata.jsonl`` (the decoded
KRaft metadata log, see :mod:`faultline.brokerstate.metadata_log`), ``replicas.jsonl``
(each replica's batches, see :mod:`faultline.brokerstate.replica_logs`) and
``observations.jsonl`` (samples taken during the run: ``time``, ``topic``,
``partition``, ``leader``, ``isr``, ``hw`` and its ``hw_epoch``, and per node ``leo`` and
``hw_checkpoint``).
Only the topic under test is checked. The invariants (docs/design.md, "White-box
observers"):

``leader-from-isr-or-elr``
    every new leader was in the ISR or the ELR just before it was elected. An election
    outside them is unclean: permitted or a violation as
    :func:`~faultline.checkers.guarantees.unclean_election_permitted` says. A *last known
    leader* election (KIP-966: ISR and ELR both empty, the partition's last leader comes
    back and is elected, marked RECOVERING) is listed, as unclean.
``hw-le-leo``
    a replica's checkpointed HW never exceeds its LEO. A sample's reads are not atomic
    and their order is unknown, so the checkpoint of one sample is compared with the
    LEO of the *next* sample of that partition, read after it: HW(t) <= LEO(t) and
    neither goes back without data loss, so a checkpoint above that later LEO is
    certainly wrong. Nodes whose data a ``wipe`` or ``lose-unflushed`` destroyed are
    not checked from that fault on (their checkpoint file legitimately outlives the
    data it describes).
``hw-monotonic``
    the HW clients see (``hw`` of successive samples of a partition) never decreases:
    not within a leader epoch, nor below what an earlier epoch last showed
    (``hw_epoch``, the epoch of the broker that answered). An answer under an epoch
    older than one already seen comes from a deposed leader that has not learned it
    was replaced (cut off from the controller): its HW is stale, not moved back.
``replicas-agree-below-hw``
    the replicas hold the same batches (offsets and CRC) below the HW, where the HW is
    the one the final drain saw (else the highest checkpointed one), and only where
    both replicas hold the offsets; a replica outside the last ISR of the metadata log
    (every replica, without one) only below its own checkpointed HW: it may hold an
    uncommitted tail it has not yet truncated.

A decreasing HW and replicas that disagree below it mean committed data was lost or
rewritten; they are *permitted* where the guarantees permit losing committed data for
the config and the faults the partition saw
(:func:`~faultline.checkers.guarantees.committed_loss_reason`), else violations. The
config, those faults, the drain's HW and when data was destroyed are what the queue
checker judged the history by (:class:`~faultline.checkers.verdict.QueueFacts`).

The verdict: ``white_box.valid`` is false when an invariant has a violation that is not
permitted, "unknown" when an input could not be read, else true. It never makes
results.json's ``valid`` false (docs/history.md: "false when any forbidden anomaly was
seen", by the clients): but where the history found nothing forbidden and the white box
a violation, the two disagree and the composed check makes ``valid`` unknown
(``broker-state-disagrees``, :func:`faultline.checkers.stored.check_brokers`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

import orjson

from faultline.checkers.conform import schema
from faultline.checkers.faults_seen import MetadataState, Timeline
from faultline.checkers.guarantees import GuaranteeConfig, committed_loss_reason, unclean_election_permitted
from faultline.checkers.result import UNKNOWN, Valid, displace_permitted, merge_valid
from faultline.checkers.verdict import QueueFacts
from faultline.errors import HistoryError
from faultline.rundir import (
    CLUSTER_FILE,
    METADATA_FILE,
    OBSERVATIONS_FILE,
    REPLICAS_FILE,
    read_jsonl,
    read_jsonl_prefix,
    special,
)
from faultline.spec import TestSpec

#: results.json keeps at most this many examples per invariant.
MAX_INVARIANT_EXAMPLES = 100

Line = Mapping[str, Any]

#: Every invariant, in the order results.json and the report list them, with its summary.
INVARIANTS: Mapping[str, str] = {
    "leader-from-isr-or-elr": "every new leader came from the ISR or ELR before it",
    "hw-le-leo": "no replica's HW checkpoint exceeded its LEO",
    "hw-monotonic": "the HW clients see never moved backwards",
    "replicas-agree-below-hw": "replicas held the same batches below the HW",
}


@dataclass(slots=True)
class Invariant:
    """One invariant's outcome: how many cases were checked, what broke it.

    ``examples`` holds at most :data:`MAX_INVARIANT_EXAMPLES` breaks (a violation displaces the last
    permitted one kept, so a violated invariant shows its violations), each with ``time`` (ns
    since the run started, or None), ``partition`` and ``what`` (for a person), and
    ``permitted`` (whether the guarantees allow it for this config and these faults).
    """

    name: str
    checked: int = 0
    violations: int = 0
    permitted: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)
    source: str | None = None

    def add(self, example: dict[str, Any], permitted: bool = False) -> None:
        if permitted:
            self.permitted += 1
        else:
            self.violations += 1
        full = len(self.examples) >= MAX_INVARIANT_EXAMPLES
        if full and (permitted or not displace_permitted(self.examples)):
            return
        self.examples.append({**example, "permitted": permitted})

    @property
    def status(self) -> str:
        """``fail`` (a violation), ``pass`` (cases checked, none failed), ``not-checked``."""
        return "fail" if self.violations else "pass" if self.checked else "not-checked"

    def summary(self) -> str:
        """One line for a person: the invariant, and what became of it."""
        what = INVARIANTS[self.name]
        if self.source is None:
            return f"{what}: not checked (no input)"
        if not self.checked and not self.permitted:
            return f"{what}: not checked (nothing to check in {self.source})"
        extra = f", {self.permitted} permitted" if self.permitted else ""
        if self.violations:
            return f"{what}: {self.violations} violation(s) in {self.checked} checked{extra}"
        return f"{what}: held in {self.checked} checked{extra}"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "checked": self.checked,
                "violations": self.violations, "permitted": self.permitted, "source": self.source,
                "summary": self.summary(), "examples": self.examples}


# --- reading -------------------------------------------------------------------------


def metadata_problem(line: Line) -> str | None:
    """What is wrong with a ``metadata.jsonl`` line: its schema's word (``raw``, which no
    check reads, may be absent), or a partition line without its ``partition`` (which the
    schema leaves optional and every reading needs)."""
    why = schema("metadata.schema.json", ("raw",)).problem(line)
    if why is None and line["type"] in ("partition", "partition-change") and "partition" not in line:
        return "a partition line needs 'partition'"
    return why


def observation_problem(line: Line) -> str | None:
    """What is wrong with an ``observations.jsonl`` line (its schema's word), or None."""
    return schema("observations.schema.json").problem(line)


def replica_problem(line: Line) -> str | None:
    """What is wrong with a ``replicas.jsonl`` line: its schema's word, or a log start and
    end not both null (an empty log) or both integers."""
    why = schema("replicas.schema.json").problem(line)
    if why is None and (line["log_start_offset"] is None) != (line["log_end_offset"] is None):
        return "'log_start_offset' and 'log_end_offset' must both be null (an empty log) or both offsets"
    return why


# --- leader changes ------------------------------------------------------------------


def partition_timeline(metadata: Iterable[Line] | None, topic: str) -> Timeline | None:
    """``topic``'s partitions' state after each change, from ``metadata.jsonl``'s lines
    (a :data:`faults_seen.Timeline`, in log order).

    None without a (readable) metadata log; a line without a time or an ISR is skipped.
    """
    if metadata is None:
        return None
    out: dict[tuple[str, int], list[MetadataState]] = {}
    for line in metadata:
        p, t, isr = line.get("partition"), line.get("time"), line.get("isr")
        if (line.get("topic") == topic and line.get("type") in ("partition", "partition-change")
                and type(p) is int and type(t) is int and isinstance(isr, list)):
            leader, replicas, epoch = line.get("leader"), line.get("replicas"), line.get("leader_epoch")
            out.setdefault((topic, p), []).append(MetadataState(
                t, leader if type(leader) is int else None, _node_set(isr), _node_set(replicas),
                _node_set(line.get("elr")), epoch if type(epoch) is int else None))
    return out


def _node_set(nodes: Any) -> frozenset[int]:
    return frozenset(n for n in nodes if type(n) is int) if isinstance(nodes, list) else frozenset()


def leader_changes(metadata: Iterable[Line], topic: str) -> list[dict[str, Any]]:
    """Every change of leader of ``topic``'s partitions, in log order.

    Each: ``time``, ``offset``, ``partition``, ``from`` / ``to`` (node or None for no
    leader), ``epoch`` (the leader epoch after), ``isr_before``, ``elr_before``,
    ``isr`` (after) and ``kind``: ``isr`` / ``elr`` (the new leader was in the ISR / ELR
    before), ``last-known-leader`` (KIP-966 recovery, see the module docstring),
    ``unclean`` (none of these), ``offline`` (no leader now) or ``unknown`` (the state
    before is not in the log read).
    """
    before: dict[int, Line] = {}
    out: list[dict[str, Any]] = []
    for line in metadata:
        if line.get("topic") != topic or line.get("type") not in ("partition", "partition-change"):
            continue
        p = int(line["partition"])
        prev = before.get(p)
        before[p] = line
        if prev is None or line.get("type") == "partition" or prev.get("leader") == line.get("leader"):
            continue
        new, old = line.get("leader"), prev.get("leader")
        isr, elr = prev.get("isr"), prev.get("elr")
        out.append({"time": line.get("time"), "offset": line.get("offset"), "partition": p, "from": old,
                    "to": new, "epoch": line.get("leader_epoch"), "isr_before": isr, "elr_before": elr,
                    "isr": line.get("isr"), "kind": _kind(new, prev)})
    return out


def _kind(new: Any, prev: Line) -> str:
    isr, elr, lke = prev.get("isr"), prev.get("elr"), prev.get("last_known_elr")
    if new is None:
        return "offline"
    if isr is None:
        return "unknown"
    if new in isr:
        return "isr"
    if new in (elr or ()):
        return "elr"
    if not isr and not elr and lke == [new]:
        return "last-known-leader"
    return "unclean"


def check_elections(changes: Iterable[Line], config: GuaranteeConfig) -> Invariant:
    """``leader-from-isr-or-elr`` over :func:`leader_changes`, for a topic of ``config``."""
    inv = Invariant("leader-from-isr-or-elr", source=METADATA_FILE)
    for c in changes:
        if c["kind"] in ("offline", "unknown"):
            continue
        inv.checked += 1
        if c["kind"] in ("unclean", "last-known-leader"):
            why = ("the partition's last leader, elected with ISR and ELR empty (KIP-966)"
                   if c["kind"] == "last-known-leader" else
                   f"not in the ISR {c['isr_before']} nor the ELR {c['elr_before']}")
            inv.add({"time": c["time"], "partition": c["partition"], "offset": c["offset"],
                     "what": f"unclean election of n{c['to']} (epoch {c['epoch']}): {why}"},
                    permitted=unclean_election_permitted(config, c["kind"] == "last-known-leader"))
    return inv


# --- observations --------------------------------------------------------------------


def check_hw_le_leo(observations: Sequence[Line], topic: str,
                    data_loss_since: Mapping[int, int],
                    loss_permitted: Container[int] = ()) -> Invariant:
    """``hw-le-leo``: a sample's ``hw_checkpoint[n]`` against the next sample's ``leo[n]``.

    ``data_loss_since``: node -> time of the first wipe / lose-unflushed that hit it.
    On a partition in ``loss_permitted`` a checkpoint above the LEO is permitted: a
    replica that truncates committed data (after an unclean election) keeps the old HW
    in its checkpoint file until the next periodic checkpoint.
    """
    inv = Invariant("hw-le-leo", source=OBSERVATIONS_FILE)
    for p, samples in _by_partition(observations, topic).items():
        for s, nxt in itertools.pairwise(samples):
            ckpt, leo = s.get("hw_checkpoint") or {}, nxt.get("leo") or {}
            for node, hw in ckpt.items():
                later = leo.get(node)
                if not isinstance(hw, int) or not isinstance(later, int):
                    continue
                lost = data_loss_since.get(int(node))
                if lost is not None and nxt["time"] >= lost:  # the LEO read may follow it
                    continue
                inv.checked += 1
                if hw > later:
                    inv.add({"time": s["time"], "partition": p, "node": int(node),
                             "what": f"n{node}'s HW checkpoint {hw} above its LEO {later} "
                                     f"read at {nxt['time'] / 1e9:.3f} s"}, permitted=p in loss_permitted)
    return inv


def check_hw_monotonic(observations: Sequence[Line], topic: str,
                       loss_permitted: Container[int]) -> Invariant:
    """``hw-monotonic``: the client-visible ``hw`` samples of a partition, in time order.

    Each is compared with the latest earlier sample of every leader epoch up to its own
    ``hw_epoch``, and breaks where it is below the highest of them: a leader epoch's HW
    never decreases, and a later epoch's never falls below what an earlier one showed
    (a leader's HW is committed, and every later clean leader holds it). So the stale
    answer of a deposed leader, under an epoch older than one seen, is judged only
    against its own epoch and older ones. A sample without an epoch (files written
    before it was recorded) is of every epoch: such a file is judged sample by sample.
    """
    inv = Invariant("hw-monotonic", source=OBSERVATIONS_FILE)
    for p, samples in _by_partition(observations, topic).items():
        latest: dict[int | None, Line] = {}  # leader epoch (None: not known) -> its latest sample
        for b in samples:
            if not _is_int(b.get("hw")):
                continue
            epoch = hw_epoch(b)
            earlier = [a for e, a in latest.items() if e is None or epoch is None or e <= epoch]
            latest[epoch] = b
            if not earlier:
                continue
            inv.checked += 1
            a = max(earlier, key=lambda s: int(s["hw"]))
            if b["hw"] < a["hw"]:
                inv.add({"time": b["time"], "partition": p,
                         "what": f"HW {a['hw']}{_epoch_text(a)} at {a['time'] / 1e9:.3f} s, then "
                                 f"{b['hw']}{_epoch_text(b)} (leader n{b.get('leader')})"},
                        permitted=p in loss_permitted)
    return inv


def _is_int(x: Any) -> TypeGuard[int]:
    return isinstance(x, int) and not isinstance(x, bool)


def hw_epoch(sample: Line) -> int | None:
    """The leader epoch an observation's HW was answered under (``hw_epoch``), or None
    when it has none: no HW, an answer without an epoch, a file written before epochs
    were recorded."""
    epoch = sample.get("hw_epoch")
    return epoch if _is_int(sample.get("hw")) and _is_int(epoch) and epoch >= 0 else None


def _epoch_text(sample: Line) -> str:
    """`` (epoch 5)`` for a sample whose HW came with its leader epoch, else ``""``."""
    epoch = sample.get("hw_epoch")
    return f" (epoch {epoch})" if _is_int(epoch) else ""


def _by_partition(observations: Iterable[Line], topic: str) -> dict[int, list[Line]]:
    out: dict[int, list[Line]] = {}
    for s in observations:
        if s.get("topic", topic) == topic:
            out.setdefault(int(s["partition"]), []).append(s)
    for samples in out.values():
        samples.sort(key=lambda s: s["time"])
    return out


# --- replicas ------------------------------------------------------------------------


def check_replicas_agree(replicas: Sequence[Line], topic: str, hw: Mapping[int, int | None],
                         loss_permitted: Container[int],
                         isr: Mapping[int, frozenset[int]] | None = None) -> Invariant:
    """``replicas-agree-below-hw``: per pair of replicas, the batches below the HW that
    both hold must be the same (base and last offset, CRC). One example per diverging
    pair: its first differing batch.

    ``isr``: partition -> its ISR in the metadata log's last state. Kafka promises the
    HW only for the ISR: a replica outside it (or any, without ``isr``) may still hold a
    divergent uncommitted tail it truncates once it fetches again, so it is compared only
    below its own checkpointed HW (what it knew to be committed), none without one."""
    inv = Invariant("replicas-agree-below-hw", source=REPLICAS_FILE)
    for p, reps in replicas_by_partition(replicas, topic).items():
        limit = hw.get(p)
        if limit is None:
            limit = max((r["hw_checkpoint"] for r in reps if isinstance(r.get("hw_checkpoint"), int)),
                        default=None)
        if limit is None:
            continue
        members = None if isr is None else isr.get(p)
        bound = {int(r["node"]): limit if members is not None and int(r["node"]) in members
                 else min(limit, r["hw_checkpoint"]) if type(r.get("hw_checkpoint")) is int else 0
                 for r in reps}
        for i, a in enumerate(reps):
            for b in reps[i + 1:]:
                _compare(inv, p, a, b, min(bound[int(a["node"])], bound[int(b["node"])]),
                         p in loss_permitted)
    return inv


def final_isr(metadata: Iterable[Line], topic: str) -> dict[int, frozenset[int]]:
    """partition -> its ISR in the last state ``metadata.jsonl`` gives for it."""
    timeline = partition_timeline(metadata, topic) or {}
    return {p: states[-1].isr for (_, p), states in timeline.items() if states}


def replicas_by_partition(replicas: Iterable[Line], topic: str) -> dict[int, list[Line]]:
    """``replicas.jsonl``'s lines of ``topic``, by partition, each list by node."""
    parts: dict[int, list[Line]] = {}
    for r in replicas:
        if r.get("topic") == topic:
            parts.setdefault(int(r["partition"]), []).append(r)
    return {p: sorted(reps, key=lambda r: int(r["node"])) for p, reps in sorted(parts.items())}


def agreed_end(reps: Sequence[Line]) -> int | None:
    """The offset below which every replica in ``reps`` holds the same batches (base and
    last offset, CRC) from the greatest log start on: the least log end, or the first
    offset where two differ or the first replica has a gap.

    None when a replica's log end is unknown or there is no replica: nothing is agreed.
    """
    ends = [r.get("log_end_offset") for r in reps]
    if not reps or not all(type(e) is int for e in ends):
        return None
    end = min(int(e) for e in ends)  # type: ignore[arg-type]
    start = max(int(r["log_start_offset"]) for r in reps)
    first, others = reps[0], [{int(x[0]): x for x in r["batches"]} for r in reps[1:]]
    covered = start
    for x in first["batches"]:
        base, last = int(x[0]), int(x[1])
        if last < start:
            continue
        if base >= end:
            break
        if base > covered or any(
                (y := o.get(base)) is None or int(y[1]) != last or int(y[3]) != int(x[3])
                for o in others):
            return min(base, covered)
        covered = last + 1
    return min(end, covered)


def replicas_at(reps: Sequence[Line], offset: int) -> str:
    """What each replica's log holds at ``offset`` (the batch, and who wrote it where
    ``replicas.jsonl`` says), in a phrase for a story."""
    held: dict[tuple[int, int, int, int], list[int]] = {}
    ends: list[str] = []
    for r in reps:
        batch = next((b for b in r["batches"] if int(b[0]) <= offset <= int(b[1])), None)
        if batch is not None:
            held.setdefault(tuple(int(v) for v in batch[:8]), []).append(int(r["node"]))  # type: ignore[arg-type]
        else:
            ends.append(f"n{r['node']} ends at {r.get('log_end_offset')}")
    said = [f"batch {b[0]}..{b[1]} (leader epoch {b[2]}, crc {b[3]}{_producer(b)}) on "
            + ", ".join(f"n{n}" for n in nodes) for b, nodes in held.items()]
    if ends:
        said.append("nothing on " + ", ".join(ends))
    return f"the replicas' logs after the run hold at offset {offset}: " + "; ".join(said)


def _producer(batch: Sequence[int]) -> str:
    """``, producer id 1000 epoch 0 sequences 5..9`` for a batch that records one, else ``""``."""
    if len(batch) < 8 or batch[4] < 0:
        return ""
    return f", producer id {batch[4]} epoch {batch[5]} sequences {batch[6]}..{batch[7]}"


def _compare(inv: Invariant, p: int, a: Line, b: Line, hw: int, loss_permitted: bool) -> None:
    if a.get("log_end_offset") is None or b.get("log_end_offset") is None:
        return
    lo = max(int(a["log_start_offset"]), int(b["log_start_offset"]))
    hi = min(int(a["log_end_offset"]), int(b["log_end_offset"]), hw)
    ours, theirs = ({int(x[0]): x for x in r["batches"]} for r in (a, b))
    for base in sorted(ours.keys() | theirs.keys()):  # a batch either one lacks is a difference too
        x, y = ours.get(base), theirs.get(base)
        if base < lo or int((x if x is not None else y)[1]) >= hi:  # type: ignore[index]
            continue
        inv.checked += 1
        if x is None or y is None or int(y[1]) != int(x[1]) or int(y[3]) != int(x[3]):
            inv.add({"time": None, "partition": p, "offset": base, "nodes": [int(a["node"]), int(b["node"])],
                     "what": f"below HW {hw}: n{a['node']} has {_batch_text(x, base)}, "
                             f"n{b['node']} has {_batch_text(y, base)}"}, permitted=loss_permitted)
            return


def _batch_text(x: Sequence[Any] | None, base: int) -> str:
    """A replica's batch at ``base`` in an example, or that it has none."""
    if x is None:
        return f"no batch starting at {base}"
    return f"batch {x[0]}..{x[1]} crc {x[3]} (epoch {x[2]})"


# --- the whole ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerFiles:
    """A run's white-box files, each read and shape-checked once.

    A list holds a file's lines; None means the run has no such file or it could not
    be read, which ``errors`` then says (one line each, naming file and line), and
    ``unreadable`` names; observations (written as the run went) whose last line was
    cut hold the lines before it, and ``errors`` names the cut line. ``uncollected`` is
    what ``cluster.json`` says could not be collected (``broker_state_errors``), or why
    it could not be read; ``eligible_leader_replicas`` what it says the cluster ran with
    (None: not known).
    """

    metadata: list[dict[str, Any]] | None = None
    observations: list[dict[str, Any]] | None = None
    replicas: list[dict[str, Any]] | None = None
    errors: tuple[str, ...] = ()
    unreadable: tuple[str, ...] = ()
    uncollected: tuple[str, ...] = ()
    #: Whether the run has any of the files.
    present: bool = False
    eligible_leader_replicas: bool | None = None

    @classmethod
    def read(cls, run_dir: Path) -> BrokerFiles:
        """Read what ``run_dir`` has; never raises for bad input."""
        errors: list[str] = []
        unreadable: list[str] = []
        present = False

        def load(name: str, shape: Callable[[Line], str | None],
                 appended: bool = False) -> list[dict[str, Any]] | None:
            nonlocal present
            path = Path(run_dir) / name
            if not path.exists():  # one that is there but no readable file is unreadable
                return None
            present = True
            try:
                if appended:  # written as the run went: a run that died leaves a prefix
                    read = read_jsonl_prefix(path, shape)
                    if read.cut is not None:
                        errors.append(f"{path}:{read.cut}: the last line was cut (the run died "
                                      "writing it); only the lines before it were checked")
                    lines = read.objects
                else:
                    lines = read_jsonl(path, shape)
                return lines
            except HistoryError as e:
                errors.append(str(e))
                unreadable.append(name)
                return None

        uncollected, elr = _cluster_facts(Path(run_dir) / CLUSTER_FILE)
        return cls(load(METADATA_FILE, metadata_problem),
                   load(OBSERVATIONS_FILE, observation_problem, appended=True),
                   load(REPLICAS_FILE, replica_problem),
                   tuple(errors), tuple(unreadable), uncollected, present, elr)


def _cluster_facts(path: Path) -> tuple[tuple[str, ...], bool | None]:
    """What ``cluster.json`` says the run could not collect (nothing when it has no such
    file), and whether the cluster ran with eligible leader replicas (None: not said).
    A file that cannot be read, or does not conform to its schema, says it could not be
    read, naming what is wrong."""
    if not path.exists():
        return (), None
    if special(path):
        return (f"{CLUSTER_FILE} could not be read: not a regular file",), None
    try:
        facts = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as e:
        return (f"{CLUSTER_FILE} could not be read: {e}",), None
    why = schema("cluster.schema.json").problem(facts)
    if why is not None:
        return (f"{CLUSTER_FILE} could not be read: {why}",), None
    return tuple(facts.get("broker_state_errors") or ()), facts["eligible_leader_replicas"]


def has_files(run_dir: Path) -> bool:
    """Whether ``run_dir`` has any white-box file (:attr:`BrokerFiles.present`)."""
    return any((Path(run_dir) / name).exists() for name in (METADATA_FILE, OBSERVATIONS_FILE, REPLICAS_FILE))


def check_white_box(spec: TestSpec, files: BrokerFiles, facts: QueueFacts) -> dict[str, Any] | None:
    """results.json's ``white_box`` for a run's :class:`BrokerFiles`, or None when the run
    has none of the files.

    ``facts`` are what the queue checker judged the history by: the guarantees' config,
    each partition's faults (where committed data may be lost) and the HW its drain read
    to, and when each node's data was destroyed. An unreadable file is named in
    ``errors`` and its invariants are not checked; observations whose last line was cut
    are checked up to it, that line named in ``errors``. Anything in ``errors`` leaves
    ``valid`` at most unknown.
    """
    if not files.present:
        return None
    topic = spec.topic.name
    mine = {p: part for (t, p), part in facts.partitions.items() if t == topic}
    loss_permitted = {p for p, part in mine.items()
                      if committed_loss_reason(facts.config, part.faults) is not None}
    metadata, observations, replicas = files.metadata, files.observations, files.replicas
    errors = list(files.errors)
    changes = leader_changes(metadata, topic) if metadata is not None else []
    done: dict[str, Invariant] = {}
    if metadata is not None:
        done["leader-from-isr-or-elr"] = check_elections(changes, facts.config)
    if observations is not None:
        done["hw-le-leo"] = check_hw_le_leo(observations, topic, facts.data_loss_since, loss_permitted)
        done["hw-monotonic"] = check_hw_monotonic(observations, topic, loss_permitted)
    if replicas is not None:
        done["replicas-agree-below-hw"] = check_replicas_agree(
            replicas, topic, {p: part.high_watermark for p, part in mine.items()}, loss_permitted,
            final_isr(metadata, topic) if metadata is not None else None)
    invariants = [done.get(name) or Invariant(name) for name in INVARIANTS]
    valid: Valid = merge_valid(*(not i.violations for i in invariants), *([UNKNOWN] if errors else []))
    return {"valid": valid, "topic": topic, "invariants": [i.to_json() for i in invariants],
            "leader_changes": changes, "errors": errors,
            "summary": "; ".join(i.summary() for i in invariants if i.source is not None)}


def verdict_line(white: Mapping[str, Any]) -> str:
    """``results.json``'s ``white_box`` in a few words: ``held``, ``VIOLATED`` or
    ``unknown``, then its summary in parentheses when it has one."""
    valid = white.get("valid")
    word = "held" if valid is True else "VIOLATED" if valid is False else "unknown"
    return word + (f" ({white['summary']})" if white.get("summary") else "")
