"""The group workload's group as the run left it, for the group checker: its committed
offsets with their leader epochs, asked of its coordinator (OffsetFetch, the admin API),
and the replicas of the ``__consumer_offsets`` partition that holds them, summarized as
``replicas.jsonl`` summarizes the test topic's (:func:`replica_summary`), each with the
group's commit records in its log (:func:`offset_commits`), into
``group.json`` (docs/history.md).

:func:`collect_group_state` is what the runner calls after the broker state, while the
cluster is still up; it asks the coordinator, and changes nothing.
"""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import KafkaException

from faultline.brokerstate.offset_commits import offset_commits
from faultline.brokerstate.replica_logs import replica_summary
from faultline.cluster import kafka_client
from faultline.cluster.admin_child import AdminChild
from faultline.cluster.protocol import Cluster
from faultline.errors import FaultlineError
from faultline.rundir import GROUP_FILE, write_atomic
from faultline.spec import TestSpec
from faultline.targeted import OFFSETS_TOPIC, coordinator_partition

_log = logging.getLogger(__name__)

#: Seconds the coordinator gets to answer the OffsetFetch.
FETCH_TIMEOUT_S = 10.0
_OFFSETS_DIR = re.compile(rf"^{OFFSETS_TOPIC}-(\d+)$")


def collect_group_state(cluster: Cluster, spec: TestSpec, run_dir: Path) -> list[str]:
    """Write ``run_dir/group.json`` for the run's group (:attr:`TestSpec.group_id`); never
    raises. A part that could not be read is null in the file, and why is in its
    ``errors`` (and the returned list); the other part is still written."""
    started = time.monotonic()
    group = spec.group_id
    errors: list[str] = []
    offsets: list[dict[str, Any]] | None = None
    try:
        with AdminChild(cluster.bootstrap_servers(), FETCH_TIMEOUT_S) as admin:
            answer = admin.call(kafka_client.committed_positions, group, FETCH_TIMEOUT_S)
        offsets = [{"topic": t, "partition": p, "offset": c.offset, "leader_epoch": c.leader_epoch}
                   for (t, p), c in sorted(answer.items())]
    except (KafkaException, TimeoutError, FaultlineError) as e:
        errors.append(f"committed offsets: no answer from the coordinator of {group}: {e}")
    partition: int | None = None
    replicas: list[dict[str, Any]] | None = None
    try:
        count = offsets_partitions(cluster)
        if count == 0:
            errors.append(f"offsets replicas: no node holds a {OFFSETS_TOPIC} partition")
        else:
            partition = coordinator_partition(group, count)
            replicas = [{**summary, "node": n.id,
                         "commits": offset_commits(n.data_dir / f"{OFFSETS_TOPIC}-{partition}", group)}
                        for n in cluster.nodes
                        if (summary := replica_summary(n.data_dir, OFFSETS_TOPIC, partition)) is not None]
    except (OSError, ValueError) as e:
        errors.append(f"offsets replicas: {e}")
    data = {"group": group, "offsets": offsets, "offsets_topic_partition": partition,
            "offsets_replicas": replicas, "errors": errors}
    try:
        write_atomic(run_dir / GROUP_FILE, orjson.dumps(data, option=orjson.OPT_INDENT_2))
    except (FaultlineError, OSError) as e:
        errors.append(f"{GROUP_FILE}: {e}")
    for why in errors:
        _log.warning("group state: %s", why)
    _log.info("collected the state of group %s (%d offsets, %d offsets replicas) in %.2f s", group,
              len(offsets or ()), len(replicas or ()), time.monotonic() - started)
    return errors


def offsets_partitions(cluster: Cluster) -> int:
    """How many partitions ``__consumer_offsets`` has, by the highest one any node's data
    directory holds (Kafka creates them all at once); 0: none."""
    found = [int(m.group(1)) for n in cluster.nodes if n.data_dir.is_dir()
             for d in n.data_dir.iterdir() if (m := _OFFSETS_DIR.match(d.name))]
    return max(found) + 1 if found else 0
