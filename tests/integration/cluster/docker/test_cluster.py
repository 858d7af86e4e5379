"""The docker backend on a real engine: a 3-node container cluster comes up through the
proxies, its faults act on the containers, and nothing labelled with the run outlives it;
what stale runs left is removed by label, and nothing else."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import docker
import pytest

from faultline.cluster import kafka_client
from faultline.cluster.docker import image
from faultline.cluster.docker.cluster import LABEL, DockerCluster
from faultline.cluster.host import netns, runstate
from faultline.errors import SetupError
from faultline.spec import KafkaSpec, TestSpec, TopicSpec
from tests.unprivileged import assert_toxiproxy_out_of_reach

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600),
              pytest.mark.usefixtures("local_backend", "docker_engine")]

SPEC = TestSpec(
    name="it-docker", backend="docker",
    kafka=KafkaSpec(heap_mb=320, replica_lag_time_max_ms=3000, broker_session_timeout_ms=6000),
    topic=TopicSpec(name="it-docker", partitions=1, replication_factor=3, min_insync_replicas=2),
)


@pytest.fixture(scope="module")
def client() -> Iterator[docker.DockerClient]:
    try:
        image.ensure_image(SPEC.kafka.version, print)
    except SetupError as e:
        pytest.skip(f"no image for the docker backend: {e}")
    c = docker.from_env()
    yield c
    c.close()


def _labelled(client: docker.DockerClient, run_id: str) -> list[str]:
    f = {"label": f"{LABEL}={run_id}"}
    return ([f"container {c.name}" for c in client.containers.list(all=True, filters=f)]
            + [f"network {n.name}" for n in client.networks.list(filters=f)])


def _grudge_rules(cluster: DockerCluster, node: int) -> list[str]:
    pid = cluster.node(node).pid
    out = subprocess.run(["nsenter", "-t", str(pid), "-n", "iptables", "-S", netns.CHAIN],
                         capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if line.startswith("-A")]


def test_no_other_local_user_reaches_the_toxiproxy_api(client: docker.DockerClient) -> None:
    with DockerCluster(SPEC) as cluster:
        assert_toxiproxy_out_of_reach(cluster)
        # its process names the run and its state root: another root's clean-up leaves it
        assert cluster.state.toxiproxy is not None
        assert runstate.run_processes(runstate.state_root())[cluster.run_id] == [cluster.state.toxiproxy.pid]
        kafka_client.round_trip(cluster.bootstrap_servers(), 3, 20.0)


def test_a_container_cluster_faults_and_leaves_nothing(client: docker.DockerClient) -> None:
    client.networks.create("fl-stale-test", labels={LABEL: "zstale"})
    client.networks.create("fl-not-ours", labels={"someone.else": "x"})
    try:
        with DockerCluster(SPEC) as cluster:
            run_id = cluster.run_id
            # the stale run's network went, by its label; a network of someone else's stayed
            assert not client.networks.list(filters={"label": f"{LABEL}=zstale"})
            assert client.networks.list(names=["fl-not-ours"])
            containers = client.containers.list(filters={"label": f"{LABEL}={run_id}"})
            assert sorted(c.name for c in containers) == [*(f"fl{run_id}-n{i}" for i in (1, 2, 3)),
                                                          f"fl{run_id}-tp"]
            cluster.create_topic()
            kafka_client.round_trip(cluster.bootstrap_servers(), 3, 20.0)

            cluster.kill(2)
            assert client.containers.get(f"fl{run_id}-n2").status == "exited"
            assert not cluster.node(2).is_alive()
            cluster.start_node(2)
            cluster.wait_full_isr(SPEC.topic.name, 90)

            cluster.pause(3)
            assert client.containers.get(f"fl{run_id}-n3").status == "paused"
            cluster.resume(3)
            assert client.containers.get(f"fl{run_id}-n3").status == "running"

            cluster.partition({1: [2, 3], 2: [1], 3: [1]})
            a2, a3 = cluster.node(2).address, cluster.node(3).address
            assert _grudge_rules(cluster, 1) == [f"-A {netns.CHAIN} -s {a2}/32 -j DROP",
                                                 f"-A {netns.CHAIN} -s {a3}/32 -j DROP"]
            # a container's network namespace is new at each start: the grudge follows it
            cluster.kill(1)
            cluster.start_node(1)
            assert len(_grudge_rules(cluster, 1)) == 2
            cluster.heal_network()
            assert _grudge_rules(cluster, 1) == []
            cluster.wait_full_isr(SPEC.topic.name, 120)

            cluster.stop_node(1)
            assert client.containers.get(f"fl{run_id}-n1").status == "exited"
            cluster.start_node(1)
            cluster.wait_full_isr(SPEC.topic.name, 120)
        assert _labelled(client, run_id) == []
    finally:
        for net in client.networks.list(names=["fl-stale-test", "fl-not-ours"]):
            net.remove()
