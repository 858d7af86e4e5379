"""The quiescence decision from readings: each condition a settled partition must meet,
named when unmet, and quiescent only once the same settled reading has held."""

from __future__ import annotations

from dataclasses import replace

import pytest

from faultline.brokerstate.quiescence import Quiescence, Reading, settled_end
from faultline.cluster.protocol import PartitionState

ALL = frozenset({1, 2, 3})
#: Partition led by node 2, every replica in the ISR and at log end 120, HW there.
SETTLED = Reading(PartitionState(2, (1, 2, 3), (2, 3, 1)), 120, {1: 120, 2: 120, 3: 120}, ALL)


def test_settled_gives_the_leaders_log_end() -> None:
    assert settled_end(SETTLED) == 120


def test_a_restarted_isr_member_that_froze_the_hw() -> None:
    # the race: node 3 restarted while the controller still lists it in the ISR;
    # the leader's HW waits for it while acks=1 writes took the log end further
    r = replace(SETTLED, hw=1_097_235, leo={1: 1_261_250, 2: 1_261_250, 3: 1_097_235})
    assert settled_end(r) == "HW 1097235 < leader n2's log end 1261250"


@pytest.mark.parametrize(("reading", "why"), [
    (replace(SETTLED, error="no metadata: _TIMED_OUT"), "no metadata: _TIMED_OUT"),
    (replace(SETTLED, state=None), "not in the metadata"),
    (replace(SETTLED, state=PartitionState(None, (), (2, 3, 1))), "no leader"),
    (replace(SETTLED, registered=frozenset({2})), "n3, n1 not registered and unfenced"),
    (replace(SETTLED, state=PartitionState(2, (1, 2), (2, 3, 1))), "ISR [1, 2] of replicas [2, 3, 1]"),
    (replace(SETTLED, state=PartitionState(2, (1, 2, 3), ())), "ISR [1, 2, 3] of replicas []"),
    (replace(SETTLED, hw="NOT_LEADER_OR_FOLLOWER"), "no high watermark (NOT_LEADER_OR_FOLLOWER)"),
    (replace(SETTLED, hw=None), "no high watermark (None)"),
    (replace(SETTLED, leo={1: 120, 2: None, 3: 120}), "leader n2's log end is unreadable"),
    (replace(SETTLED, hw=130, leo={1: 120, 2: 120, 3: 120}), "HW 130 > leader n2's log end 120"),
    (replace(SETTLED, leo={1: 118, 2: 120, 3: None}),
     "n3's log end None, n1's log end 118 != leader n2's 120"),
])
def test_each_unmet_condition_is_named(reading: Reading, why: str) -> None:
    assert settled_end(reading) == why


def test_quiescent_once_the_same_settled_reading_held() -> None:
    q = Quiescence([0, 1], stable_s=0.5)
    assert not q.done and q.reasons == {0: "not read yet", 1: "not read yet"}
    q.add({0: SETTLED, 1: SETTLED}, now=10.0)
    assert q.ends == {} and q.reasons[0] == "settled at log end 120 for only 0.0 s"
    q.add({0: SETTLED, 1: replace(SETTLED, hw=121, leo={1: 121, 2: 121, 3: 121})}, now=10.3)
    assert q.ends == {} and q.reasons == {0: "settled at log end 120 for only 0.3 s",
                                          1: "settled at log end 121 for only 0.0 s"}
    q.add({0: SETTLED, 1: replace(SETTLED, hw=121, leo={1: 121, 2: 121, 3: 121})}, now=10.6)
    assert q.ends == {0: 120} and q.reasons == {1: "settled at log end 121 for only 0.3 s"}
    q.add({0: SETTLED, 1: replace(SETTLED, hw=121, leo={1: 121, 2: 121, 3: 121})}, now=10.9)
    assert q.done and q.ends == {0: 120, 1: 121} and q.reasons == {}


def test_an_unsettled_or_missing_reading_starts_over() -> None:
    q = Quiescence([0], stable_s=0.5)
    q.add({0: SETTLED}, now=0.0)
    q.add({0: SETTLED}, now=1.0)
    assert q.ends == {0: 120}
    q.add({0: replace(SETTLED, state=PartitionState(2, (2,), (2, 3, 1)))}, now=2.0)
    assert q.ends == {} and q.reasons == {0: "ISR [2] of replicas [2, 3, 1]"}
    q.add({0: SETTLED}, now=3.0)
    assert q.ends == {}, "settled again, but not yet for long"
    q.add({}, now=4.0)
    assert q.reasons == {0: "not read"}
    q.add({0: SETTLED}, now=5.0)
    assert q.ends == {}, "the round that missed it started the wait over"
