"""Collect the brokers' own state after a run, for the white-box checks: the decoded
KRaft metadata log (``metadata.jsonl``, :mod:`~faultline.brokerstate.metadata_log`) and each
replica's batches of the test topic (``replicas.jsonl``,
:mod:`~faultline.brokerstate.replica_logs`).

:func:`collect_broker_state` is what the runner calls after the drain, while the
cluster is still up: the logs are read where the brokers keep them, nothing is asked
of the brokers, and nothing changes the cluster's logical state.
"""

from __future__ import annotations

import logging
import subprocess
import time
from pathlib import Path
from typing import Protocol, runtime_checkable

from faultline.brokerstate import metadata_log
from faultline.brokerstate.replica_logs import replica_summary
from faultline.cluster import kafka_dist
from faultline.cluster.protocol import Cluster, Node
from faultline.errors import FaultlineError
from faultline.rundir import METADATA_FILE, REPLICAS_FILE, write_jsonl
from faultline.spec import TestSpec

_log = logging.getLogger(__name__)



@runtime_checkable
class MetadataNode(Node, Protocol):
    """A node whose metadata log directory (``metadata.log.dir``) is readable here."""

    @property
    def metadata_dir(self) -> Path: ...


def collect_broker_state(cluster: Cluster, spec: TestSpec, run_dir: Path) -> list[str]:
    """Write ``run_dir/metadata.jsonl`` and ``run_dir/replicas.jsonl``; never raises.

    Contract: reads files of the running nodes only (never changes the cluster's
    logical state); a part that fails is logged, left unwritten and named in the
    returned list of errors, and the other part still runs. What was written, and how
    long it took, goes to the log. The metadata log is read from the active
    controller's copy (else the largest).
    """
    errors: list[str] = []
    run_dir = Path(run_dir)
    try:
        node = _metadata_node(cluster)
        dist = kafka_dist.ensure_kafka(spec.kafka.version, spec.kafka.home)
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
    except (OSError, ValueError) as e:
        errors.append(f"replica logs: {e}")
        _log.warning("summarizing the replica logs failed: %s", e)
    return errors


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
