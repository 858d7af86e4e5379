"""The white-box observer: samples the brokers' own state during a run (docs/design.md,
"White-box observers") into ``observations.jsonl`` (docs/history.md states its lines).

Every ``interval_s`` one round writes one line per partition of the topic: the metadata
a client gets (any broker's view, so an isolated broker can answer with a stale one), the
high watermark the leader answers with and that answer's leader epoch (with ``lso``, for
transactions, also the last stable offset it answers with), and each
replica's log end offset and checkpointed HW, read from its log directory (so also while
a broker is paused, partitioned or dead; null where the node's files are not on this
host). ``time`` is the history's clock, read when the round's client answers arrived:
what they said was current at some moment of the round, which began at most two client
timeouts (:data:`CLIENT_TIMEOUT_S`) earlier. The observer never raises out of its
thread: a round that fails in an unexpected way is logged and the next one runs.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self

import orjson

from faultline.brokerstate.segments import HW_CHECKPOINT, LogEnds, read_checkpoint
from faultline.cluster import kafka_client
from faultline.cluster.admin_child import AdminChild
from faultline.cluster.kafka_client import HighWatermark
from faultline.cluster.protocol import Cluster, PartitionState, Wipeable

#: Seconds a client request of a round may take: a paused broker costs at most this.
CLIENT_TIMEOUT_S = 2.0

_log = logging.getLogger(__name__)


class Source(Protocol):
    """What a round asks Kafka through the client path."""

    def partitions(self, topic: str) -> dict[int, PartitionState]:
        """partition -> leader, ISR and replicas; raises when there is no answer."""
        ...

    def high_watermarks(self, topic: str, partitions: Sequence[int],
                        committed: bool = False) -> dict[int, HighWatermark | str]:
        """partition -> the high watermark (with ``committed``, the last stable offset) and
        the answer's leader epoch, or the error's name when there is none."""
        ...

    def close(self) -> None:
        """Release the client, in the thread that asked; idempotent."""
        ...


class KafkaSource:
    """A :class:`Source` with an admin client of its own, in a child process
    (:class:`~faultline.cluster.admin_child.AdminChild`), and short timeouts (so a slow
    request of the observer never queues the harness's own, and a client that aborts
    costs a round's answers, not the run)."""

    def __init__(self, bootstrap_servers: str, timeout_s: float = CLIENT_TIMEOUT_S) -> None:
        self._timeout = timeout_s
        self._admin = AdminChild(bootstrap_servers, timeout_s)

    def close(self) -> None:
        self._admin.close()

    def partitions(self, topic: str) -> dict[int, PartitionState]:
        return self._admin.call(kafka_client.metadata_states, topic, self._timeout)

    def high_watermarks(self, topic: str, partitions: Sequence[int],
                        committed: bool = False) -> dict[int, HighWatermark | str]:
        return self._admin.call(kafka_client.high_watermarks, topic, partitions, self._timeout, committed)


def host_data_dirs(cluster: Cluster) -> dict[int, Path]:
    """node id -> its log dir, for a cluster whose partition data is on this host
    (:class:`~faultline.cluster.protocol.Wipeable`); empty for any other."""
    if not isinstance(cluster, Wipeable):
        return {}
    return {node.id: cluster.data_dir(node.id) for node in cluster.nodes}


class Observer:
    """Samples ``topic`` every ``interval_s`` into ``path`` on a thread of its own.

    Contract: ``start()`` returns at once; ``stop()`` lets the round in progress finish,
    takes one last round that begins after it was called (the state at the end), and
    returns, waiting at most ``join_timeout_s`` for the thread. Lines are appended one
    round per write, so a run that dies leaves whole rounds. :meth:`sample` is one
    round, also usable without the thread. Nothing here raises because Kafka or a file
    misbehaved: that becomes an ``error`` and nulls in the lines.
    """

    def __init__(self, path: Path, clock: Callable[[], int], topic: str, partitions: int,
                 source: Source, data_dirs: Mapping[int, Path] | None = None,
                 interval_s: float = 0.5, join_timeout_s: float = 10.0, lso: bool = False) -> None:
        self.path = path
        self._lso = lso
        self.interval_s = interval_s
        self.rounds = 0
        self._clock = clock
        self._topic = topic
        self._partitions = range(partitions)
        self._source = source
        self._log_ends = LogEnds(data_dirs or {}, topic)
        self._join_timeout = join_timeout_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        """Start sampling (the first round at once)."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="faultline-observer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling; idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self._join_timeout)
            if self._thread.is_alive():
                _log.warning("observer still in a round after %.0f s; left behind", self._join_timeout)
            self._thread = None

    def _run(self) -> None:
        next_at = time.monotonic()
        with contextlib.closing(self._source):
            while True:
                stopping = self._stop.is_set()
                try:
                    self.sample()
                except Exception:  # a bug here must not end the sampling, nor the run
                    _log.exception("observer round failed")
                if stopping:
                    return
                next_at = max(next_at + self.interval_s, time.monotonic())
                self._stop.wait(next_at - time.monotonic())

    def sample(self) -> list[dict[str, Any]]:
        """Read one round, append its lines to ``path`` and return them."""
        errors: list[str] = []
        try:
            state = self._source.partitions(self._topic)
        except Exception as e:  # KafkaException, LookupError, a client timeout...
            state = {}
            errors.append(f"metadata: {e}")
        parts = sorted(set(self._partitions) | set(state))
        lsos: dict[int, HighWatermark | str] = {}
        if self._lso:  # asked before the HW, so that a stable offset is never above it
            try:
                lsos = self._source.high_watermarks(self._topic, parts, committed=True)
            except Exception as e:
                errors.append(f"lso: {e}")
        try:
            hws = self._source.high_watermarks(self._topic, parts)
        except Exception as e:
            hws = {}
            errors.append(f"hw: {e}")
        now = self._clock()
        checkpoints = {n: read_checkpoint(d / HW_CHECKPOINT) for n, d in self._log_ends.data_dirs.items()}
        lines = []
        for p in parts:
            s = state.get(p)
            nodes = s.replicas if s is not None and s.replicas else sorted(self._log_ends.data_dirs)
            hw, lso = hws.get(p), lsos.get(p)
            line: dict[str, Any] = {
                "time": now, "topic": self._topic, "partition": p,
                "leader": s.leader if s is not None else None,
                "isr": list(s.isr) if s is not None else [],
                "replicas": list(s.replicas) if s is not None else [],
                "hw": hw.offset if isinstance(hw, HighWatermark) else None,
                "hw_epoch": hw.leader_epoch if isinstance(hw, HighWatermark) else None,
                "leo": {str(n): self._log_ends.read(n, p) for n in nodes},
                "hw_checkpoint": {str(n): _checkpointed(checkpoints.get(n), self._topic, p)
                                  for n in nodes},
            }
            if self._lso:
                line["lso"] = lso.offset if isinstance(lso, HighWatermark) else None
            why = [*errors, *([] if s is not None or errors else ["not in the metadata"]),
                   *([f"hw: {hw}"] if isinstance(hw, str) else []),
                   *([f"lso: {lso}"] if isinstance(lso, str) else [])]
            if why:
                line["error"] = "; ".join(why)
            lines.append(line)
        with self.path.open("ab") as fh:
            fh.write(b"".join(orjson.dumps(line) + b"\n" for line in lines))
        self.rounds += 1
        return lines

def _checkpointed(entries: Mapping[tuple[str, int], int] | None, topic: str, p: int) -> int | None:
    return None if entries is None else entries.get((topic, p))
