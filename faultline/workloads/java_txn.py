"""The txn workload with the Java client under test (``workload.client: java``): the Java
client's program (:mod:`.java_client`) with ``workload=txn``, whose producers are
transactional (``java/TxnProducer.java``) and journal the ``txn`` ops :mod:`.txn` journals
for librdkafka (docs/history.md, "txn"); its consumers and the drain are the queue's.
kafka-clients 4.x speaks transaction protocol version 2 (KIP-890) where the cluster's
``transaction.version`` is 2, which librdkafka does not
(:data:`~faultline.checkers.guarantees.CLIENT_TRANSACTION_VERSION`). In a test that crashes
or pauses clients each transactional producer runs in a JVM of its own
(:class:`CrashableJavaTxnWorkload`): a crash ends its open transaction ``info``, and its
replacement, under the same ``transactional.id``, fences it. With ``transactions.reads``
each producer is a read-process-write processor in the group :attr:`~faultline.spec.TestSpec.rpw_group_id`,
as :mod:`.rpw`'s.
"""

from __future__ import annotations

from typing import Any

from faultline.history import TimedOp
from faultline.workloads.java_client import JavaProgram, JavaQueueWorkload
from faultline.workloads.java_crashable import CrashableJavaQueueWorkload
from faultline.workloads.txn import transaction_timeout_ms


class JavaTxnWorkload(JavaQueueWorkload):
    """The txn workload's clients in one JVM; the contract of :class:`JavaQueueWorkload`,
    its stats counting transactions (as :class:`~faultline.workloads.txn.TxnWorkload`'s)."""

    def _args(self) -> list[str]:
        s, x = self.spec, self.spec.transactions
        settings = {
            "workload": "txn",
            "transactional_ids": ",".join(s.transactional_id(i) for i in range(s.workload.producers)),
            "sends": x.sends, "abort_probability": x.abort_probability, "seed": s.seed,
            "transaction_timeout_ms": transaction_timeout_ms(s),
            "reads": x.reads, "rpw_group": s.rpw_group_id, "gap_ms": x.gap_ms,
        }
        return [*super()._args(), *(f"{k}={v}" for k, v in settings.items())]

    def _op(self, d: dict[str, Any], read_ns: int, program: JavaProgram) -> TimedOp | None:
        """The op of a printed line, as :class:`JavaQueueWorkload`'s, a transaction's
        ``committing`` (printed as the program's ``ns``) put on the history's clock, each
        open one in ``program.txns``, each committed one counted in ``program.commits``."""
        op = super()._op(d, read_ns, program)
        if op is not None and op[1][2] == "txn":
            s, (ns, (process, typ, _, value, _)) = program.stats, op
            if "committing" in value:
                value["committing"] = self.history.clock(value["committing"])
            if typ == "invoke":
                s.invoked += 1
                program.txns[process] = value, self.history.clock(ns)
            else:
                program.txns.pop(process, None)
                s.ended(typ)
                if typ == "ok":
                    program.commits += 1
            if typ == "info":  # its producer is retired
                s.retired += 1
        return op


class CrashableJavaTxnWorkload(CrashableJavaQueueWorkload, JavaTxnWorkload):
    """The Java client's txn workload with a JVM per transactional producer
    (:mod:`.java_crashable`), which ``crash_client`` kills and ``restart_client`` replaces
    under the same ``transactional.id``; the same contract."""
