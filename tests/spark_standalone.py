"""A Spark standalone cluster on this machine, for tests and benchmarks: a master and workers
bound to 127.0.0.1 with Spark's RPC authentication on.

The secret is random, in a ``spark-defaults.conf`` of mode 0600 (its directory 0700) that
the daemons read with ``--properties-file`` and a driver through ``SPARK_CONF_DIR``
(:meth:`Standalone.driver_env`): never on a command line. The master's REST server is off
and the web UIs (on 127.0.0.1) cannot kill anything. Each daemon runs in a process group of
its own and carries :data:`MARK` in its environment, as do its executors and whatever they
start: :meth:`Standalone.stop` ends the groups and then every process with this cluster's
mark; :func:`stop_leftovers` ends those of any cluster a crashed session left.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

from faultline.analysis.spark import java_home
from faultline.cluster.waiting import wait_until

#: The environment variable every process of a test cluster carries; its value is the
#: cluster's directory.
MARK = "FAULTLINE_TEST_SPARK"
#: Seconds a daemon gets to come up.
START_S = 180.0
SPARK_HOME = Path(pyspark.__file__).parent


@dataclass
class Standalone:
    """A running cluster: its directory, the master's URL and each daemon's process."""

    base: Path
    master: str = ""
    daemons: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def conf_dir(self) -> Path:
        return self.base / "conf"

    def driver_env(self) -> dict[str, str]:
        """The environment a driver of this cluster runs with (this one's, plus the conf)."""
        return {**os.environ, "SPARK_CONF_DIR": str(self.conf_dir), "SPARK_LOCAL_IP": "127.0.0.1"}

    def worker_dir(self, name: str) -> Path:
        """Where worker ``name`` keeps its executors' directories (``<app id>/<executor id>``)."""
        return self.base / name

    def _start_worker(self, name: str, cores: int) -> Path:
        """Start worker ``name`` with ``cores`` cores; its log."""
        self.worker_dir(name).mkdir()
        return self._start(name, "org.apache.spark.deploy.worker.Worker", "--cores", str(cores),
                           "--memory", "1g", "--work-dir", str(self.worker_dir(name)), self.master)

    def kill(self, name: str) -> None:
        """SIGKILL daemon ``name`` and its process group (a worker's executors): a machine lost."""
        proc = self.daemons.pop(name)
        _kill_group(proc.pid)
        proc.wait()

    def stop(self) -> None:
        """End every daemon, then every process left with this cluster's mark."""
        for name in list(self.daemons):
            self.kill(name)
        _kill_marked(str(self.base))

    def _start(self, name: str, main: str, *args: str) -> Path:
        log = self.base / f"{name}.log"
        env = {**self.driver_env(), "SPARK_HOME": str(SPARK_HOME), "JAVA_HOME": str(java_home()),
               "SPARK_DAEMON_MEMORY": "256m", MARK: str(self.base)}
        with log.open("wb") as out:
            self.daemons[name] = subprocess.Popen(
                [str(SPARK_HOME / "bin" / "spark-class"), main, "--host", "127.0.0.1", "--port", "0",
                 "--webui-port", "0", "--properties-file", str(self.conf_dir / "spark-defaults.conf"), *args],
                env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)
        return log

    def _await(self, log: Path, line: re.Pattern[str], what: str) -> re.Match[str]:
        found: list[re.Match[str]] = []

        def there() -> bool:
            m = line.search(log.read_text(errors="replace"))
            found.extend([m] if m else [])
            return m is not None

        if not wait_until(there, time.monotonic() + START_S):
            raise RuntimeError(f"{what} did not come up in {START_S:.0f} s; see {log}")
        return found[0]


def start(base: Path, workers: int, cores: int = 1) -> Standalone:
    """A master and ``workers`` workers (``worker0``, ...) of ``cores`` cores each, in ``base``
    (made here), once every worker has registered; stopped again if any fails to come up."""
    base.mkdir(mode=0o700, parents=True)
    cluster = Standalone(base)
    cluster.conf_dir.mkdir(mode=0o700)
    conf = cluster.conf_dir / "spark-defaults.conf"
    fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("spark.authenticate true\n"
                f"spark.authenticate.secret {secrets.token_hex(32)}\n"
                "spark.master.rest.enabled false\n"
                "spark.ui.killEnabled false\n"
                "spark.driver.host 127.0.0.1\n"
                "spark.driver.bindAddress 127.0.0.1\n"
                "spark.executor.memory 512m\n")
    try:
        log = cluster._start("master", "org.apache.spark.deploy.master.Master")
        cluster.master = cluster._await(log, re.compile(r"Starting Spark master at (spark://\S+)"),
                                        "the master").group(1)
        logs = {f"worker{i}": cluster._start_worker(f"worker{i}", cores) for i in range(workers)}
        for name, worker_log in logs.items():
            cluster._await(worker_log, re.compile(r"Successfully registered with master"), name)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def stop_leftovers() -> list[int]:
    """SIGKILL every process of this user that carries :data:`MARK` (a crashed session's
    cluster); the pids ended."""
    return _kill_marked(None)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def _kill_marked(value: str | None) -> list[int]:
    """SIGKILL every process of this user whose environment has MARK (= ``value``, or any)."""
    wanted = f"{MARK}=".encode() + (value.encode() if value is not None else b"")
    killed = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if proc.stat().st_uid != os.geteuid():
                continue
            entries = (proc / "environ").read_bytes().split(b"\0")
        except OSError:  # gone, or not ours to read
            continue
        if any(e == wanted if value is not None else e.startswith(wanted) for e in entries):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(proc.name), signal.SIGKILL)
                killed.append(int(proc.name))
    return killed
