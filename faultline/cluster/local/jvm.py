"""The Kafka side of the local backend: one broker+controller JVM per node.

:class:`Jvms` knows the Kafka distribution and the broker JVM's flags; it writes each
node's ``server.properties``, formats its storage with Kafka's own StorageTool, and
launches its JVM inside the node's network namespace. Which processes run, and the
run's state, are :class:`~faultline.cluster.local.cluster.LocalCluster`'s.
"""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from faultline.cluster import kafka_config, kafka_dist
from faultline.cluster.host.runstate import ENV_RUN
from faultline.cluster.local.node import LocalNode
from faultline.errors import ClusterError
from faultline.spec import TestSpec


class Jvms:
    """The JVMs of one local cluster of ``spec``; ``jvm_extra`` are more broker JVM flags
    (e.g. a ``-javaagent``), appended last. The distribution is resolved on first use."""

    def __init__(self, spec: TestSpec, jvm_extra: Sequence[str] = ()) -> None:
        self._spec = spec
        self._jvm_extra = tuple(jvm_extra)
        self._dist: kafka_dist.KafkaDist | None = None

    @property
    def dist(self) -> kafka_dist.KafkaDist:
        """The Kafka distribution (resolved, and installed if need be, on first use)."""
        if self._dist is None:
            self._dist = kafka_dist.ensure_kafka(self._spec.kafka.version, self._spec.kafka.home)
        return self._dist

    def write_configs(self, nodes: Sequence[LocalNode], addresses: Mapping[int, str],
                      proxies: Mapping[int, str]) -> None:
        """Each node's directories and ``server.properties`` (``proxies``: node -> the
        ``host:port`` of its proxy)."""
        for node in nodes:
            for d in (node.data_dir, node.metadata_dir, node.log_dir):
                d.mkdir(parents=True, exist_ok=True)
            props = kafka_config.server_properties(
                self._spec.kafka, node.id, addresses, proxies[node.id],
                node.data_dir, node.metadata_dir,
            )  # fmt: skip
            node.config_file.write_text(kafka_config.render_properties(props))

    def format_storage(self, nodes: Sequence[LocalNode], cluster_id: str, run_id: str) -> None:
        """Kafka's own StorageTool for every node: in one JVM when the ``FormatAll``
        helper could be compiled, else one JVM per node in parallel. ClusterError with
        the tool's last lines when it fails."""
        dist = self.dist
        opts = (*kafka_config.tool_options(), *self._cds_options())
        env = {**os.environ, ENV_RUN: run_id}
        features = kafka_config.format_features(self._spec.kafka)
        helper = kafka_dist.format_all_dir(dist)
        if helper is not None:
            configs = [str(n.config_file) for n in nodes]
            cmd = [str(dist.java), *opts, "-cp", f"{dist.classpath}:{helper}", "FormatAll",
                   cluster_id, *features, *configs]  # fmt: skip
            done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, timeout=120)
            if done.returncode != 0:
                raise ClusterError(f"formatting storage failed: {tail(done.stdout + done.stderr)}")
            return

        def fmt(node: LocalNode) -> None:
            cmd = dist.command(
                "kafka.tools.StorageTool", "format", f"--config={node.config_file}",
                f"--cluster-id={cluster_id}", *features, jvm_opts=opts,
            )  # fmt: skip
            done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, timeout=120)
            if done.returncode != 0:
                raise ClusterError(f"formatting node {node.id} failed: {tail(done.stdout + done.stderr)}")

        with concurrent.futures.ThreadPoolExecutor(len(nodes)) as pool:
            for future in [pool.submit(fmt, n) for n in nodes]:
                future.result()

    def launch(self, node: LocalNode, run_id: str,
               env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start ``node``'s JVM in its namespace, its output appended to ``stdout.log``;
        the process is the JVM itself (``ip netns exec`` execs), in a session of its own.
        ``env``: more environment variables for it (a preloaded library)."""
        dist = self.dist
        opts = [
            *kafka_config.jvm_options(self._spec.kafka.heap_mb, node.log_dir,
                                      kafka_dist.log4j_config(), run_id),
            *self._cds_options(),
            *self._jvm_extra,
        ]
        cmd = ["ip", "netns", "exec", node.namespace,
               *dist.command("kafka.Kafka", str(node.config_file), jvm_opts=tuple(opts))]  # fmt: skip
        node.log_dir.mkdir(parents=True, exist_ok=True)
        with (node.log_dir / "stdout.log").open("ab") as out:
            return subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=node.home, env={**os.environ, **(env or {}), ENV_RUN: run_id}, start_new_session=True,
            )  # fmt: skip

    def _cds_options(self) -> list[str]:
        if any(o.startswith("-XX:DumpLoadedClassList") for o in self._jvm_extra):
            return []
        return kafka_dist.cds_options(self.dist)


def tail(text: str, lines: int = 3) -> str:
    """The last ``lines`` lines of ``text``, joined by `` | `` for a one-line error."""
    return " | ".join(text.strip().splitlines()[-lines:])


def tail_file(path: Path, lines: int = 3) -> str:
    """:func:`tail` of a file, or ``(no output)`` when it cannot be read."""
    try:
        return tail(path.read_text(errors="replace"), lines)
    except OSError:
        return "(no output)"
