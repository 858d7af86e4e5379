"""Which sessions get the private settings (loopback, RPC authentication with a fresh secret):
only those Spark runs inside the run's own JVM; a cluster's master keeps its own settings,
so an unauthenticated standalone master still accepts the driver."""

from __future__ import annotations

import pytest

from faultline.analysis.spark import embedded, private_conf


@pytest.mark.parametrize("master", ["local", "local[1]", "local[*]", "local[4,2]"])
def test_a_local_master_is_embedded(master: str) -> None:
    assert embedded(master)


@pytest.mark.parametrize("master", ["local-cluster[2,1,1024]", "spark://host:7077", "yarn",
                                    "k8s://https://host:6443", "sc://host:15002", "localhost"])
def test_a_cluster_or_a_server_is_not_embedded(master: str) -> None:
    assert not embedded(master)


def test_each_session_gets_its_own_secret_and_listens_on_loopback_only() -> None:
    one, two = private_conf(), private_conf()
    assert one["spark.authenticate"] == "true"
    assert one["spark.authenticate.secret"] != two["spark.authenticate.secret"]
    assert len(one["spark.authenticate.secret"]) == 64
    assert {one[k] for k in ("spark.driver.bindAddress", "spark.driver.host",
                             "spark.connect.grpc.binding.address")} == {"127.0.0.1"}
