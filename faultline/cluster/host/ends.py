"""Held transaction ends: each client connection to a broker that carries a transaction's
end (an EndTxn request) in a window is held, its packets dropped, until a later time.

A rule of the chain :data:`~faultline.cluster.host.netns.ENDS_CHAIN` in the node's namespace
(jumped to from ``INPUT``) marks the connection (conntrack's mark) whose TCP segment, to the
clients' port, begins with an EndTxn request: the request's size (4 bytes), then its API key,
26, read by iptables' ``u32`` match. Every packet of a marked connection is dropped, so the
client's TCP sends the request again, backing off, until the hold ends; the client gives up
on it at its request timeout and retries on a new connection, which is not marked once the
window is over and goes through at once. The held request lands at its sender's first
retransmission after the hold, while the producer may be in its next transaction: the shape
of KAFKA-17754. The clients' requests begin a segment each (Kafka's clients set
``TCP_NODELAY`` and write a request at a time).

The functions return iptables argument lists and take no namespace: the caller puts the
command that enters the node's namespace before them, as for :mod:`.links`.
"""

from __future__ import annotations

from faultline.cluster.host.netns import ENDS_CHAIN
from faultline.cluster.kafka_config import CLIENT_PORT

#: The API key of EndTxn (Kafka's protocol, ``EndTxnRequest.json``).
END_TXN_API_KEY = 26
_IPTABLES = ("iptables", "-w", "5")
#: From the IP header to the TCP payload, then its bytes 4 to 5: a request's API key.
_API_KEY = f"0>>22&0x3C@12>>26&0x3C@4>>16={END_TXN_API_KEY:#x}"
_TCP = ("-p", "tcp", "--dport", str(CLIENT_PORT))


def _drop(mark: int) -> list[str]:
    return [*_TCP, "-m", "connmark", "--mark", str(mark), "-j", "DROP"]


def _mark(mark: int) -> list[str]:
    return [*_TCP, "-m", "connmark", "--mark", "0", "-m", "u32", "--u32", _API_KEY,
            "-j", "CONNMARK", "--set-mark", str(mark)]


def hold_commands(mark: int) -> list[list[str]]:
    """Commands that start a hold, whose connections get conntrack mark ``mark`` (above 0, a
    new one for each hold): drop the packets of a connection so marked; mark a connection
    no hold marked before whose segment begins with an EndTxn, and drop that segment too.
    A connection's later EndTxn segments (the retransmissions) are dropped by the first
    rule, so the second counts each connection once; a connection an earlier hold marked
    is neither held nor marked again (its mark stays, the rules for it are gone)."""
    return [[*_IPTABLES, "-A", ENDS_CHAIN, *rule] for rule in (_drop(mark), _mark(mark), _drop(mark))]


def stop_marking_commands() -> list[list[str]]:
    """Commands that end a hold's window: an unmarked connection returns from the chain
    before the marking rule, so none is marked from now on; those marked stay held, and the
    marking rule keeps its count."""
    return [[*_IPTABLES, "-I", ENDS_CHAIN, "1", *_TCP, "-m", "connmark", "--mark", "0", "-j", "RETURN"]]


def counters_commands() -> list[list[str]]:
    """The read :func:`parse_counters` takes: the chain's counters."""
    return [[*_IPTABLES, "-L", ENDS_CHAIN, "-v", "-x", "-n"]]


def parse_counters(chain: str) -> dict[str, int]:
    """What a hold did on one node, from :func:`counters_commands`' output: ``connections``
    it marked and packets it ``dropped``."""
    rules = [line.split() for line in chain.splitlines()]
    counted = [(int(f[0]), f[2]) for f in rules if len(f) > 2 and f[0].isdigit()]
    return {"connections": sum(n for n, target in counted if target == "CONNMARK"),
            "dropped": sum(n for n, target in counted if target == "DROP")}


def release_commands() -> list[list[str]]:
    """Commands that let every held connection go: its next retransmission passes."""
    return [[*_IPTABLES, "-F", ENDS_CHAIN]]
