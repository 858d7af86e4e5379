"""Collect the brokers' own state after a run, for the white-box checks: the decoded
KRaft metadata log (``metadata.jsonl``, :mod:`~faultline.harness.metadata_log`) and each
replica's batches of the test topic (``replicas.jsonl``,
:mod:`~faultline.harness.replica_logs`).

:func:`collect_broker_state` is what the runner calls after the drain, while the
cluster is still up: the logs are read where the brokers keep them, nothing is asked
of the brokers, and nothing changes the cluster's logical state.
"""

from __future__ import annotations

import logging
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from faultline.checkers.whitebox import METADATA_FILE, REPLICAS_FILE
from faultline.errors import FaultlineError
from faultline.harness import kafka_dist, metadata_log
from faultline.harness.cluster import Cluster, Node
from faultline.harness.replica_logs import replica_summary
from faultline.spec import TestSpec

_log = logging.getLogger(__name__)



@runtime_checkable
class MetadataNode(Node, Protocol):
    """A node whose metadata log directory (``metadata.log.dir``) is readable here."""

    @property
    def metadata_dir(self) -> Path: ...


@dataclass(slots=True)
class BrokerState:
    """What :func:`collect_broker_state` wrote, and how long each part took."""

    metadata_lines: int | None = None
    metadata_node: int | None = None
    metadata_s: float | None = None
    replica_lines: int | None = None
    replica_batches: int = 0
    replicas_s: float | None = None
    errors: list[str] = field(default_factory=list)


def collect_broker_state(cluster: Cluster, spec: TestSpec, run_dir: Path) -> BrokerState:
    """Write ``run_dir/metadata.jsonl`` and ``run_dir/replicas.jsonl``; never raises.

    Contract: reads files of the running nodes only (never changes the cluster's
    logical state); a part that fails is logged, left unwritten and named in
    ``errors`` of the returned :class:`BrokerState`, and the other part still runs.
    The metadata log is read from the active controller's copy (else the largest).
    """
    state = BrokerState()
    run_dir = Path(run_dir)
    try:
        node = _metadata_node(cluster)
        dist = kafka_dist.ensure_kafka(spec.kafka.version, spec.kafka.home)
        state.metadata_node = node.id
        state.metadata_lines, state.metadata_s = metadata_log.decode_metadata(
            dist, node.metadata_dir, run_dir / METADATA_FILE, spec.start_wall_ms)
        _log.info("decoded the metadata log of node %d: %d records in %.2f s",
                  node.id, state.metadata_lines, state.metadata_s)
    except (FaultlineError, OSError, ValueError, subprocess.SubprocessError) as e:
        state.errors.append(f"metadata log: {e}")
        _log.warning("decoding the metadata log failed: %s", e)
    try:
        started = time.monotonic()
        lines = []
        for p in range(spec.topic.partitions):
            for n in cluster.nodes:
                summary = replica_summary(n.data_dir, spec.topic.name, p)
                if summary is not None:
                    lines.append({**summary, "node": n.id})
                    state.replica_batches += len(summary["batches"])
        state.replica_lines = metadata_log.write_jsonl(run_dir / REPLICAS_FILE, lines)
        state.replicas_s = time.monotonic() - started
        _log.info("summarized %d replica logs (%d batches) in %.2f s",
                  state.replica_lines, state.replica_batches, state.replicas_s)
    except (OSError, ValueError) as e:
        state.errors.append(f"replica logs: {e}")
        _log.warning("summarizing the replica logs failed: %s", e)
    return state


def _metadata_node(cluster: Cluster) -> MetadataNode:
    """The active controller if its metadata log is readable, else the node with the
    most metadata log bytes (a lagging voter only misses the tail)."""
    nodes = [n for n in cluster.nodes if isinstance(n, MetadataNode)]
    if not nodes:
        raise FaultlineError("this cluster backend gives no access to the nodes' metadata logs")
    try:
        active = cluster.active_controller()
    except FaultlineError:
        active = None
    for n in nodes:
        if n.id == active and metadata_log.segments(n.metadata_dir):
            return n
    return max(nodes, key=lambda n: sum(f.stat().st_size for f in metadata_log.segments(n.metadata_dir)))
