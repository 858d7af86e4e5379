"""A tiny builder for hand-written queue histories, and a spec helper."""

from __future__ import annotations

import dataclasses
from typing import Any

from faultline.history import Op
from faultline.spec import NemesisSpec, ProducerSpec, TestSpec, TopicSpec

TOPIC = "fl-queue"
MS = 1_000_000


def make_spec(acks: str = "all", min_insync: int = 2, unclean: bool = False,
              idempotence: bool = True, in_flight: int = 5, retries: int = 2147483647,
              partitions: int = 1, rf: int = 3) -> TestSpec:
    """A spec with the settings the guarantees depend on."""
    if acks != "all" or retries == 0:
        idempotence = False
    return dataclasses.replace(
        TestSpec(),
        topic=TopicSpec(name=TOPIC, partitions=partitions, replication_factor=rf,
                        min_insync_replicas=min_insync, unclean_leader_election_enable=unclean),
        producer=ProducerSpec(acks=acks, enable_idempotence=idempotence,  # type: ignore[arg-type]
                              max_in_flight=in_flight, retries=retries),
        nemesis=NemesisSpec(faults=("kill",)))


class H:
    """Appends ops with dense indexes and times 1 ms apart."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.t = 0

    def op(self, process: Any, type: str, f: str, value: Any = None,
           error: str | None = None) -> Op:
        self.t += MS
        o = Op(len(self.ops), self.t, process, type, f, value, error)  # type: ignore[arg-type]
        self.ops.append(o)
        return o

    def wait(self, ns: int) -> None:
        """Let ``ns`` pass before the next op."""
        self.t += ns

    def invoke(self, p: int, v: int, part: int = 0) -> None:
        self.op(p, "invoke", "send", {"topic": TOPIC, "partition": part, "value": v})

    def done(self, p: int, v: int, outcome: str = "ok", offset: int | None = None,
             part: int = 0, error: str | None = None) -> None:
        value: dict[str, Any] = {"topic": TOPIC, "partition": part, "value": v}
        if outcome == "ok":
            value["offset"] = -1 if offset is None else offset
        self.op(p, outcome, "send", value, error)

    def send(self, p: int, v: int, outcome: str = "ok", offset: int | None = None,
             part: int = 0, error: str | None = None) -> None:
        self.invoke(p, v, part)
        self.done(p, v, outcome, offset, part, error)

    def poll(self, p: int, records: list[tuple[int, int]], part: int = 0) -> None:
        self.op(p, "invoke", "poll")
        self.op(p, "ok", "poll", {"records": [[TOPIC, part, o, v] for o, v in records]})

    def drain(self, records: list[tuple[int, int]], part: int = 0, last: bool = True,
              hw: int | None = None, lso: int = 0, p: int = 99) -> None:
        self.op(p, "invoke", "drain", {"topic": TOPIC, "partition": part})
        high = hw if hw is not None else (max((o for o, _ in records), default=-1) + 1)
        self.op(p, "ok", "drain", {"topic": TOPIC, "partition": part,
                                   "records": [[o, v] for o, v in records],
                                   "log_start_offset": lso, "high_watermark": high,
                                   "last": last})

    def fault(self, f: str, nodes: list[int] | None = None, **extra: Any) -> None:
        value: dict[str, Any] = {"nodes": nodes or [1], **extra}
        self.op("nemesis", "info", f, value)
        self.op("nemesis", "info", f, {**value, "result": "done"})
