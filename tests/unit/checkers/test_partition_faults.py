"""The faults a partition saw, typed inside and tokens only at results.json's edge: the
tokens of any value read back give that value, and a token that is none is refused in
one line."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from faultline.checkers.partition_faults import OTHER_FAULTS, PartitionFaults
from faultline.faults import FAMILIES

COUNT = st.integers(min_value=0, max_value=7)
FAULTS = st.builds(PartitionFaults, st.frozensets(st.sampled_from(sorted({*FAMILIES, *OTHER_FAULTS}))),
                   st.booleans(), COUNT, COUNT, COUNT)


@given(FAULTS)
def test_tokens_read_back_give_the_same_tokens(faults: PartitionFaults) -> None:
    tokens = faults.tokens()
    assert PartitionFaults.from_tokens(tokens).tokens() == tokens
    assert PartitionFaults.from_tokens(reversed(tokens)) == faults  # in any order


@pytest.mark.parametrize(("tokens", "says"), [
    (["kill", "crash"], "'crash' is no fault token"),
    (["faulted>=0"], "'faulted>=0' is no fault token"),
    (["faulted>=01"], "'faulted>=01' is no fault token"),
    (["lost>=1"], "'lost>=1' is no fault token"),
    (["fenced>=1", "fenced>=3"], "fenced>=3 without every fenced>=N below it"),
    (["data-loss>=2"], "data-loss>=2 without every data-loss>=N below it"),
])
def test_a_token_that_is_no_fault_is_refused_in_one_line(tokens: list[str], says: str) -> None:
    with pytest.raises(ValueError) as refused:
        PartitionFaults.from_tokens(tokens)
    assert says in str(refused.value) and "\n" not in str(refused.value)


def test_a_person_reads_counts_not_tokens() -> None:
    seen = PartitionFaults.from_tokens(["faulted>=1", "faulted>=2", "faulted>=3", "fenced>=1",
                                        "kill", "leader-fault", "partition"])
    assert seen.words() == "kill, partition, leader faulted or moved, 3 replicas faulted, 1 fenced"
    assert PartitionFaults(data_loss=2).words() == "data destroyed on 2 at once"
    assert PartitionFaults().words() == ""
