"""What another local user can plant, and what root then does with it (issue 41): run ids
only in their own shape and only from root's own processes; a state root and files in
it that no other user can change; every field of a state or engine file checked.

The planting user is ``nobody`` (``setpriv``); these tests need root, as the tool does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from faultline.cli import main
from faultline.cluster.docker import engine
from faultline.cluster.host import runstate
from faultline.cluster.host.stateroot import state_root
from faultline.errors import SetupError
from tests.unit.cluster.fakes import FakeIp

NOBODY = 65534


@pytest.fixture(autouse=True)
def _root_and_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A state root of the test's own; no real namespace, link, engine or kill is touched."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the findings are about what root does")
    monkeypatch.setenv("FAULTLINE_STATE", str(tmp_path / "state"))
    monkeypatch.setattr(runstate.netns, "run", FakeIp([], [], {}))
    monkeypatch.setattr(engine, "running", lambda: False)
    killed: list[int] = []
    monkeypatch.setattr(runstate, "kill_and_wait", lambda pids, timeout=5.0: killed.extend(pids) or True)
    return killed


def _as_nobody(argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                             "--", *argv], env={"PATH": os.environ["PATH"], **env})


@pytest.fixture
def planted(request: pytest.FixtureRequest) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        p.kill()
        p.wait()


def _wait_as_nobody(pid: int) -> None:
    """Until ``pid`` runs as nobody (setpriv runs as root until it has dropped to it)."""
    deadline = time.monotonic() + 10
    while True:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            status = ""
        uids = next((line.split()[1:] for line in status.splitlines() if line.startswith("Uid:")), [])
        if uids and set(uids) == {str(NOBODY)}:
            return
        assert time.monotonic() < deadline, f"pid {pid} never ran as nobody"
        time.sleep(0.01)


@pytest.mark.parametrize("kind", ["absolute", "relative", "run id"])
def test_another_users_process_names_no_run_for_root_to_remove(
        kind: str, tmp_path: Path, planted: list[subprocess.Popen[bytes]], _root_and_host: list[int]) -> None:
    """Finding 1, critical: a process of nobody's carrying FAULTLINE_RUN=<any path> got
    that path removed by root at the next run's start. Now another user's processes are
    never a run's, and a run id of another shape is no run id."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious").write_text("keep")
    root = state_root()
    run = {"absolute": str(victim), "relative": os.path.relpath(victim, root / "runs"),
           "run id": "abc123"}[kind]
    proc = _as_nobody(["sleep", "30"], {"FAULTLINE_RUN": run, "FAULTLINE_STATE": str(root)})
    planted.append(proc)
    _wait_as_nobody(proc.pid)
    assert runstate.run_processes(state_root()) == {}
    with runstate.locked():
        assert runstate.cleanup_stale() == []
    assert (victim / "precious").read_text() == "keep"
    assert proc.pid not in _root_and_host


def test_an_undumpable_process_of_another_user_is_still_theirs(
        planted: list[subprocess.Popen[bytes]]) -> None:
    """The files in /proc/<pid> of a process that made itself undumpable belong to root:
    who runs it is read from its status (real, effective, saved and filesystem uids)."""
    python = shutil.which("python3", path="/usr/bin:/bin")  # one nobody may run
    assert python, "no system python3"
    code = "import ctypes, time; ctypes.CDLL(None).prctl(4, 0); print('', flush=True); time.sleep(30)"
    proc = subprocess.Popen(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--",
                             python, "-c", code], stdout=subprocess.PIPE,
                            env={"FAULTLINE_RUN": "abc123", "FAULTLINE_STATE": str(state_root())})
    planted.append(proc)
    assert proc.stdout is not None and proc.stdout.readline() == b"\n"  # undumpable now
    assert Path(f"/proc/{proc.pid}/environ").stat().st_uid == 0
    assert "abc123" not in runstate.run_processes()


def test_a_run_id_of_another_shape_is_refused_where_it_is_read(tmp_path: Path) -> None:
    for bad in ("../x", "/", "abc12", "ABC123", "abc1234"):
        with pytest.raises(ValueError, match="is not a run id"):
            runstate.destroy(bad, None)
        r = CliRunner().invoke(main, ["cluster", "down", bad])
        assert r.exit_code == 2 and r.output.strip().splitlines() == [
            f"faultline: error: {bad!r} is not a run id (6 of a-z and 0-9, a letter first)"], r.output
    (state_root() / "runs" / "not-a-run").mkdir(parents=True)
    assert runstate.run_ids() == []


@pytest.mark.parametrize("how", ["owner", "mode", "link", "parent"])
def test_a_state_root_another_user_could_change_is_refused(
        how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Finding 2: /tmp/kafka-faultline was made by whoever came first and trusted. Now a
    root that another user owns or may write, or that is a link, is refused in one line."""
    root = tmp_path / "planted"
    if how == "link":
        (tmp_path / "elsewhere").mkdir()
        root.symlink_to(tmp_path / "elsewhere")
    elif how == "parent":
        (tmp_path / "open").mkdir()
        (tmp_path / "open").chmod(0o777)
        root = tmp_path / "open" / "state"
    else:
        root.mkdir()
        if how == "owner":
            os.chown(root, NOBODY, NOBODY)
        else:
            root.chmod(0o777)
    monkeypatch.setenv("FAULTLINE_STATE", str(root))
    expected = {"owner": f"{root} belongs to uid {NOBODY}", "mode": f"other users can write {root}",
                "link": f"{root} is not a directory", "parent": f"other users can write {root.parent}"}[how]
    with pytest.raises(SetupError, match=expected):
        state_root()
    with pytest.raises(SetupError):
        runstate.locked().__enter__()


def test_a_new_state_root_is_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAULTLINE_STATE", str(tmp_path / "new" / "root"))
    assert state_root().stat().st_mode & 0o777 == 0o700


def test_a_link_in_the_state_root_is_not_followed(tmp_path: Path) -> None:
    """A symlinked lock made root create the file it pointed to."""
    target = tmp_path / "made-by-root"
    (state_root() / "lock").symlink_to(target)
    with pytest.raises(SetupError, match="lock"):
        runstate.locked().__enter__()
    assert not target.exists()


def _plant(directory: str, **fields: object) -> Path:
    d = state_root() / "runs" / directory
    d.mkdir(parents=True)
    state = {"run_id": directory, "subnet": "10.241.7.0/24", "node_ids": [1], "workdir": str(d / "nodes"),
             "owns_workdir": True, "spec": {}, "owner": None, "detached": False, "created_wall_ms": 0,
             "cluster_id": "x", "toxiproxy": None, "toxiproxy_port": 0, "proxy_ports": {}, "nodes": {},
             "paused": []}
    (d / "state.json").write_text(json.dumps({**state, **fields}))
    os.utime(d, (0, 0))  # old: a crashed run's
    return d


def test_a_state_file_is_checked_field_by_field(
        tmp_path: Path, planted: list[subprocess.Popen[bytes]], _root_and_host: list[int]) -> None:
    """A planted state.json with no owner (so stale) made root rmtree its workdir and
    SIGKILL the process it named. Now a workdir it owns is only ever its own directory's,
    a run is only the directory it is in, and only processes of root's are killed."""
    victim = tmp_path / "victim"
    victim.mkdir()
    other = _as_nobody(["sleep", "30"], {})
    planted.append(other)
    _wait_as_nobody(other.pid)
    start = int(Path(f"/proc/{other.pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    _plant("abc123", workdir=str(victim))
    _plant("def456", run_id="zzz999")
    _plant("ghi789", owns_workdir=False, workdir=str(victim), toxiproxy={"pid": other.pid, "start": start})
    states = runstate.load_all()
    assert states["abc123"] is None and states["def456"] is None
    assert states["ghi789"] is not None
    with runstate.locked():
        assert runstate.cleanup_stale() == ["abc123", "def456", "ghi789"]
    assert victim.is_dir()
    assert other.pid not in _root_and_host and other.poll() is None


def test_an_engine_record_names_no_file_to_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """From the code: a dockerd.json with a sysctl key such as ../../etc/cron.d/x let
    `setup --stop-engine` write any file as root. Now a record any of whose values
    HostState.read never gives is no record: nothing is restored, nothing written."""
    ran: list[list[str]] = []
    monkeypatch.setattr(engine, "_out", lambda cmd: ran.append(cmd) or "")
    target = tmp_path / "written-by-root"
    record = {"pid": None, "before": {"forward_policy": {}, "sysctls": {str(target): "1"}, "tables": []}}
    (state_root() / "dockerd.json").write_text(json.dumps(record))
    assert engine.recorded_host_state() is None
    assert engine.stop() is False
    assert not target.exists() and ran == []
    record["before"] = {"forward_policy": {"iptables": "DROP"}, "sysctls": {"net/ipv4/ip_forward": "0"},
                        "tables": ["ip filter"]}
    (state_root() / "dockerd.json").write_text(json.dumps(record))
    assert engine.recorded_host_state() == engine.HostState({"iptables": "DROP"},
                                                            {"net/ipv4/ip_forward": "0"}, ["ip filter"])
