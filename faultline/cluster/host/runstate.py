"""Per-run state on disk, so that a run's leftovers can always be found and removed.

Each local cluster keeps ``<root>/runs/<run-id>/state.json`` (``<root>``: the state root
of :mod:`faultline.cluster.host.stateroot`, a directory only this user can change): its owner
process, network layout, the pids of its JVMs and Toxiproxy and its proxies' ports. It is
written before the first namespace is created and removed after the last one is gone.
Every field of it is checked when read; a file that does not check is no state.

Other engineers' runs share the machine, so a run is only ever removed when it is
*stale*: its owner process is dead (pid and start time, so a reused pid does not count),
or, for a detached run (``faultline cluster up --no-session``), when none of its
processes is left. (A session's cluster is owned by the session process.)
A run's processes are those of this user carrying ``FAULTLINE_RUN=<run-id>`` in their
environment, and their owner's ``FAULTLINE_STATE`` when set: a run whose processes name
another state root is another root's, never a leftover here. Its namespaces and links
are those :mod:`.netns` marks as the run's.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import ipaddress
import json
import os
import random
import shutil
import signal
import stat
import string
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from faultline.cluster.host import cleanups, netns
from faultline.cluster.host.stateroot import ENV as ENV_STATE
from faultline.cluster.host.stateroot import (
    default_root,
    open_private,
    read_private,
    run_id_ok,
    state_root,
)
from faultline.cluster.waiting import wait_until
from faultline.errors import ClusterError, SetupError
from faultline.rundir import write_atomic
from faultline.spec import TestSpec

ENV_RUN = "FAULTLINE_RUN"


def runs_dir() -> Path:
    return state_root() / "runs"


def run_dir(run_id: str) -> Path:
    """A run's state directory; ValueError for a string of another shape than a run id's."""
    if not run_id_ok(run_id):
        raise ValueError(f"{run_id!r} is not a run id")
    return runs_dir() / run_id


@dataclass(frozen=True, slots=True)
class ProcId:
    """A process by pid and kernel start time (clock ticks since boot): pids get reused."""

    pid: int
    start: int

    @classmethod
    def checked(cls, value: Any) -> ProcId | None:
        """A process as ``asdict`` wrote it (None stays None); ValueError for anything else."""
        if value is None:
            return None
        if not isinstance(value, dict):
            raise ValueError(f"{value!r} is no process")
        return cls(_number(value.get("pid"), 1, 2**22), _number(value.get("start"), 0, 2**63 - 1))

    @classmethod
    def of(cls, pid: int) -> ProcId | None:
        start = _start_time(pid)
        return None if start is None else cls(pid, start)

    def alive(self) -> bool:
        """True while this very process exists and is not a zombie."""
        return _start_time(self.pid) == self.start and _state(self.pid) not in ("Z", "X", None)


def _stat(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    return raw[raw.rindex(")") + 2 :].split()


def _start_time(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[19]) if fields else None


def _state(pid: int) -> str | None:
    fields = _stat(pid)
    return fields[0] if fields else None


def wait_state(pid: int, stopped: bool, timeout: float = 5.0) -> bool:
    """Wait until ``pid`` is stopped (SIGSTOP took effect) or running again; signals are
    delivered asynchronously. False if it did not happen (or the process is gone)."""
    def settled() -> bool:
        state = _state(pid)
        return state is None or (state in ("T", "t")) == stopped

    return wait_until(settled, time.monotonic() + timeout) and _state(pid) is not None


@dataclass(slots=True)
class RunState:
    """What ``state.json`` holds; see the module docstring."""

    run_id: str
    subnet: str
    node_ids: list[int]
    workdir: str
    owns_workdir: bool
    spec: dict[str, Any]
    owner: ProcId | None
    detached: bool = False
    created_wall_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    cluster_id: str = ""
    toxiproxy: ProcId | None = None
    toxiproxy_port: int = 0
    proxy_ports: dict[int, int] = field(default_factory=dict)
    nodes: dict[int, ProcId | None] = field(default_factory=dict)
    paused: list[int] = field(default_factory=list)

    @property
    def dir(self) -> Path:
        return run_dir(self.run_id)

    @property
    def layout(self) -> netns.Layout:
        import ipaddress

        return netns.Layout(self.run_id, ipaddress.IPv4Network(self.subnet), tuple(self.node_ids))

    def save(self) -> None:
        """Write atomically (a reader never sees half a file)."""
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomic(self.dir / "state.json", json.dumps(asdict(self), indent=1, sort_keys=True).encode())

    @classmethod
    def load(cls, run_id: str) -> RunState:
        """The state of run ``run_id``; OSError when it has no state file, ValueError when
        a field is not what :meth:`save` writes (the module docstring's checks)."""
        data = json.loads(read_private(run_dir(run_id) / "state.json"))
        if not isinstance(data, dict) or data.get("run_id") != run_id:
            raise ValueError(f"state of run {run_id}: not this run's")
        subnet = ipaddress.IPv4Network(_typed(data, "subnet", str))
        if subnet.prefixlen != 24 or not subnet.subnet_of(netns.SUPERNET):
            raise ValueError(f"state of run {run_id}: subnet {subnet} is no /24 of {netns.SUPERNET}")
        node_ids = [_number(i, 1, 99) for i in _typed(data, "node_ids", list)]
        owns_workdir = _typed(data, "owns_workdir", bool)
        workdir = _typed(data, "workdir", str)
        if (owns_workdir and workdir != str(run_dir(run_id) / "nodes")) or not os.path.isabs(workdir):
            raise ValueError(f"state of run {run_id}: workdir {workdir!r} is not where it would be")
        return cls(
            run_id=run_id,
            subnet=str(subnet),
            node_ids=node_ids,
            workdir=workdir,
            owns_workdir=owns_workdir,
            spec=_typed(data, "spec", dict),
            owner=ProcId.checked(data.get("owner")),
            detached=_typed(data, "detached", bool),
            created_wall_ms=_number(data.get("created_wall_ms"), 0, 2**63 - 1),
            cluster_id=_typed(data, "cluster_id", str),
            toxiproxy=ProcId.checked(data.get("toxiproxy")),
            toxiproxy_port=_number(data.get("toxiproxy_port"), 0, 65535),
            proxy_ports={_number(int(k), 1, 99): _number(v, 1, 65535)
                         for k, v in _typed(data, "proxy_ports", dict).items()},
            nodes={_number(int(k), 1, 99): ProcId.checked(v) for k, v in _typed(data, "nodes", dict).items()},
            paused=[i for i in _typed(data, "paused", list) if _number(i, 1, 99) in node_ids],
        )

    def processes(self) -> list[ProcId]:
        return [p for p in [self.toxiproxy, *self.nodes.values()] if p is not None]

    def is_stale(self) -> bool:
        """True when nobody owns this run any more (module docstring)."""
        if self.detached:
            return not any(p.alive() for p in self.processes())
        return self.owner is None or not self.owner.alive()


def _typed(data: dict[str, Any], key: str, kind: type) -> Any:
    value = data.get(key)
    if type(value) is not kind:
        raise ValueError(f"state field {key}: {type(value).__name__}, not {kind.__name__}")
    return value


def _number(value: Any, low: int, high: int) -> int:
    if type(value) is not int or not low <= value <= high:
        raise ValueError(f"state field: {value!r} is not a number from {low} to {high}")
    return value


@contextlib.contextmanager
def locked() -> Iterator[None]:
    """The machine-wide lock held while runs are created or cleaned up."""
    lock = state_root() / "lock"
    try:
        fd = open_private(lock, os.O_RDWR | os.O_CREAT)
    except OSError as e:
        raise SetupError(f"{lock}: {e.strerror or e}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def new_run_id(taken: set[str]) -> str:
    """Six characters, a letter first: names like ``flk3x9q2-n1`` stay within 15."""
    rng = random.SystemRandom()
    while True:
        rid = rng.choice(string.ascii_lowercase) + "".join(
            rng.choice(string.ascii_lowercase + string.digits) for _ in range(5)
        )
        if rid not in taken:
            return rid


def run_ids() -> list[str]:
    """Every run with a state directory (live or not); other names there are not runs."""
    root = runs_dir()
    if not root.exists():
        return []
    return sorted(p.name for p in root.iterdir()
                  if run_id_ok(p.name) and stat.S_ISDIR(p.lstat().st_mode))  # fmt: skip


def load_all() -> dict[str, RunState | None]:
    """run id -> its state, or None where the state file is missing or unreadable."""
    out: dict[str, RunState | None] = {}
    for rid in run_ids():
        try:
            out[rid] = RunState.load(rid)
        except (OSError, ValueError, KeyError, TypeError):
            out[rid] = None
    return out


def run_processes(root: Path | None = None) -> dict[str, list[int]]:
    """Run id -> pids of every process of this user (but this one) whose ``FAULTLINE_RUN``
    names a run id; with ``root``, only those of runs of that state root (a run's
    processes inherit their owner's ``FAULTLINE_STATE``; without it, theirs is the
    default root). Another user's processes are never a run's, whatever they carry."""
    prefix, state = f"{ENV_RUN}=".encode(), f"{ENV_STATE}=".encode()
    me = os.geteuid()
    found: dict[str, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            env = (entry / "environ").read_bytes()
            uids = _uids(entry)
        except (OSError, ValueError):
            continue
        if uids != {me}:
            continue
        items = env.split(b"\0")
        rid = next((i[len(prefix) :].decode(errors="replace") for i in items if i.startswith(prefix)), None)
        if rid is None or not run_id_ok(rid):
            continue
        theirs = next((i[len(state) :].decode(errors="replace") for i in items if i.startswith(state)),
                      "") or str(default_root())
        if root is None or Path(os.path.abspath(theirs)) == root:
            found.setdefault(rid, []).append(int(entry.name))
    return found


def _mine(pid: int) -> bool:
    """Whether process ``pid`` is this user's alone (and exists)."""
    try:
        return _uids(Path(f"/proc/{pid}")) == {os.geteuid()}
    except (OSError, ValueError):
        return False


def _uids(proc: Path) -> set[int]:
    """The real, effective, saved and filesystem uids of a process (``/proc/<pid>/status``:
    unlike the owner of ``/proc/<pid>``, which is root for any process made undumpable)."""
    for line in (proc / "status").read_text().splitlines():
        if line.startswith("Uid:"):
            return {int(u) for u in line.split()[1:]}
    raise ValueError(f"{proc}/status has no Uid line")


def foreign_runs() -> set[str]:
    """Run ids with processes of another state root than this one's: live runs whose
    state is kept elsewhere, never leftovers for this root's clean-up."""
    everyone = run_processes()
    return set(everyone) - set(run_processes(state_root()))


def kill_and_wait(pids: list[int], timeout: float = 5.0) -> bool:
    """SIGKILL ``pids`` (their process groups are left alone) and wait until they are gone,
    for at most ``timeout`` seconds; False when one was still there then."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    pending = list(pids)

    def gone() -> bool:
        for pid in list(pending):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)  # reap our own children
            if _state(pid) in (None, "Z", "X"):
                pending.remove(pid)
        return not pending

    return wait_until(gone, time.monotonic() + timeout)


def destroy(run_id: str, state: RunState | None) -> None:
    """Remove everything of one run: processes, namespaces, links, its files.

    Never raises for something already gone; safe to call twice or concurrently.
    ValueError for a ``run_id`` of another shape than a run id's.
    """
    directory = run_dir(run_id)
    pids = {p.pid for p in (state.processes() if state else []) if p.alive() and _mine(p.pid)}
    pids.update(run_processes().get(run_id, ()))
    kill_and_wait(sorted(pids))
    # Names are this run's by its state directory (claim picked an id no name had) or,
    # without one, by their mark.
    recorded = directory.is_dir()
    namespaces = [ns for ns in netns.list_namespaces() if netns.owner_run_id(ns) == run_id] \
        if recorded else [ns for ns, rid in netns.owned_namespaces().items() if rid == run_id]
    for cmd in netns.teardown_commands(namespaces, []):
        netns.run(cmd, check=False)
    links = [link for link in netns.list_links() if netns.owner_run_id(link) == run_id] \
        if recorded else [link for link, rid in netns.owned_links().items() if rid == run_id]
    for cmd in netns.teardown_commands([], links):
        netns.run(cmd, check=False)
    cleanups.clean_up_run(run_id)  # what a backend alone finds: a docker run's containers, network
    shutil.rmtree(directory, ignore_errors=True)  # an owned workdir is in it (RunState.load)


def claim(spec: TestSpec, node_ids: list[int], workdir: Path | None) -> RunState:
    """Pick a run id and a free /24 for a new cluster of ``spec`` and record them (its
    nodes' files under ``workdir``, or in the run's own state directory when None);
    call with :func:`locked` held. ClusterError when no /24 is left."""
    states = load_all()
    claimed = [ipaddress.IPv4Network(s.subnet) for s in states.values() if s is not None]
    free = netns.free_subnets([*netns.used_networks(), *claimed])
    if not free:
        raise ClusterError(f"no free /24 left in {netns.SUPERNET}")
    named = {netns.owner_run_id(n) for n in netns.list_namespaces() + netns.list_links()}
    run_id = new_run_id(set(states) | set(run_processes()) | {rid for rid in named if rid})
    state = RunState(
        run_id=run_id,
        subnet=str(random.SystemRandom().choice(free)),
        node_ids=node_ids,
        workdir=str(workdir if workdir is not None else runs_dir() / run_id / "nodes"),
        owns_workdir=workdir is None,
        spec=spec.to_json(),
        owner=ProcId.of(os.getpid()),
        cluster_id=base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="),
    )
    state.save()
    return state


def cleanup_stale() -> list[str]:
    """Remove every stale run and every orphan (a marked namespace or link, or a process,
    of a run without state).

    Returns the run ids removed. Live runs of other processes are never touched, nor
    are runs with processes of another state root (``FAULTLINE_STATE``): their state is
    not here. Call with :func:`locked` held.
    """
    removed = []
    states = load_all()
    now = time.time()
    live: set[str] = set()
    for rid, state in states.items():
        if state is None:
            # No readable state: a run that crashed while being created, or one being
            # created right now (its state appears within milliseconds, under the lock
            # we hold, so an old directory is the only case), or one whose own teardown
            # (not under the lock) removed it since it was listed: nothing is left of it.
            try:
                age = now - (runs_dir() / rid).stat().st_mtime
            except FileNotFoundError:
                continue
            if age < 60:
                live.add(rid)
                continue
        elif not state.is_stale():
            live.add(rid)
            continue
        destroy(rid, state)
        removed.append(rid)
    foreign = foreign_runs()
    orphans = {*netns.owned_namespaces().values(), *netns.owned_links().values()}
    orphans |= set(run_processes(state_root()))
    for rid in sorted(r for r in orphans if r and r not in live | foreign and r not in removed):
        destroy(rid, None)
        removed.append(rid)
    return removed
