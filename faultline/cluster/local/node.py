"""One node of the local backend, as a view on its cluster's run state."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from faultline.cluster.host.netns import Layout
from faultline.cluster.host.runstate import RunState


class Run(Protocol):
    """What a node's view reads of its cluster (a started
    :class:`~faultline.cluster.local.cluster.LocalCluster`)."""

    @property
    def layout(self) -> Layout: ...
    @property
    def workdir(self) -> Path: ...
    @property
    def state(self) -> RunState: ...


class LocalNode:
    """One node of a :class:`~faultline.cluster.local.cluster.LocalCluster` (the
    :class:`~faultline.cluster.protocol.Node` protocol). Its process is managed by the
    cluster; this is a view."""

    def __init__(self, cluster: Run, node_id: int) -> None:
        self._cluster = cluster
        self._id = node_id

    @property
    def id(self) -> int:
        return self._id

    @property
    def address(self) -> str:
        return self._cluster.layout.address(self._id)

    @property
    def namespace(self) -> str:
        return self._cluster.layout.namespace(self._id)

    @property
    def home(self) -> Path:
        """The node's directory: config, data, metadata, logs."""
        return self._cluster.workdir / f"n{self._id}"

    @property
    def config_file(self) -> Path:
        return self.home / "server.properties"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def metadata_dir(self) -> Path:
        return self.home / "metadata"

    @property
    def log_dir(self) -> Path:
        return self.home / "logs"

    @property
    def log_files(self) -> list[Path]:
        return sorted(self.log_dir.glob("*.log")) if self.log_dir.exists() else []

    @property
    def proxy(self) -> str:
        """``host:port`` of the proxy in front of this node's client listener."""
        return f"{self._cluster.layout.proxy_address}:{self._cluster.state.proxy_ports[self._id]}"

    @property
    def pid(self) -> int | None:
        proc = self._cluster.state.nodes.get(self._id)
        return proc.pid if proc is not None and proc.alive() else None

    def is_alive(self) -> bool:
        return self.pid is not None

    @property
    def paused(self) -> bool:
        return self._id in self._cluster.state.paused

    def __repr__(self) -> str:
        return f"LocalNode({self._id}, {self.address}, pid={self.pid})"
