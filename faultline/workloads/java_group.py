"""The group workload with the Java client under test (``workload.client: java``): the
Java client's producers (:mod:`.java_client`), and members (``java/GroupConsumer.java``)
that keep :class:`.group.GroupConsumer`'s contract and journal its ops, with its
settings: the group, its protocol and (classic) session timeouts of
:func:`.group.group_config`, :data:`.group.COMMIT_INTERVAL_S`, :data:`.group.SETTLE_S`
and the commit errors :data:`REFUSED`. ``consumer.commit`` ``auto`` is not run: the Java
client reports no auto commit's outcome (docs/history.md, "commit")."""

from __future__ import annotations

from faultline.workloads.group import COMMIT_INTERVAL_S, SETTLE_S, group_config
from faultline.workloads.group import REFUSED as RDKAFKA_REFUSED
from faultline.workloads.java_client import JavaQueueWorkload

#: Commit errors by which the coordinator refused a commit (``fail``): librdkafka's names,
#: which the Java client's API exceptions carry too, and its CommitFailedException, thrown
#: for a member the coordinator fenced or is rebalancing (the error not named).
REFUSED = RDKAFKA_REFUSED | {"_CommitFailedException"}
#: The member's consumer properties taken from :func:`.group.group_config` (the Java
#: client's names are librdkafka's for these).
_PROPERTIES = ("group.id", "group.protocol", "session.timeout.ms", "heartbeat.interval.ms")


class JavaGroupWorkload(JavaQueueWorkload):
    """:class:`JavaQueueWorkload` with group members for consumers; its stop waits also
    for the members' settling, as :class:`.group.GroupWorkload`'s."""

    def _args(self) -> list[str]:
        member = group_config(self.spec, self.bootstrap, "", 0)
        settings = {"workload": "group", "commit": self.spec.consumer.commit,
                    "commit_interval_ms": round(COMMIT_INTERVAL_S * 1000),
                    "settle_ms": round(SETTLE_S * 1000),
                    "refused": ",".join(sorted(REFUSED)),
                    **{f"consumer.{k}": member[k] for k in _PROPERTIES if k in member}}
        return [*super()._args(), *(f"{k}={v}" for k, v in settings.items())]
