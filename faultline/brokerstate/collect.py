"""Collect the brokers' own state after a run, for the white-box checks: the decoded
KRaft metadata log (``metadata.jsonl``, :mod:`~faultline.brokerstate.metadata_log`), each
replica's batches of the test topic (``replicas.jsonl``,
:mod:`~faultline.brokerstate.replica_logs`), and what the cluster was (``cluster.json``,
:func:`cluster_facts`): its Kafka version, the feature levels its metadata log
finalized, and so whether it ran with eligible leader replicas (KIP-966).

:func:`collect_broker_state` is what the runner calls after the drain, while the
cluster is still up: the logs are read where the brokers keep them, nothing is asked
of the brokers, and nothing changes the cluster's logical state.
"""

from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import orjson

from faultline.brokerstate import metadata_log
from faultline.brokerstate.replica_logs import replica_summary
from faultline.cluster import kafka_dist
from faultline.cluster.protocol import Cluster, Node
from faultline.errors import FaultlineError
from faultline.rundir import CLUSTER_FILE, METADATA_FILE, REPLICAS_FILE, read_jsonl, write_atomic, write_jsonl
from faultline.spec import TestSpec

_log = logging.getLogger(__name__)

#: The KRaft feature that turns eligible leader replicas on (level 1): finalized on new
#: clusters from Kafka 4.1; on 4.0 only when set at format or upgrade; absent before.
ELR_FEATURE = "eligible.leader.replicas.version"
#: The feature whose level is the cluster's transaction protocol (KIP-890: 2 closes KAFKA-17754).
TXN_FEATURE = "transaction.version"


@runtime_checkable
class MetadataNode(Node, Protocol):
    """A node whose metadata log directory (``metadata.log.dir``) is readable here."""

    @property
    def metadata_dir(self) -> Path: ...


def collect_broker_state(cluster: Cluster, spec: TestSpec, run_dir: Path) -> list[str]:
    """Write ``run_dir/metadata.jsonl``, ``run_dir/replicas.jsonl`` and
    ``run_dir/cluster.json``; never raises.

    Contract: reads files of the running nodes only (never changes the cluster's
    logical state); a part that fails is logged, left unwritten and named in the
    returned list of errors, and the other part still runs. What was written, and how
    long it took, goes to the log. The metadata log is read from the active
    controller's copy (else the largest); a backend that gave no access to it would
    have none, which is no error (both backends give it: docker's nodes are bind-mounted).

    ``cluster.json`` also says which of the metadata log and the replicas' logs could
    not be collected (``broker_state_errors``), and is written first saying the
    collection did not finish: a run that dies in it, or whose collection failed, is
    not read as one that never had that state (the check makes it unknown).
    """
    errors: list[str] = []
    run_dir = Path(run_dir)
    tool: str | None = None
    try:
        mark_uncollected(spec, run_dir, "the collection did not finish")
    except (FaultlineError, OSError) as e:  # the last write says what was collected
        _log.warning("writing %s failed: %s", CLUSTER_FILE, e)
    try:
        node = _metadata_node(cluster)
        if node is None:
            _log.info("this cluster backend gives no access to the nodes' metadata logs")
        else:
            dist = kafka_dist.ensure_kafka(spec.kafka.version, spec.kafka.home)
            tool = kafka_dist.dump_log_segments(dist)[1]
            lines, took = metadata_log.decode_metadata(dist, node.metadata_dir, run_dir / METADATA_FILE,
                                                       spec.start_wall_ms)
            _log.info("decoded the metadata log of node %d: %d records in %.2f s", node.id, lines, took)
    except (FaultlineError, OSError, ValueError, subprocess.SubprocessError) as e:
        errors.append(f"metadata log: {e}")
        _log.warning("decoding the metadata log failed: %s", e)
    try:
        started = time.monotonic()
        summaries = [{**summary, "node": n.id}
                     for p in range(spec.topic.partitions) for n in cluster.nodes
                     if (summary := replica_summary(n.data_dir, spec.topic.name, p)) is not None]
        write_jsonl(run_dir / REPLICAS_FILE, summaries)
        _log.info("summarized %d replica logs (%d batches) in %.2f s", len(summaries),
                  sum(len(x["batches"]) for x in summaries), time.monotonic() - started)
    except (FaultlineError, OSError, ValueError) as e:
        errors.append(f"replica logs: {e}")
        _log.warning("summarizing the replica logs failed: %s", e)
    try:
        metadata = read_jsonl(run_dir / METADATA_FILE) if (run_dir / METADATA_FILE).exists() else []
        _write_facts(run_dir, cluster_facts(spec.kafka.version, tool, metadata), errors)
    except (FaultlineError, OSError) as e:
        errors.append(f"cluster facts: {e}")
        _log.warning("writing %s failed: %s", CLUSTER_FILE, e)
    return errors


def mark_uncollected(spec: TestSpec, run_dir: Path, why: str) -> None:
    """Write ``cluster.json`` saying the broker state is not collected, and ``why``, for
    :func:`collect_broker_state` to overwrite: a run that ends before (Ctrl-C, a kill, an
    error) is then checked ``unknown``, not as a run without broker state. FaultlineError
    when the file cannot be written."""
    _write_facts(run_dir, cluster_facts(spec.kafka.version, None, []), [why])


def _write_facts(run_dir: Path, facts: dict[str, Any], errors: list[str]) -> None:
    data = {**facts, "broker_state_errors": list(errors)}
    write_atomic(run_dir / CLUSTER_FILE, orjson.dumps(data, option=orjson.OPT_INDENT_2))


def cluster_facts(version: str, dump_tool: str | None,
                  metadata: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """``cluster.json`` (docs/history.md): the Kafka version, the class that decoded the
    metadata log, every feature level the metadata log finalized (the last record of
    each name wins), and ``eligible_leader_replicas``: true when :data:`ELR_FEATURE` is at
    level 1 or more, false when the log finalized features but not that one, null when
    it showed no feature at all (not decoded, or compacted into a snapshot); and
    ``transaction_version``, the level of :data:`TXN_FEATURE` (0 when the log finalized
    features but not that one, null when it showed none)."""
    features: dict[str, int] = {}
    for line in metadata:
        raw = line.get("raw")
        if line.get("type") == "feature-level" and isinstance(raw, Mapping):
            features[str(raw.get("name"))] = int(raw.get("featureLevel", 0))
    elr = features.get(ELR_FEATURE, 0) >= 1 if features else None
    return {"kafka_version": version, "dump_log_segments": dump_tool, "features": features,
            "eligible_leader_replicas": elr,
            "transaction_version": features.get(TXN_FEATURE, 0) if features else None}


def _metadata_node(cluster: Cluster) -> MetadataNode | None:
    """The active controller if its metadata log is readable, else the node with the
    most metadata log bytes (a lagging voter only misses the tail); None when the
    backend gives no access to any."""
    nodes = [n for n in cluster.nodes if isinstance(n, MetadataNode)]
    if not nodes:
        return None
    try:
        active = cluster.active_controller()
    except FaultlineError:
        active = None
    for n in nodes:
        if n.id == active and metadata_log.segments(n.metadata_dir):
            return n
    return max(nodes, key=lambda n: sum(f.stat().st_size for f in metadata_log.segments(n.metadata_dir)))
