"""The group workload with the Java client under test (``workload.client: java``): the
Java client's producers (:mod:`.java_client`), and members (``java/GroupConsumer.java``)
that keep :class:`.group.GroupConsumer`'s contract and journal its ops, with its
settings: the group, its protocol, (classic) session timeouts and (``consumer.static``)
each slot's ``group.instance.id`` of :func:`.group.group_config`,
:data:`.group.COMMIT_INTERVAL_S`, :data:`.group.SETTLE_S` and the commit errors
:data:`REFUSED`; a poll that threw an error of :data:`FATAL` is journaled under
librdkafka's name for it. ``consumer.commit`` ``auto`` is not run: the Java client reports
no auto commit's outcome (docs/history.md, "commit"). In a test that crashes or pauses
clients each member runs in a JVM of its own (:class:`CrashableJavaGroupWorkload`), as
each producer does (:mod:`.java_crashable`).
"""

from __future__ import annotations

from typing import Any

from faultline.history import PendingOp, TimedOp
from faultline.workloads.group import COMMIT_INTERVAL_S, SETTLE_S, group_config, held_after
from faultline.workloads.group import REFUSED as RDKAFKA_REFUSED
from faultline.workloads.java_client import JavaProgram, JavaQueueWorkload
from faultline.workloads.java_crashable import CrashableJavaQueueWorkload
from faultline.workloads.outcomes import CRASH_ERROR

#: Commit errors by which the coordinator refused a commit (``fail``): librdkafka's names,
#: which the Java client's API exceptions carry too, and its CommitFailedException, thrown
#: for a member the coordinator fenced or is rebalancing (the error not named).
REFUSED = RDKAFKA_REFUSED | {"_CommitFailedException"}
#: The Java client's errors of a poll that leave its member done for good -> librdkafka's
#: name for such an error (``_FATAL``), under which the poll is journaled: a static member
#: fenced by another that joined with its ``group.instance.id`` (FencedInstanceIdException).
FATAL = {"FENCED_INSTANCE_ID": "_FATAL"}
#: The member's consumer properties taken from :func:`.group.group_config` (the Java
#: client's names are librdkafka's for these).
_PROPERTIES = ("group.id", "group.protocol", "session.timeout.ms", "heartbeat.interval.ms")


class JavaGroupWorkload(JavaQueueWorkload):
    """:class:`JavaQueueWorkload` with group members for consumers; its stop waits also
    for the members' settling, as :class:`.group.GroupWorkload`'s."""

    def _args(self) -> list[str]:
        s = self.spec
        member = group_config(s, self.bootstrap, "", 0)
        settings = {"workload": "group", "commit": s.consumer.commit,
                    "commit_interval_ms": round(COMMIT_INTERVAL_S * 1000),
                    "settle_ms": round(SETTLE_S * 1000),
                    "refused": ",".join(sorted(REFUSED)),
                    **{f"consumer.{k}": member[k] for k in _PROPERTIES if k in member}}
        if s.consumer.static:
            settings["instance_ids"] = ",".join(s.instance_id(slot) for slot in range(s.workload.consumers))
        return [*super()._args(), *(f"{k}={v}" for k, v in settings.items())]

    def _op(self, d: dict[str, Any], read_ns: int, program: JavaProgram) -> TimedOp | None:
        """As :class:`JavaQueueWorkload`'s, a poll's error of :data:`FATAL` renamed."""
        if d["f"] == "poll" and d.get("error") in FATAL:
            d["error"] = FATAL[d["error"]]
        return super()._op(d, read_ns, program)


class CrashableJavaGroupWorkload(CrashableJavaQueueWorkload, JavaGroupWorkload):
    """The Java client's group workload with a JVM per producer and per member
    (:mod:`.java_crashable`), each of which crashes, pauses and (a member) leaves alone;
    the same contract. A member has one op open at a time (a ``poll``, a ``commit``, or a
    rebalance's, printed with its end); its crash ends it ``info`` with
    :data:`.outcomes.CRASH_ERROR`, as :mod:`.group_crashable`'s."""

    member_jvms = True

    def _op(self, d: dict[str, Any], read_ns: int, program: JavaProgram) -> TimedOp | None:
        """As :class:`JavaGroupWorkload`'s, each member's open op kept for a crash
        (:attr:`JavaProgram.member_ops`; sends and transactions are kept as producers') and
        the partitions it holds (:attr:`JavaProgram.held`)."""
        op = super()._op(d, read_ns, program)
        if op is None:
            return None
        _, (process, typ, f, value, _) = op
        if f in ("send", "txn"):
            return op
        program.held = held_after(program.held, typ, f, value)
        if typ == "invoke":
            program.member_ops[process] = (f, value)
        else:
            program.member_ops.pop(process, None)
        return op

    def _crashed_ops(self, program: JavaProgram) -> list[PendingOp]:
        ops = super()._crashed_ops(program)
        ops += [(process, "info", f, value, CRASH_ERROR)
                for process, (f, value) in program.member_ops.items()]
        program.member_ops.clear()
        return ops
