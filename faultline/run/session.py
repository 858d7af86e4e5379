"""A hand-driven session: a normal run whose faults are typed one by one, and whose main
phase lasts until ``faultline cluster down`` (docs/design.md, "Nemeses").

``faultline cluster up`` spawns ``python -m faultline.run.session`` (a process of its own
session, outliving the command), which runs the spec through run_test with a
HandPackage; once the main phase runs, it listens on
``<state dir>/runs/<run id>/session.sock``, prints one ``ready {...}`` line and sends its
own output to the run directory's faultline.log. Only the session process writes the
run's history, so ``index`` and ``time`` stay one sequence. ``spec.time_limit_s`` bounds
the main phase of a session nobody ends; a session that dies leaves a stale cluster,
which the next ``faultline cluster down`` (or any run's start) removes.

The protocol, one JSON object a line: a request ``{"step": "crash leader of 0"}`` or
``{"down": true}``; the reply any number of ``{"say": LINE}`` and then one ``{"exit":
CODE}``, with ``"error": LINE`` when the request failed (a step that does not parse or
could not be done, a session that is ending). ``down`` ends the main phase: the run goes
on as at a time limit, its phases and then its verdict streamed back.
"""

from __future__ import annotations

import contextlib
import io
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import orjson
from rich.console import Console

from faultline.cluster.host import runstate
from faultline.cluster.host.stateroot import checked_run_id, read_private
from faultline.cluster.local.cluster import LocalCluster
from faultline.cluster.protocol import Cluster
from faultline.errors import ClusterError, FaultlineError, NemesisError
from faultline.nemeses.scripted import HandPackage, describe
from faultline.run.runner import RunOutcome, run_test
from faultline.rundir import write_atomic
from faultline.spec import TestSpec

SOCKET_NAME = "session.sock"
#: The run directory's log, where the session's own output goes once ``up`` has returned.
LOG_NAME = "faultline.log"
#: Beside the socket: the session's run directory, for ``cluster status``.
RUN_DIR_NAME = "session.run_dir"


class Ready(NamedTuple):
    """A session whose main phase runs: its cluster's run id and its run directory."""

    run_id: str
    run_dir: Path


def socket_path(run_id: str) -> Path:
    """Where the session of cluster ``run_id`` listens (its run state directory)."""
    return runstate.run_dir(run_id) / SOCKET_NAME


def run_dir_of(run_id: str) -> Path | None:
    """The run directory of the session of cluster ``run_id``; None if no session runs it."""
    try:
        return Path(read_private(socket_path(run_id).parent / RUN_DIR_NAME).decode())
    except FileNotFoundError:
        return None


def sessions() -> list[str]:
    """Run ids of the clusters a session runs (those with a socket)."""
    return [rid for rid in runstate.run_ids() if socket_path(rid).exists()]


# -- the command's side ----------------------------------------------------------------


def start(spec: TestSpec, results: Path, echo: Callable[[str], None]) -> Ready:
    """Spawn the session of ``spec`` and return once its main phase runs, handing each
    line it printed until then (its phases) to ``echo``. ClusterError with the session's
    last word when it ends before that; on Ctrl-C it is terminated (it tears down)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "faultline.run.session", str(results)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True, text=True)  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(orjson.dumps(spec.to_json()).decode())
        proc.stdin.close()
        last = "no output"
        for line in proc.stdout:
            if line.startswith("ready "):
                ready = orjson.loads(line.removeprefix("ready "))
                return Ready(ready["run_id"], Path(ready["run_dir"]))
            line = line.rstrip("\n")
            if line.strip():
                echo(line)
                last = line.strip()
        code = proc.wait()
    except BaseException:
        proc.terminate()  # SIGTERM: the session tears its cluster down
        proc.wait()
        raise
    finally:
        proc.stdout.close()
    raise ClusterError(f"the session ended before its main phase (exit code {code}): {last}")


def request(message: dict[str, Any], run_id: str | None, echo: Callable[[str], None]) -> int:
    """Send ``message`` to the session of ``run_id`` (or the only one), hand each line of
    its reply to ``echo`` and return its exit code; FaultlineError when there is no
    session, or the request failed (the session's reason)."""
    if run_id is None:
        running = sessions()
        if not running:
            raise ClusterError("no hand-driven session runs; start one with faultline cluster up")
        if len(running) > 1:
            raise ClusterError(f"several sessions run ({', '.join(running)}); name one with --run")
        run_id = running[0]
    path = socket_path(checked_run_id(run_id))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(str(path))
        except OSError as e:
            raise ClusterError(f"no session answers for cluster {run_id!r} ({e.strerror or e}); "
                               "see faultline cluster status") from None
        sock.sendall(orjson.dumps(message) + b"\n")
        for raw in sock.makefile("rb"):
            reply = orjson.loads(raw)
            if "say" in reply:
                echo(reply["say"])
            elif "exit" in reply:
                if "error" in reply:
                    raise NemesisError(reply["error"])
                return int(reply["exit"])
    raise ClusterError(f"the session of cluster {run_id!r} ended without an answer; "
                       f"its run directory's {LOG_NAME} says why")


# -- the session's side ----------------------------------------------------------------


class _Reply:
    """One client's connection; a client that went away is no error for the session."""

    def __init__(self, conn: socket.socket) -> None:
        self._file = conn.makefile("wb")

    def send(self, **reply: Any) -> None:
        with contextlib.suppress(OSError):
            self._file.write(orjson.dumps(reply) + b"\n")
            self._file.flush()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._file.close()


class _Broadcast(io.StringIO):
    """The session's console: its stdout, and each line also to every client of ``down``."""

    def __init__(self) -> None:
        self.clients: list[_Reply] = []
        self._partial = ""

    def write(self, text: str) -> int:
        sys.stdout.write(text)
        sys.stdout.flush()
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        for line in lines:
            for client in list(self.clients):
                client.send(say=line)
        return len(text)


class _Session:
    """The session process: see the module docstring."""

    def __init__(self) -> None:
        self.end = threading.Event()
        self.finished = threading.Event()
        self.outcome: RunOutcome | None = None
        self.console = _Broadcast()
        self._nemesis: HandPackage | None = None
        self._server: socket.socket | None = None
        self._downs: list[threading.Thread] = []

    def nemesis_for(self, spec: TestSpec, cluster: Cluster) -> HandPackage:
        """The run's nemesis factory: listen on the cluster's socket, serve it once the
        main phase runs."""
        if not isinstance(cluster, LocalCluster):
            raise ClusterError("a session needs a cluster with run state (the local or docker backend)")
        path = socket_path(cluster.run_id)
        if len(os.fsencode(path)) >= 108:  # sun_path
            raise ClusterError(f"{path} is too long for a Unix socket: "
                               "set FAULTLINE_STATE to a shorter directory")
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(path))
        self._server.listen()
        self._nemesis = HandPackage(cluster)
        threading.Thread(target=self._serve, args=(cluster.run_id,), name="faultline-session",
                         daemon=True).start()
        return self._nemesis

    def _serve(self, run_id: str) -> None:
        assert self._nemesis is not None and self._server is not None
        self._nemesis.serving.wait()
        assert self._nemesis.journal is not None
        run_dir = self._nemesis.journal.path.parent
        write_atomic(socket_path(run_id).parent / RUN_DIR_NAME, str(run_dir.resolve()).encode())
        sys.stdout.write("ready " + orjson.dumps({"run_id": run_id, "run_dir": str(run_dir)}).decode() + "\n")
        sys.stdout.flush()
        # ``up`` stops reading here: from now on the session writes to the run's log
        log = os.open(run_dir / LOG_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:  # closed: the session ends
                return
            threading.Thread(target=self._handle, args=(conn,), name="faultline-session-client",
                             daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        assert self._nemesis is not None
        reply = _Reply(conn)
        with conn:
            try:
                message = orjson.loads(conn.makefile("rb").readline())
            except (OSError, orjson.JSONDecodeError):
                return
            if isinstance(message, dict) and "step" in message:
                text = str(message["step"])
                try:
                    reply.send(say=describe(text, self._nemesis.submit(text)))
                    reply.send(exit=0)
                except FaultlineError as e:
                    reply.send(exit=2, error=str(e))
            elif isinstance(message, dict) and message.get("down"):
                self._downs.append(threading.current_thread())
                self.console.clients.append(reply)
                self.end.set()
                self.finished.wait()
                self.console.clients.remove(reply)
                if self.outcome is None:
                    reply.send(exit=2, error=f"the session failed; its run directory's {LOG_NAME} says why")
                else:
                    for line in self.outcome.lines():
                        reply.send(say=line)
                    reply.send(exit=self.outcome.exit_code)
            else:
                reply.send(exit=2, error=f"not a request: {message!r}")
            reply.close()

    def run(self, spec: TestSpec, results: Path) -> int:
        """Run the session to its end; the exit code of its verdict."""
        console = Console(file=self.console, force_terminal=False, width=200)
        try:
            self.outcome = run_test(spec, results=results, console=console,
                                    nemesis_factory=self.nemesis_for, end_main_phase=self.end)
        finally:
            if self._server is not None:
                self._server.close()
            self.finished.set()
            for thread in list(self._downs):
                thread.join(timeout=10)
        if self.outcome.error is not None:
            print(f"error: {self.outcome.error}", flush=True)
        return self.outcome.exit_code


def main(argv: Sequence[str]) -> int:
    """``python -m faultline.run.session RESULTS`` with the spec (test.json's form) on stdin."""
    spec = TestSpec.from_mapping(orjson.loads(sys.stdin.read()), source="faultline cluster up")
    try:
        return _Session().run(spec, Path(argv[0]))
    except FaultlineError as e:
        print(f"error: {e}", flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
