"""Which sessions get the private settings (loopback, RPC authentication):
only those Spark runs inside the run's own JVM; a cluster's master keeps its own settings,
so an unauthenticated standalone master still accepts the driver."""

from __future__ import annotations

import pytest

from faultline.analysis.spark import PRIVATE_CONF, embedded, java_options


@pytest.mark.parametrize("master", ["local", "local[1]", "local[*]", "local[4,2]"])
def test_a_local_master_is_embedded(master: str) -> None:
    assert embedded(master)


@pytest.mark.parametrize("master", ["local-cluster[2,1,1024]", "spark://host:7077", "yarn",
                                    "k8s://https://host:6443", "sc://host:15002", "localhost"])
def test_a_cluster_or_a_server_is_not_embedded(master: str) -> None:
    assert not embedded(master)


def test_a_private_session_listens_on_loopback_and_leaves_its_secret_to_spark() -> None:
    """A secret in the conf would be on the JVM's command line, for every local user to read."""
    assert PRIVATE_CONF["spark.authenticate"] == "true"
    assert not [k for k in PRIVATE_CONF if "secret" in k]
    assert {PRIVATE_CONF[k] for k in ("spark.driver.bindAddress", "spark.driver.host",
                                      "spark.connect.grpc.binding.address")} == {"127.0.0.1"}


def test_the_jvms_run_the_first_jit_tier_and_the_serial_collector_quietly() -> None:
    """The JVM's optimizing compiler and parallel collector cost the pipeline more CPU than
    they save (docs/design.md, "The pipeline's JVM")."""
    flags = java_options().split()
    assert {"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"} <= set(flags)
    assert [f for f in flags if f.startswith("-Dlog4j2.configurationFile=")
            and f.endswith("log4j2-spark.properties")]
