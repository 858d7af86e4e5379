"""The Spark session of the pipeline: where it runs, what it needs, and a quiet log.

:func:`session` starts (or joins) a SparkSession: embedded ``local[*]`` by default, any
master URL (``spark://host:7077``, ``yarn``, ``k8s://...``) with ``master``, or a Spark
Connect server with ``remote`` (``sc://host:15002``). Before the JVM starts it sets what
Spark needs and a fresh shell lacks: ``JAVA_HOME`` (Java 17+, from ``$JAVA_HOME`` or the
``java`` on ``PATH``) and ``PYSPARK_PYTHON`` / ``PYSPARK_DRIVER_PYTHON`` (this
interpreter, so executors import the same faultline, pandas and pyarrow). Spark's own
log is cut to errors (``data/log4j2-spark.properties``), its JVMs run with
:data:`JVM_FLAGS`, and its console progress bar is off; :class:`Progress` shows the
pipeline's steps, and the running stage's tasks, with rich.

A session this machine runs (``local[N]``, as master or as Spark Connect's ``remote``) is
reachable only by this run: its driver, block manager and Connect server listen on
127.0.0.1, and Spark's RPC authentication is on (:data:`PRIVATE_CONF`). A session on a
cluster (``spark://``, ``yarn``, ...) or on a Spark Connect server (``sc://``) gets neither:
that cluster's own settings decide (docs/analysis.md says what to set).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress

from faultline.errors import SetupError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: SQL settings every session gets, Spark Connect's included: Arrow for Python<->JVM data,
#: partition values read as strings (a run id is not a number), UTC; and for the pipeline's
#: queries, over tables of a row a run, few shuffle partitions and no whole-stage code
#: generation, whose planning and compiling cost more CPU than such small tables save
#: (docs/design.md, "The pipeline's JVM").
CONF: dict[str, str] = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.codegen.wholeStage": "false",
}
#: What an embedded or cluster session (not Spark Connect's) also gets: no console
#: progress bar (:class:`Progress` shows ours), no web UI.
LOCAL_CONF: dict[str, str] = {
    "spark.ui.showConsoleProgress": "false",
    "spark.ui.enabled": "false",
}

_EMBEDDED = re.compile(r"local(\[[^\]]*\])?")


def embedded(master: str) -> bool:
    """Whether Spark runs ``master`` inside this run's own JVM: ``local``, ``local[N]``,
    ``local[*]``, ``local[N,F]``; not ``local-cluster[...]`` (a standalone master and
    workers) nor a cluster's or a Spark Connect server's URL."""
    return _EMBEDDED.fullmatch(master) is not None


#: What makes an embedded session reachable only by this run: its listening sockets on
#: 127.0.0.1, and RPC authentication. No ``spark.authenticate.secret``: for a local master
#: Spark makes a random secret per application itself and keeps it in its JVM, where one
#: in the conf would be on the JVM's command line (pyspark passes it as ``--conf``), which
#: every local user can read.
PRIVATE_CONF: dict[str, str] = {
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.connect.grpc.binding.address": "127.0.0.1",
    "spark.authenticate": "true",
}


def java_home() -> Path:
    """The Java home Spark runs on: ``$JAVA_HOME``, else the one of ``java`` on ``PATH``.

    SetupError, saying how to fix it, when there is none or it is older than Java 17.
    """
    env = os.environ.get("JAVA_HOME")
    if env and (Path(env) / "bin" / "java").exists():
        home = Path(env)
    else:
        found = shutil.which("java")
        if not found:
            raise SetupError("java not found; Spark needs Java 17+: "
                             "apt-get install -y openjdk-17-jre-headless")
        home = Path(found).resolve().parent.parent
    out = subprocess.run([str(home / "bin" / "java"), "-version"], capture_output=True, text=True,
                         check=False)
    text = out.stderr + out.stdout
    version = text.split('"')[1] if text.count('"') >= 2 else ""
    major = version.split(".")[1] if version.startswith("1.") else version.split(".")[0]
    if not major.isdigit() or int(major) < 17:
        raise SetupError(f"{home}: Spark needs Java 17+ (found {version or 'an unknown version'}); "
                         "set JAVA_HOME or apt-get install -y openjdk-17-jre-headless")
    return home


#: The JVMs' own settings: the JIT's first tier only and the serial collector. The
#: pipeline's JVM moves Arrow batches and plans small queries, its data crunched in
#: Python: the optimizing compiler's and the parallel collector's threads cost it more
#: CPU than they save (docs/design.md, "The pipeline's JVM").
JVM_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def java_options() -> str:
    """The driver's and the executors' ``extraJavaOptions``: :data:`JVM_FLAGS` and Spark's
    log cut to errors (``data/log4j2-spark.properties``)."""
    log4j = resources.files("faultline.analysis") / "data" / "log4j2-spark.properties"
    return " ".join((f"-Dlog4j2.configurationFile={log4j}", *JVM_FLAGS))


def spark_env(private: bool = True) -> dict[str, str]:
    """The environment variables :func:`session` sets before the JVM starts; ``private`` (an
    embedded session) binds Spark to 127.0.0.1, where a cluster's workers could not reach it."""
    env = {"JAVA_HOME": str(java_home()), "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable}
    return {**env, "SPARK_LOCAL_IP": "127.0.0.1"} if private else env


def session(master: str | None = None, remote: str | None = None, *, app: str = "faultline-analyze",
            conf: dict[str, str] | None = None) -> SparkSession:
    """A SparkSession for the pipeline: ``remote`` (Spark Connect) wins over ``master``, which
    defaults to ``local[*]``. An existing session of this process is reused (its master kept).

    ``remote`` is a server's ``sc://`` URL, whose executors must have faultline installed,
    or ``local[N]``: pyspark then starts a Spark Connect server in this machine, with the
    environment :func:`spark_env` gives. An embedded ``local`` session, classic or behind
    Spark Connect's server, gets :data:`PRIVATE_CONF` (Spark Connect's server also needs
    the bearer token pyspark makes for it, ``SPARK_CONNECT_AUTHENTICATE_TOKEN``)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:  # pragma: no cover - pyspark is a dependency
        raise SetupError(f"pyspark is not installed ({e}); make setup installs it") from None
    settings = {**CONF, **(conf or {})}
    if remote and remote.startswith("sc://"):
        builder = SparkSession.builder.remote(remote)
    else:
        # local[N] as remote: pyspark starts a Spark Connect server here, with these settings
        private = embedded(remote or master or "local[*]")
        os.environ.update(spark_env(private))
        settings = {**LOCAL_CONF, "spark.driver.extraJavaOptions": java_options(),
                    "spark.executor.extraJavaOptions": java_options(), **settings}
        if private:
            settings.update(PRIVATE_CONF)
        builder = (SparkSession.builder.remote(remote) if remote
                   else SparkSession.builder.master(master or "local[*]"))
    for k, v in settings.items():
        builder = builder.config(k, v)
    with warnings.catch_warnings():
        # local[N] as remote: the server started with every setting; the client then sets
        # each again at run time, and warns for those only a start can set
        warnings.filterwarnings("ignore", "Failed to set spark", UserWarning)
        spark = builder.appName(app).getOrCreate()
    if not remote:
        spark.sparkContext.setLogLevel("ERROR")
    return spark


class Progress:
    """The pipeline's steps on the terminal (rich), with the running Spark stage's tasks.

    ``with progress.step("checking runs"):`` shows a line per step; while it runs, a
    thread polls Spark's status tracker (classic sessions only: Spark Connect has none)
    and shows the active stages' completed / total tasks.
    """

    def __init__(self, spark: SparkSession, console: Console | None = None) -> None:
        self._spark = spark
        self._bar = RichProgress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(),
                                 console=console or Console(stderr=True), transient=False)

    def __enter__(self) -> Progress:
        self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()

    @contextmanager
    def step(self, what: str) -> Iterator[None]:
        task = self._bar.add_task(what, total=None)
        stop = threading.Event()
        tracker = _tracker(self._spark)
        poll = threading.Thread(target=self._poll, args=(tracker, task, stop), daemon=True)
        if tracker is not None:
            poll.start()
        try:
            yield
        finally:
            stop.set()
            if poll.is_alive():
                poll.join()
            done = self._bar.tasks[task].completed or 1
            self._bar.update(task, total=done, completed=done)

    def _poll(self, tracker: Any, task: Any, stop: threading.Event) -> None:
        while not stop.wait(0.5):
            stages = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
            stages = [s for s in stages if s is not None]
            if stages:
                self._bar.update(task, total=sum(s.numTasks for s in stages),
                                 completed=sum(s.numCompletedTasks for s in stages))


def _tracker(spark: SparkSession) -> Any:
    try:
        return spark.sparkContext.statusTracker()
    except Exception:  # Spark Connect: no SparkContext on the client
        return None
