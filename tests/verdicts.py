"""What a real run of a safe config (acks=all, min.insync=2, idempotence) must show."""

from __future__ import annotations

from typing import Any


def assert_kafka_held(results: dict[str, Any]) -> None:
    """``results`` (a run's results.json) is valid, or its only violations are duplicates
    the client is named for: librdkafka's idempotent producer can write a timed-out batch
    twice after an epoch bump (confluentinc/librdkafka #4953), which the batches' producer
    ids and epochs tell apart. Any other violation, a duplicate the broker or nobody is
    named for, or an unknown verdict fails."""
    if results["valid"] is True:
        return
    assert results["valid"] is False, results["unknown"]
    assert results["violations_by"] == {"client": ["duplicate"]}, (results["violations"], results["causes"])
