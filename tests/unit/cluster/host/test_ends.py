"""The held transaction ends' rules (faultline/cluster/host/ends.py): pure argument lists."""

from __future__ import annotations

import struct

from faultline.cluster.host import ends
from faultline.cluster.host.netns import ENDS_CHAIN, chain_rules
from faultline.cluster.kafka_config import CLIENT_PORT


def _u32_api_key(segment: bytes) -> int:
    """What the rule's u32 expression reads of a TCP payload: bytes 4 to 7, shifted 16 (its
    IP and TCP header hops are iptables' own)."""
    return struct.unpack(">I", segment[4:8])[0] >> 16


def test_the_rule_reads_the_api_key_of_a_request_that_begins_the_segment() -> None:
    # a request: size, api key, api version, correlation id, client id ...
    end_txn = struct.pack(">ihhi", 42, 26, 4, 7) + b"\x00\x0bfaultline-p"
    produce = struct.pack(">ihhi", 4242, 0, 11, 8) + b"\x00" * 16
    assert _u32_api_key(end_txn) == ends.END_TXN_API_KEY
    assert _u32_api_key(produce) != ends.END_TXN_API_KEY
    assert f"@4>>16={ends.END_TXN_API_KEY:#x}" in ends.hold_commands(1)[1][-5]


def test_a_hold_drops_its_own_marked_connections_and_marks_only_unmarked_ones() -> None:
    rules = ends.hold_commands(3)
    assert all(r[:5] == ["iptables", "-w", "5", "-A", ENDS_CHAIN] for r in rules)
    drop, mark, drop_again = (r[5:] for r in rules)
    assert drop == drop_again == ["-p", "tcp", "--dport", str(CLIENT_PORT), "-m", "connmark", "--mark", "3",
                                  "-j", "DROP"]
    assert mark[mark.index("connmark") + 1:mark.index("connmark") + 3] == ["--mark", "0"]  # no earlier hold's
    assert mark[-3:] == ["CONNMARK", "--set-mark", "3"]
    # the window's end sends every unmarked connection back before the marking rule, which
    # keeps its count
    assert ends.stop_marking_commands() == [[
        "iptables", "-w", "5", "-I", ENDS_CHAIN, "1", "-p", "tcp", "--dport", str(CLIENT_PORT),
        "-m", "connmark", "--mark", "0", "-j", "RETURN"]]
    assert ends.release_commands() == [["iptables", "-w", "5", "-F", ENDS_CHAIN]]


def test_the_chain_is_made_and_jumped_to_from_input() -> None:
    rules = chain_rules()
    assert ["-N", ENDS_CHAIN] in rules and ["-I", "INPUT", "1", "-j", ENDS_CHAIN] in rules


def test_counters_say_connections_held_and_packets_dropped() -> None:
    chain = (f"Chain {ENDS_CHAIN} (1 references)\n"
             "    pkts      bytes target     prot opt in     out     source               destination\n"
             "      30     4000 RETURN     6    --  *      *       0.0.0.0/0  0.0.0.0/0  tcp dpt:9094 "
             "connmark match  0x0\n"
             "       4      468 DROP       6    --  *      *       0.0.0.0/0  0.0.0.0/0  tcp dpt:9094 "
             "connmark match  0x3\n"
             "       2      234 CONNMARK   6    --  *      *       0.0.0.0/0  0.0.0.0/0  tcp dpt:9094 "
             "connmark match  0x0 u32 ... CONNMARK set 0x3\n"
             "       2      234 DROP       6    --  *      *       0.0.0.0/0  0.0.0.0/0  tcp dpt:9094 "
             "connmark match  0x3\n")
    assert ends.parse_counters(chain) == {"connections": 2, "dropped": 6}
    assert ends.parse_counters(f"Chain {ENDS_CHAIN} (1 references)\n") == {"connections": 0, "dropped": 0}
