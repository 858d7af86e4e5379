"""The Spark session ``faultline analyze`` starts on this machine is reachable only by the
run: another local user (``nobody``) who sends the driver an RPC request without Spark's
secret is refused, cannot read that secret off the JVM's command line, and every socket
the JVM listens on is on 127.0.0.1. Classic
``local[N]`` and Spark Connect's ``remote`` ``local[N]`` alike; each session runs in a
process of its own (a Spark Connect session changes the process's environment for good)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

PROBE = Path(__file__).with_name("spark_rpc_probe.py")
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
#: Starts a session, prints the driver's RPC port and its JVM's pid, then holds the session
#: until its stdin closes.
_HOLD_A_SESSION = """
import sys
from pyspark import SparkContext
from faultline.analysis.spark import session
spark = session(**{sys.argv[1]: "local[1]"})
assert spark.range(3).count() == 3
conf = SparkContext._active_spark_context.getConf()
print(conf.get("spark.driver.port"), SparkContext._gateway.proc.pid, flush=True)
sys.stdin.read()
spark.stop()
"""


@contextmanager
def _session(kind: str) -> Iterator[tuple[int, int]]:
    """A session (``kind``: ``master`` or ``remote``) in a child process: (driver port, JVM pid)."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLD_A_SESSION, kind], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        line = proc.stdout.readline()
        assert line, f"the {kind} session did not start (exit {proc.wait()})"
        port, pid = line.split()
        yield int(port), int(pid)
    finally:
        proc.stdin.close()
        proc.wait(timeout=120)


def _listening(pid: int) -> list[str]:
    """The local addresses of the TCP sockets process ``pid`` listens on."""
    out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=True).stdout
    return [line.split()[3] for line in out.splitlines() if re.search(rf"pid={pid},", line)]


@pytest.mark.parametrize("kind", ["master", "remote"])
def test_another_user_cannot_talk_to_the_driver_without_its_secret(kind: str) -> None:
    with _session(kind) as (port, jvm):
        sockets = _listening(jvm)
        probe = subprocess.run([*NOBODY, "/usr/bin/python3", "-I", str(PROBE), "127.0.0.1", str(port)],
                               capture_output=True, text=True, timeout=60)
        argv = subprocess.run([*NOBODY, "cat", f"/proc/{jvm}/cmdline"], capture_output=True, text=True,
                              check=True).stdout.split("\0")
    assert probe.returncode == 0, probe.stderr
    assert "spark.authenticate=true" in argv and not [a for a in argv if "secret" in a], argv
    assert probe.stdout.startswith("refused: "), probe.stdout
    assert any(s.endswith(f":{port}") for s in sockets), sockets
    assert all(s.rsplit(":", 1)[0] in ("127.0.0.1", "[::ffff:127.0.0.1]") for s in sockets), sockets
