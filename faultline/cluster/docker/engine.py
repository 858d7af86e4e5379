"""The Docker engine on this machine: whether one answers, starting ``dockerd`` where none
runs, and stopping the one faultline started with the host's firewall as it was.

``dockerd`` rewrites the host's firewall when it starts: FORWARD policy DROP, ``DOCKER*``
chains in the filter and nat tables, ``ip_forward=1``, ``bridge-nf-call-iptables=1``, a
``docker0`` bridge; and it leaves all of it when it stops. The local backend does not
mind (its bridge lives in a namespace of its own), but other software on the host may,
so :func:`start` records the host's state first (in ``<state root>/dockerd.json``) and
:func:`stop` stops that engine and puts the state back. An engine faultline did not start
is never stopped.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from faultline.cluster.host.runstate import ProcId, kill_and_wait
from faultline.cluster.host.stateroot import open_private, read_private, state_root
from faultline.cluster.kafka_dist import Report, ensure_debian_commands, which
from faultline.cluster.waiting import wait_until
from faultline.errors import SetupError
from faultline.rundir import write_atomic

SOCKET = Path("/var/run/docker.sock")
_SYSCTLS = (
    "net/ipv4/ip_forward",
    "net/bridge/bridge-nf-call-iptables",
    "net/bridge/bridge-nf-call-ip6tables",
)
_POLICIES = ("ACCEPT", "DROP")
_TABLE = re.compile(r"(?:ip|ip6|inet|arp|bridge|netdev) [A-Za-z0-9_.-]{1,64}")


def _record() -> Path:
    return state_root() / "dockerd.json"


def running() -> bool:
    """True when an engine answers ``/_ping`` on the default socket."""
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(5)
            s.connect(str(SOCKET))
            s.sendall(b"GET /_ping HTTP/1.0\r\n\r\n")
            status = s.recv(4096).split(b"\r\n", 1)[0]  # HTTP/1.0 200 OK
            return status.startswith(b"HTTP/1.") and b" 200 " in status + b" "
    except OSError:
        return False


@dataclass(frozen=True, slots=True)
class HostState:
    """What ``dockerd`` changes on the host, as it was before (module docstring)."""

    forward_policy: dict[str, str]  # "iptables"/"ip6tables" -> ACCEPT, DROP, ...
    sysctls: dict[str, str]
    tables: list[str]  # the nftables tables there were, "<family> <name>"

    @classmethod
    def read(cls) -> HostState:
        policies = {}
        for tool in ("iptables", "ip6tables"):
            out = _out([tool, "-w", "5", "-S", "FORWARD"])
            policy = [ln.split()[2] for ln in out.splitlines() if ln.startswith("-P ")]
            policies[tool] = policy[0] if policy else "ACCEPT"
        sysctls = {}
        for key in _SYSCTLS:
            with contextlib.suppress(OSError):
                sysctls[key] = (Path("/proc/sys") / key).read_text().strip()
        return cls(policies, sysctls, _tables())

    @classmethod
    def checked(cls, data: object) -> HostState:
        """The state :func:`start` recorded; ValueError for any value :meth:`read` never
        gives (a sysctl of another name, a policy or table of another shape)."""
        if not isinstance(data, dict):
            raise ValueError("not a host state")
        policies, sysctls, tables = data.get("forward_policy"), data.get("sysctls"), data.get("tables")
        if not (isinstance(policies, dict) and set(policies) <= {"iptables", "ip6tables"}
                and all(v in _POLICIES for v in policies.values())):
            raise ValueError(f"forward policies {policies!r}")
        if not (isinstance(sysctls, dict) and set(sysctls) <= set(_SYSCTLS)
                and all(isinstance(v, str) and v.isdigit() for v in sysctls.values())):
            raise ValueError(f"sysctls {sysctls!r}")
        if not (isinstance(tables, list) and all(isinstance(t, str) and _TABLE.fullmatch(t) for t in tables)):
            raise ValueError(f"tables {tables!r}")
        return cls(dict(policies), dict(sysctls), list(tables))


_POLICY_RC = Path("/usr/sbin/policy-rc.d")


def install(report: Report) -> None:
    """Debian's ``docker.io`` (dockerd, containerd, the CLI) and ``nftables`` (:func:`restore`
    drops the tables iptables made with it), when missing.

    Its package scripts would start the engine through the init system, outside of
    :func:`start`'s record (and so never stopped): a ``policy-rc.d`` that refuses every
    start is put in place for the install when the machine has none.
    """
    if which("dockerd") and which("nft"):
        return
    guard = not _POLICY_RC.exists()
    if guard:
        _POLICY_RC.write_text("#!/bin/sh\n# faultline: no service starts during its install\nexit 101\n")
        _POLICY_RC.chmod(0o755)
    try:
        ensure_debian_commands(("dockerd", "nft"), report)
    finally:
        if guard:
            _POLICY_RC.unlink(missing_ok=True)


def start(log: Path | None = None, timeout: float = 60.0) -> None:
    """Start ``dockerd`` (no engine may run yet), recording the host's state first; return
    once it answers. SetupError when it is not installed or does not come up.

    An engine faultline started that died without :func:`stop` left the host as it made
    it: its record's state, from before that engine, is kept, not the host's now."""
    if running():
        raise SetupError("a Docker engine runs already")
    if not which("dockerd"):
        raise SetupError("dockerd not found; faultline setup --backend docker installs docker.io")
    before = recorded_host_state() or HostState.read()
    log = log or state_root() / "dockerd.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with os.fdopen(open_private(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "ab") as out:
        proc = subprocess.Popen(["dockerd"], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    pid = ProcId.of(proc.pid)
    record = {"pid": asdict(pid) if pid else None, "before": asdict(before)}
    write_atomic(_record(), json.dumps(record).encode())
    if not wait_until(running, time.monotonic() + timeout):
        stop()
        raise SetupError(f"dockerd did not answer within {timeout:.0f} s; see {log}")


def started_here() -> bool:
    """True when the engine that runs (or ran) was started by :func:`start`."""
    return _record().exists()


def recorded_host_state() -> HostState | None:
    """The host's state :func:`start` recorded before it started the engine; None when
    faultline started none (or the record is not one :func:`start` writes)."""
    recorded = _read_record()
    return recorded[1] if recorded else None


def _read_record() -> tuple[ProcId | None, HostState] | None:
    """The engine's process and the host's state before it, as :func:`start` recorded them."""
    try:
        data = json.loads(read_private(_record()))
        return ProcId.checked(data["pid"]), HostState.checked(data["before"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def stop() -> bool:
    """Stop the engine :func:`start` started and restore the host's firewall, sysctls and
    links as they were; True when it did. Nothing when faultline started none, nor when
    the one it started is gone and another engine answers: the host's firewall is that
    engine's now (restoring it would cut its containers off), and the record is dropped."""
    recorded = _read_record()
    if recorded is None:
        return False
    pid, before = recorded
    if pid is not None and pid.alive():
        os.kill(pid.pid, signal.SIGTERM)  # dockerd stops its containerd, then itself
        if not wait_until(lambda: not pid.alive(), time.monotonic() + 30):
            kill_and_wait([pid.pid])
    elif running():
        _record().unlink(missing_ok=True)
        return False
    restore(before)
    _record().unlink(missing_ok=True)
    return True


def restore(before: HostState) -> None:
    """Undo what ``dockerd`` did to the host (module docstring): its rules and chains, the
    FORWARD policies, the sysctls, ``docker0``; and the empty tables iptables made where
    the host had none."""
    for tool in ("iptables", "ip6tables"):
        for table in ("filter", "nat", "mangle", "raw"):
            rules = _out([tool, "-w", "5", "-t", table, "-S"]).splitlines()
            for rule in rules:
                if rule.startswith("-A ") and ("DOCKER" in rule or "docker0" in rule):
                    _out([tool, "-w", "5", "-t", table, "-D", *rule.split()[1:]])
            chains = [r.split()[1] for r in rules if r.startswith("-N DOCKER")]
            for flag in ("-F", "-X"):
                for chain in chains:
                    _out([tool, "-w", "5", "-t", table, flag, chain])
        _out([tool, "-w", "5", "-P", "FORWARD", before.forward_policy.get(tool, "ACCEPT")])
    for key, value in before.sysctls.items():
        with contextlib.suppress(OSError):
            (Path("/proc/sys") / key).write_text(value)
    _out(["ip", "link", "delete", "docker0"])
    for table in set(_tables()) - set(before.tables):
        if not _has_rules(table):  # made by iptables for dockerd; nobody's rules in it
            _out(["nft", "delete", "table", *table.split()])


def _tables() -> list[str]:
    """The nftables tables, ``"<family> <name>"`` (none without ``nft``)."""
    lines = _out(["nft", "list", "tables"]).splitlines() if which("nft") else []
    return sorted(" ".join(ln.split()[1:3]) for ln in lines if len(ln.split()) == 3)


def _has_rules(table: str) -> bool:
    listing = _out(["nft", "list", "table", *table.split()]).splitlines()
    return any(ln.strip() and ln.split()[0] not in ("table", "chain", "type", "policy", "}")
               for ln in listing)  # fmt: skip


def _out(cmd: list[str]) -> str:
    """stdout of ``cmd``, empty when it fails or is missing (reads and best-effort undos)."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
