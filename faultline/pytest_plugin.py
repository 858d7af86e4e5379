"""The pytest plugin (entry point ``pytest11``): faults in a user's own tests, on a real cluster.

The ``faultline`` fixture gives a test a running Kafka cluster of the local or docker
backend, its bootstrap servers (Toxiproxy's proxies) and the steps of a targeted schedule
(:mod:`faultline.targeted`), run at once and journaled as ``faultline cluster`` journals
them::

    @pytest.mark.faultline(nodes=3, broker={"unclean.leader.election.enable": "false"})
    def test_no_record_is_skipped(faultline):
        faultline.create_topic("orders", partitions=1)
        ...  # the application under test, on faultline.bootstrap_servers
        faultline.step("crash leader of orders/0")
        faultline.step("wait until orders/0 has a new leader")

The cluster's settings come from the closest ``faultline`` marker over the command-line
options (``--faultline-backend``, ``--faultline-nodes``, ``--faultline-kafka-version``,
``--faultline-broker KEY=VALUE``, ...). Tests with the same settings share one cluster,
started at the first and stopped at the end of the session (``--faultline-scope module``:
of the module), or when a test asks for other settings. After each test every fault is
healed (journaled) and the cluster waited healthy, whether the test passed or not; a
cluster that cannot be healed is stopped, and the next test gets a new one. A failing
test's report has a section naming the faults in effect when it failed and the steps it
took. All steps of one test name one topic.

Loading the plugin (every pytest run where kafka-faultline is installed) imports pytest
alone: the cluster, the spec and the nemeses are imported when a test first uses the
fixture.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from faultline.cluster.protocol import Cluster
    from faultline.history import HistoryWriter
    from faultline.nemeses.scripted import HandPackage
    from faultline.spec import TestSpec, TopicSpec

#: The backends (``faultline.cluster.backends.BACKENDS``), named here: the option's
#: choices load none of them.
BACKEND_NAMES = ("local", "docker")
#: The marker's keywords; each overrides the option ``--faultline-<key>`` (``_`` as ``-``).
MARKER_KEYS = ("backend", "nodes", "kafka_version", "kafka_home", "heap_mb", "broker")
#: How long the cluster may take to be healthy again after a test's faults are healed.
HEALTHY_AFTER_S = 120.0
_SCOPES = ("session", "module")
_CLUSTER_KEY = pytest.StashKey["_SharedCluster"]()
_FAULTS_KEY = pytest.StashKey["Faultline"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("faultline", "faults on a real Kafka cluster (kafka-faultline)")
    group.addoption("--faultline-backend", choices=BACKEND_NAMES, default="local",
                    help="The cluster's backend (default: local).")
    group.addoption("--faultline-nodes", type=int, help="Kafka nodes (default: 3).")
    group.addoption("--faultline-kafka-version", help="The Kafka version (default: faultline's).")
    group.addoption("--faultline-kafka-home", help="An existing Kafka distribution instead (local backend).")
    group.addoption("--faultline-heap-mb", type=int, help="Each broker's heap (default: 512).")
    group.addoption("--faultline-broker", action="append", default=[], metavar="KEY=VALUE",
                    help="A broker setting (server.properties); repeatable.")
    group.addoption("--faultline-scope", choices=_SCOPES, default="session",
                    help="Share one cluster across the session (default) or each module.")
    group.addoption("--faultline-journal", metavar="DIR",
                    help="Where each test's steps are journaled (default: pytest's temporary directory).")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "faultline(backend=, nodes=, kafka_version=, kafka_home=, "
                                       "heap_mb=, broker={KEY: VALUE}): the faultline fixture's cluster")
    config.stash[_CLUSTER_KEY] = _SharedCluster()


def pytest_unconfigure(config: pytest.Config) -> None:
    config.stash[_CLUSTER_KEY].stop()


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """One line per cluster the session started (none: nothing printed)."""
    for line in config.stash[_CLUSTER_KEY].started:
        terminalreporter.write_line(f"faultline: started a cluster: {line}")


@dataclass(frozen=True, slots=True)
class _Settings:
    """What a cluster is started with; tests with equal settings share it."""

    backend: str
    nodes: int | None
    kafka_version: str | None
    kafka_home: str | None
    heap_mb: int | None
    broker: tuple[tuple[str, str], ...]

    def spec(self) -> TestSpec:
        """The cluster's spec; SpecError naming what is wrong."""
        from faultline.spec import build_spec

        fits = None if self.nodes is None else {  # a spec topic the cluster can hold
            "replication_factor": min(3, self.nodes), "min_insync_replicas": min(2, self.nodes)}
        return build_spec(None, {"name": "pytest", "backend": self.backend, "topic": fits, "kafka": {
            "nodes": self.nodes, "version": self.kafka_version, "home": self.kafka_home,
            "heap_mb": self.heap_mb, "broker_config": dict(self.broker)}})


def _settings(item: pytest.Item) -> _Settings:
    """The closest ``faultline`` marker over the command-line options; a usage error
    naming a keyword the marker does not know."""
    opt = item.config.getoption
    broker: dict[str, str] = {}
    for pair in opt("faultline_broker"):
        key, eq, value = pair.partition("=")
        if not eq or not key:
            pytest.fail(f"--faultline-broker {pair!r}: expected KEY=VALUE", pytrace=False)
        broker[key] = value
    values: dict[str, Any] = {k: opt(f"faultline_{k}") for k in MARKER_KEYS if k != "broker"}
    marker = item.get_closest_marker("faultline")
    if marker is not None:
        if marker.args or set(marker.kwargs) - set(MARKER_KEYS):
            wrong = [*map(repr, marker.args), *sorted(set(marker.kwargs) - set(MARKER_KEYS))]
            pytest.fail(f"{item.nodeid}: faultline marker: unknown {', '.join(wrong)}; "
                        f"keywords: {', '.join(MARKER_KEYS)}", pytrace=False)
        values.update({k: v for k, v in marker.kwargs.items() if k != "broker"})
        if not isinstance(marker.kwargs.get("broker", {}), Mapping):
            pytest.fail(f"{item.nodeid}: faultline marker: broker must be a mapping of settings",
                        pytrace=False)
        broker.update({str(k): str(v) for k, v in marker.kwargs.get("broker", {}).items()})
    return _Settings(broker=tuple(sorted(broker.items())), **values)


class _SharedCluster:
    """The one cluster tests share: started on first use, replaced when a test asks for
    other settings, stopped by :meth:`stop` (idempotent)."""

    def __init__(self) -> None:
        self.settings: _Settings | None = None
        self.cluster: Cluster | None = None
        #: one line per cluster started, for the session's summary
        self.started: list[str] = []

    def get(self, settings: _Settings) -> Cluster:
        """A running cluster with ``settings``; a one-line failure when it cannot start."""
        from faultline.cluster.backends import cluster_for
        from faultline.cluster.local.cluster import LocalCluster
        from faultline.errors import FaultlineError

        if self.cluster is not None and settings == self.settings:
            return self.cluster
        self.stop()
        try:
            spec = settings.spec()
            cluster = cluster_for(spec)(spec)
            cluster.__enter__()
        except FaultlineError as e:
            pytest.fail(f"faultline: no cluster: {e}", pytrace=False)
        self.settings, self.cluster = settings, cluster
        run = f", run {cluster.run_id}" if isinstance(cluster, LocalCluster) else ""  # the docker one's too
        self.started.append(f"{spec.backend} backend, {spec.kafka.nodes} nodes, "
                            f"Kafka {spec.kafka.version}{run}")
        return cluster

    def stop(self) -> None:
        cluster, self.cluster, self.settings = self.cluster, None, None
        if cluster is not None:
            cluster.__exit__(None, None, None)


class Faultline:
    """A test's cluster and its faults: see the module docstring.

    Steps are those of a targeted schedule (``crash leader of orders/0``, ``isolate
    follower of orders/0 as cut``, ``hold``, ``pause``, ``heal``, ``wait until isr of
    orders/0 is {leader}``), run in the test's thread, each journaled to :attr:`journal`.
    """

    def __init__(self, cluster: Cluster, journal: Path) -> None:
        self.cluster = cluster
        #: the history file (docs/history.md's ops, ``process`` "nemesis") of this test's steps
        self.journal = journal
        #: each step done, as one line (``crash leader of 0 (leader of 0 = node 2) -> kill 2: ...``)
        self.done: list[str] = []
        self._topics: dict[str, TopicSpec] = {}
        self._faults: HandPackage | None = None
        self._history: HistoryWriter | None = None

    @property
    def bootstrap_servers(self) -> str:
        """``host:port,...`` of the proxies, one per node: what the application connects to."""
        return self.cluster.bootstrap_servers()

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int | None = None,
                     min_insync_replicas: int | None = None, timeout: float = 60.0) -> TopicSpec:
        """Create topic ``name`` (replicated on up to 3 nodes, ``min.insync.replicas`` up to
        2) and wait until every partition is led with a full ISR. Topics outlive the test
        when the cluster is shared: give each test its own."""
        from faultline.spec import TopicSpec

        nodes = len(self.cluster.nodes)
        topic = TopicSpec(name, partitions, replication_factor or min(3, nodes),
                          min_insync_replicas or min(2, nodes))
        self.cluster.create_topic(topic, timeout)
        self._topics[name] = topic
        return topic

    def step(self, text: str) -> str:
        """Run one step now; the line saying what it did. The first step fixes the topic
        all steps of this test name (``TOPIC/P``, or the topic :meth:`create_topic` made
        when a step names none). SpecError when it does not parse; NemesisError when it
        could not be done, or a wait was not met in time (journaled either way)."""
        from faultline.nemeses.scripted import describe

        faults, history = self._started(text)
        line = describe(text, faults.run_text(text, history))
        self.done.append(line)
        return line

    def in_effect(self) -> list[str]:
        """The faults in effect now, one line each (empty: none)."""
        return self._faults.in_effect() if self._faults is not None else []

    def close(self) -> None:
        """Heal every fault in effect (journaled) and close the journal; idempotent. No step
        runs after it."""
        faults, history, self._faults, self._history = self._faults, self._history, None, None
        if faults is None or history is None:
            return
        try:
            faults.heal_all(history)
        finally:
            history.close()

    def _started(self, text: str) -> tuple[HandPackage, HistoryWriter]:
        from faultline.errors import SpecError
        from faultline.history import HistoryWriter
        from faultline.nemeses.scripted import HandPackage, topics_named
        from faultline.spec import TopicSpec

        if self._faults is None or self._history is None:
            named = topics_named(text)
            topic = self._topics.get(named[0]) if named else None
            if named and topic is None:
                states = self.cluster.leaders(named[0])
                topic = TopicSpec(named[0], partitions=len(states))
            if topic is None and len(self._topics) == 1:
                (topic,) = self._topics.values()
            if topic is None:
                raise SpecError(f"{text!r}: name the topic the steps act on (leader of TOPIC/0), "
                                     "or create one first with faultline.create_topic")
            self._faults = HandPackage(self.cluster, topic=topic)
            self.journal.parent.mkdir(parents=True, exist_ok=True)
            self._history = HistoryWriter(self.journal)
        return self._faults, self._history


@pytest.fixture
def faultline(request: pytest.FixtureRequest,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faultline]:
    """A running cluster and its faults for this test; healed at its end, passed or failed."""
    item = request.node
    shared = request.config.stash[_CLUSTER_KEY]
    cluster = shared.get(_settings(item))
    where = request.config.getoption("faultline_journal")
    base = Path(where) if where else tmp_path_factory.getbasetemp() / "faultline"
    f = Faultline(cluster, base / (re.sub(r"[^\w.-]+", "_", item.nodeid).strip("_") + ".jsonl"))
    item.stash[_FAULTS_KEY] = f
    yield f
    try:
        f.close()
        cluster.wait_healthy(HEALTHY_AFTER_S)
    except BaseException:
        shared.stop()  # in an unknown state: the next test gets a new one
        raise


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[
        None, pytest.TestReport, pytest.TestReport]:
    """A failing test's report names the faults in effect when it failed, and its steps."""
    report = yield
    f = item.stash.get(_FAULTS_KEY, None)
    if f is not None and report.failed and call.when == "call":
        lines = [*(f.in_effect() or ["none"]), "", "steps taken:", *(f.done or ["none"]),
                 f"journal: {f.journal}"]
        report.sections.append(("faultline: faults in effect at the failure", "\n".join(lines)))
    return report


@pytest.hookimpl(trylast=True)  # after the fixtures' teardown, which heals the cluster
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Under ``--faultline-scope module``, stop the cluster after a module's last test."""
    if item.config.getoption("faultline_scope") == "module" and (
            nextitem is None or getattr(nextitem, "module", None) is not getattr(item, "module", None)):
        item.config.stash[_CLUSTER_KEY].stop()
