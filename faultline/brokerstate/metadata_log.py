"""The KRaft metadata log, decoded into ``metadata.jsonl`` (docs/history.md): a timeline of
leader, ISR, ELR and epoch changes, broker registrations and fencing.

Decoding is Kafka's own: ``DumpLogSegments --cluster-metadata-decoder`` (Kafka 4.3 moved
the tool from ``kafka.tools`` in the server jar to ``org.apache.kafka.tools`` in the
``kafka-tools`` jar; see :func:`~faultline.cluster.kafka_dist.dump_log_segments`)
prints each record as ``| offset: N CreateTime: MS ... payload: {"type": ..., "data": ...}``
(control records as ``LeaderChange: {...}``, ``KRaftVoters: {...}``, ...). This module
parses that text (:func:`parse_dump`, pure) and turns the records into timeline lines
(:func:`timeline`, pure), one per record, in log order::

    {"offset": 63, "time": 9650000000, "type": "partition-change", "topic": "fl-queue",
     "partition": 0, "leader": 1, "isr": [1, 2], "elr": [], "last_known_elr": [],
     "leader_epoch": 1, "leader_recovery_state": 0, "raw": {...the record's data...}}

``time`` is ns since the run started (the record's CreateTime, wall ms, minus the run's
``start_wall_ms``; negative before the run). ``type`` is the record type in kebab case
without ``-record`` (``partition``, ``partition-change``, ``register-broker``,
``broker-registration-change``, ``topic``, ``leader-change``, ...; unknown types kept
as they come). Partition lines carry the *effective* state after the record: a
PartitionChangeRecord field that is absent (or ``leader`` -2) means "unchanged" and is
filled from the state before, exactly as Kafka's ``PartitionRegistration.merge`` does
(the leader epoch goes up by one whenever ``leader`` is set, -1 included); ``raw`` keeps
what the record itself said. Broker lines carry ``broker``; fencing lines (a
``broker-registration-change``, or the older ``fence-broker`` / ``unfence-broker``) also
``fenced``: true (fenced), false (unfenced), or null (no change).

The log is read from the active controller's ``__cluster_metadata-0`` (every node of a
local cluster is broker and controller), whose log holds only what the quorum
committed or is about to.
"""

from __future__ import annotations

import logging
import re
import subprocess
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from faultline.cluster import kafka_config, kafka_dist
from faultline.errors import ClusterError
from faultline.rundir import write_jsonl

_log = logging.getLogger(__name__)

METADATA_PARTITION = "__cluster_metadata-0"
#: PartitionChangeRecord.leader: -2 (the default, also when absent) leaves the leader as
#: it was; -1 means no leader (PartitionChangeRecord.json).
NO_LEADER_CHANGE = -2
NO_LEADER = -1
#: How long DumpLogSegments may take on the metadata log.
DUMP_TIMEOUT_S = 120.0

_RECORD = re.compile(r"^\| offset: (\d+) CreateTime: (-?\d+) .*? (payload|[A-Za-z]+): (\{.*\})\s*$")


@dataclass(frozen=True, slots=True)
class RawRecord:
    """One record of the metadata log as DumpLogSegments printed it."""

    offset: int
    create_time_ms: int
    type: str
    version: int | None
    data: Mapping[str, Any]


def parse_dump(text: str) -> Iterator[RawRecord]:
    """The records of DumpLogSegments ``--cluster-metadata-decoder`` output, in order.

    Lines that are not records (file headers, batch headers) are skipped; a record line
    whose JSON does not parse raises ValueError naming the offset.
    """
    for line in text.splitlines():
        m = _RECORD.match(line)
        if m is None:
            continue
        offset, ctime, kind, body = int(m[1]), int(m[2]), m[3], m[4]
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError as e:
            raise ValueError(f"metadata record at offset {offset}: not valid JSON ({e})") from None
        if kind == "payload" and isinstance(obj, dict) and isinstance(obj.get("data"), dict):
            yield RawRecord(offset, ctime, _kebab(str(obj.get("type", "unknown"))),
                            obj.get("version") if isinstance(obj.get("version"), int) else None,
                            obj["data"])
        elif isinstance(obj, dict):  # a control record: LeaderChange, KRaftVoters, ...
            version = obj.get("version")
            yield RawRecord(offset, ctime, _kebab(kind), version if isinstance(version, int) else None,
                            {k: v for k, v in obj.items() if k != "version"})


def _kebab(name: str) -> str:
    """``PARTITION_CHANGE_RECORD`` -> ``partition-change``; ``LeaderChange`` -> ``leader-change``."""
    if "_" in name or name.isupper():
        words = name.lower().split("_")
    else:
        words = [w.lower() for w in re.findall(r"[A-Z]+(?=[A-Z][a-z]|\b)|[A-Z]?[a-z0-9]+|[A-Z]+", name)]
    if len(words) > 1 and words[-1] == "record":
        words = words[:-1]
    return "-".join(words)


@dataclass(slots=True)
class _Partition:
    leader: int
    isr: list[int]
    elr: list[int]
    last_known_elr: list[int]
    replicas: list[int]
    leader_epoch: int
    recovery: int


def timeline(records: Iterable[RawRecord], start_wall_ms: int) -> Iterator[dict[str, Any]]:
    """metadata.jsonl lines for ``records`` (see the module docstring), in log order.

    A PartitionChangeRecord for a partition never created in the log read (its
    PartitionRecord was compacted into a snapshot) starts from an unknown state: fields
    it does not set are null, and its epoch is null until a PartitionRecord is seen.
    """
    names: dict[str, str] = {}
    parts: dict[tuple[str, int], _Partition] = {}
    for r in records:
        d = r.data
        line: dict[str, Any] = {"offset": r.offset, "time": (r.create_time_ms - start_wall_ms) * 1_000_000,
                                "type": r.type}
        if r.type == "topic":
            names[str(d.get("topicId"))] = str(d.get("name"))
            line["topic"] = str(d.get("name"))
        elif r.type in ("partition", "partition-change"):
            topic = names.get(str(d.get("topicId")), str(d.get("topicId")))
            pid = int(d.get("partitionId", -1))
            state = _apply(parts.get((topic, pid)), r.type, d)
            if state is not None:
                parts[(topic, pid)] = state
            line.update(_partition_fields(topic, pid, state))
        elif r.type == "remove-topic":
            topic = names.get(str(d.get("topicId")), str(d.get("topicId")))
            line["topic"] = topic
            for key in [k for k in parts if k[0] == topic]:
                del parts[key]
        elif r.type == "clear-elr":
            for key, st in parts.items():
                if not d.get("topicName") or d.get("topicName") == key[0]:
                    st.elr, st.last_known_elr = [], []
        if "brokerId" in d:
            line["broker"] = int(d["brokerId"])
        elif r.type in ("fence-broker", "unfence-broker") and "id" in d:
            line["broker"] = int(d["id"])
        if r.type == "broker-registration-change":
            line["fenced"] = {1: True, -1: False}.get(int(d.get("fenced", 0)))
        elif r.type in ("fence-broker", "unfence-broker"):
            line["fenced"] = r.type == "fence-broker"
        line["raw"] = dict(d)
        yield line


def _apply(before: _Partition | None, kind: str, d: Mapping[str, Any]) -> _Partition | None:
    """The partition's state after a PartitionRecord or PartitionChangeRecord."""
    if kind == "partition":
        return _Partition(int(d.get("leader", NO_LEADER)), _ints(d.get("isr")),
                          _ints(d.get("eligibleLeaderReplicas")), _ints(d.get("lastKnownElr")),
                          _ints(d.get("replicas")),
                          int(d.get("leaderEpoch", 0)), int(d.get("leaderRecoveryState", 0)))
    if before is None:
        return None
    after = _Partition(before.leader, before.isr, before.elr, before.last_known_elr, before.replicas,
                       before.leader_epoch, before.recovery)
    leader = int(d.get("leader", NO_LEADER_CHANGE))
    if leader != NO_LEADER_CHANGE:
        after.leader, after.leader_epoch = leader, before.leader_epoch + 1
    for key, attr in (("isr", "isr"), ("eligibleLeaderReplicas", "elr"), ("lastKnownElr", "last_known_elr"),
                      ("replicas", "replicas")):
        if d.get(key) is not None:
            setattr(after, attr, _ints(d[key]))
    if int(d.get("leaderRecoveryState", -1)) != -1:
        after.recovery = int(d["leaderRecoveryState"])
    return after


def _partition_fields(topic: str, pid: int, st: _Partition | None) -> dict[str, Any]:
    if st is None:
        return {"topic": topic, "partition": pid, "leader": None, "isr": None, "elr": None,
                "last_known_elr": None, "replicas": None, "leader_epoch": None, "leader_recovery_state": None}
    return {"topic": topic, "partition": pid, "leader": st.leader if st.leader >= 0 else None,
            "isr": st.isr, "elr": st.elr, "last_known_elr": st.last_known_elr, "replicas": st.replicas,
            "leader_epoch": st.leader_epoch, "leader_recovery_state": st.recovery}


def _ints(x: Any) -> list[int]:
    return [int(i) for i in x] if isinstance(x, list) else []


def segments(metadata_dir: Path) -> list[Path]:
    """The ``.log`` segments of ``metadata_dir/__cluster_metadata-0``, oldest first."""
    return sorted((metadata_dir / METADATA_PARTITION).glob("*.log"))


def dump(dist: kafka_dist.KafkaDist, files: Sequence[Path], timeout: float = DUMP_TIMEOUT_S) -> str:
    """DumpLogSegments ``--cluster-metadata-decoder`` over ``files``: its standard output.

    Raises ClusterError when the tool fails (the message has the tail of its output)
    and SetupError when the tools jar cannot be had.
    """
    classpath, main_class = kafka_dist.dump_log_segments(dist)
    cmd = [str(dist.java), *kafka_config.tool_options(), *kafka_dist.cds_options(dist),
           "-cp", classpath, main_class,
           "--cluster-metadata-decoder", "--files", ",".join(str(f) for f in files)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=timeout)
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise ClusterError(f"DumpLogSegments failed on {files[0].parent}: {tail}")
    return done.stdout


def decode_metadata(dist: kafka_dist.KafkaDist, metadata_dir: Path, out: Path,
                    start_wall_ms: int) -> tuple[int, float]:
    """Decode ``metadata_dir``'s metadata log into ``out`` (metadata.jsonl).

    Returns (lines written, seconds the decode took). Errors as :func:`dump`; a log
    with no segments is a ClusterError.
    """
    started = time.monotonic()
    files = segments(metadata_dir)
    if not files:
        raise ClusterError(f"no metadata log segments in {metadata_dir / METADATA_PARTITION}")
    n = write_jsonl(out, timeline(parse_dump(dump(dist, files)), start_wall_ms))
    return n, time.monotonic() - started
