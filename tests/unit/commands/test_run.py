"""`faultline run`: spec building, option validation, the run directory."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from faultline.cli import main
from faultline.errors import SpecError
from faultline.run import runner
from faultline.run.runner import RunOutcome
from faultline.rundir import new_run_dir
from faultline.spec import TestSpec, build_spec
from faultline.workloads.clients import WorkloadStats, decode_value
from faultline.yamlfile import MAX_YAML_BYTES, MAX_YAML_NODES, read_yaml_mapping


def test_defaults_are_the_default_test() -> None:
    spec = build_spec(None, {})
    assert (spec.kafka.nodes, spec.producer.acks, spec.topic.min_insync_replicas) == (3, "all", 2)
    assert spec.producer.enable_idempotence and spec.nemesis.faults == ()


def test_options_override_the_file(tmp_path: Path) -> None:
    f = tmp_path / "spec.yaml"
    f.write_text("name: from-file\ntopic:\n  partitions: 5\n  min_insync_replicas: 1\n"
                 "start_wall_ms: 123\n")
    spec = build_spec(f, {"topic": {"partitions": 2, "min_insync_replicas": None},
                          "nemesis": {"faults": ["kill"]}})
    assert spec.name == "from-file"
    assert (spec.topic.partitions, spec.topic.min_insync_replicas) == (2, 1)
    assert spec.nemesis.faults == ("kill",)
    assert spec.start_wall_ms == 0


@pytest.mark.parametrize(("args", "message"), [
    (["--min-insync", "4"], "--min-insync must be between 1 and the replication factor 3, not 4"),
    (["--replication-factor", "5"], "--replication-factor must be between 1 and the node count"),
    (["--acks", "1", "--idempotence"], "pass --no-idempotence"),
    (["--retries", "0", "--idempotence"], "pass --no-idempotence"),
    (["--nodes", "2"], "--nodes must be 1, 3 or 5"),
    (["--nemesis", "kill,flood"], "unknown fault(s) flood"),
    (["--time-limit", "0"], "--time-limit must be positive"),
])
def test_a_bad_option_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["run", *args])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.output


def test_the_readmes_run_command_runs_without_idempotence(tmp_path: Path,
                                                          runs: list[TestSpec]) -> None:
    """Issue 34: ``--acks 1`` alone was refused ("pass --no-idempotence"), so the README's
    own example failed; as Kafka's producer, an unset idempotence is off where acks is not all."""
    readme = (Path(__file__).parents[3] / "README.md").read_text(encoding="utf-8")
    (line,) = [x for x in readme.splitlines() if x.startswith("faultline run --acks 1 ")]
    result = CliRunner().invoke(main, [*line.split()[1:], "--results", str(tmp_path)])
    assert result.exit_code == 0, result.output
    (spec,) = runs
    assert (spec.producer.acks, spec.producer.enable_idempotence) == ("1", False)


@pytest.mark.parametrize(("producer", "idempotent"), [
    ({}, True), ({"acks": "0"}, False), ({"acks": 1}, False), ({"retries": 0}, False),
    ({"max_in_flight": 6}, False), ({"acks": "all", "max_in_flight": 1}, True),
    ({"acks": "1", "enable_idempotence": False}, False),
])
def test_an_unset_idempotence_is_on_only_where_the_other_settings_allow_it(
        tmp_path: Path, producer: dict[str, Any], idempotent: bool) -> None:
    f = tmp_path / "spec.yaml"
    f.write_text(yaml.safe_dump({"producer": producer}))
    assert build_spec(f, {}).producer.enable_idempotence is idempotent


def test_idempotence_set_against_acks_is_one_line(tmp_path: Path) -> None:
    f = tmp_path / "spec.yaml"
    f.write_text("producer:\n  enable_idempotence: true\n")
    with pytest.raises(SpecError, match=r"^idempotence needs acks=all, retries > 0 and "
                                        r"max_in_flight between 1 and 5; .*--no-idempotence"):
        build_spec(f, {"producer": {"acks": "1"}})


def test_bad_yaml_names_the_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("topic: [\n")
    with pytest.raises(SpecError, match=r"bad\.yaml: not valid YAML \(line 2\)"):
        build_spec(f, {})


def test_run_dir_and_latest(tmp_path: Path) -> None:
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    a = new_run_dir(tmp_path, "t", now)
    b = new_run_dir(tmp_path, "t", now)
    assert a == tmp_path / "t" / "20260102T030405Z"
    assert b == tmp_path / "t" / "20260102T030405Z-1"
    assert (tmp_path / "latest").resolve() == b.resolve()
    assert not (tmp_path / "latest").readlink().is_absolute()


@pytest.mark.parametrize(("valid", "error", "code"), [
    (True, None, 0), (False, None, 1), ("unknown", None, 2), (None, None, 2), (True, "boom", 2),
])
def test_exit_codes(valid: bool | str | None, error: str | None, code: int) -> None:
    outcome = RunOutcome(Path("."), valid, WorkloadStats(), error=error)  # type: ignore[arg-type]
    assert outcome.exit_code == code


@pytest.mark.parametrize(("raw", "value"), [
    (b"17", 17), (b"0", 0), (b"007", "007"), (b"-3", "-3"), (b" 1", " 1"), (b"x", "x"),
    (b"\xff", "\\xff"), (None, None), ("٣".encode(), "٣"), (b"1_000", "1_000"), (b"", ""),
    (b"12\n", "12\n"), (b"+5", "+5"), (b"9223372036854775807", 2**63 - 1),
    (b"9223372036854775808", "9223372036854775808"),  # past a send's values (and the journal's)
])
def test_record_values(raw: bytes | None, value: int | str | None) -> None:
    assert decode_value(raw) == value


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[TestSpec]:
    """The specs `faultline run` went on to run: run_test is replaced by a recorder, so a
    bad input that got through shows here instead of starting a cluster."""
    seen: list[TestSpec] = []

    def record(spec: TestSpec, **_: object) -> RunOutcome:
        seen.append(spec)
        return RunOutcome(tmp_path, True, WorkloadStats())

    monkeypatch.setattr(runner, "run_test", record)
    return seen


def _one_error_line(result: Result) -> str:
    """The single line a bad input gives, after checking exit code 2 and nothing else."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("faultline: error: "), result.output
    return lines[0]


@pytest.mark.parametrize(("text", "message"), [
    ("topic:\n  partitons: 3\n", "topic: unknown key(s) partitons; known: min_insync_replicas, name"),
    ("bogus: 1\nname: x\n", "unknown key(s) bogus; known: backend, consumer, kafka"),
    ("- kill\n- partition\n", "expected a mapping of spec keys, got list"),
    ("topic: 5\n", "topic: expected a mapping, got int"),
    ("topic:\n  partitions: three\n", "topic.partitions: expected an integer, got 'three'"),
    ("kafka:\n  nodes: true\n", "kafka.nodes: expected an integer, got True"),
    ('time_limit_s: "60"\n', "time_limit_s: expected a number, got '60'"),
    ("producer:\n  enable_idempotence: yes please\n", "enable_idempotence: expected true or false"),
    ("topic: [\n", "not valid YAML (line 2)"),
    ("kafka: !!python/object:os.system {}\n", "not valid YAML (line 1): could not determine a constructor"),
    # found by review: PyYAML kept the last of two values, so another config than the one read ran
    ("producer:\n  acks: 1\n  acks: all\n", "not valid YAML (line 3): duplicate key 'acks'"),
    ("name: a\ntopic: {partitions: 3}\nname: b\n", "not valid YAML (line 3): duplicate key 'name'"),
    # found by review: str() took anything (a topic named "None"), and a float inf or nan
    ("topic:\n  name: null\n", "topic.name: expected a string, got None"),
    ("topic:\n  name: [a, b]\n", "topic.name: expected a string, got ['a', 'b']"),
    ("time_limit_s: .inf\n", "time_limit_s: expected a finite number, got inf"),
    ("workload:\n  rate: .nan\n", "workload.rate: expected a finite number, got nan"),
    # found by review: a broker setting left empty went to server.properties as "None"
    ("kafka:\n  broker_config:\n    log.flush.interval.ms:\n",
     "kafka.broker_config.log.flush.interval.ms: expected a string, number or boolean, got None"),
    ("kafka:\n  broker_config:\n    a: [1, 2]\n", "kafka.broker_config.a: expected a string, number"),
])
def test_a_bad_spec_file_is_one_line_naming_it(tmp_path: Path, runs: list[TestSpec], text: str,
                                               message: str) -> None:
    f = tmp_path / "spec.yaml"
    f.write_text(text)
    line = _one_error_line(CliRunner().invoke(main, ["run", "-f", str(f)]))
    assert str(f) in line and message in line, line
    assert runs == []


@pytest.mark.parametrize(("text", "message"), [
    ("nemesis:\n  faults: [kill, flood]\n", "unknown fault(s) flood"),
    ("topic:\n  min_insync_replicas: 4\n", "--min-insync must be between 1 and the replication factor 3"),
    # found by review: any partition count passed, past what Kafka creates and the checker counts
    ("topic:\n  partitions: 100000\n", "--partitions must be between 1 and 10000, not 100000"),
    # found by review: topic names Kafka refuses passed, to fail once the cluster was up
    ("topic:\n  name: café\n", "topic name 'café' may hold only ASCII letters"),
    ("topic:\n  name: '..'\n", "topic name '..' may hold only ASCII letters"),
    (f"topic:\n  name: {'t' * 250}\n", "(at most 249, not only dots)"),
    # found by review: timeouts the clients refuse passed, and the producers died at start
    ("producer:\n  linger_ms: -1\n", "producer timeouts: request_timeout_ms must be 1 to 900000"),
    ("producer:\n  request_timeout_ms: 0\n", "not 0, 5 and 10000"),
    ("producer:\n  delivery_timeout_ms: 3000\n", "not 3000, 5 and 3000"),
    # found by review: a test named .. put its run beside results/, not in it
    ("name: '..'\n", "test name '..' may hold only letters, digits, '.', '_' and '-' (not only dots)"),
    # found by review: a seed past 64 bits passed, which test.json (orjson) and the
    # pipeline's int64 seed column cannot hold
    (f"seed: {2**64}\n", f"--seed must be between 0 and {2**63 - 1}, not {2**64}"),
    # found by review: librdkafka refuses more in flight, once the cluster is up
    ("producer:\n  enable_idempotence: false\n  max_in_flight: 1000001\n",
     "producer.max_in_flight must be between 1 and 1000000, not 1000001"),
    ("kafka:\n  version: latest\n", "--kafka-version must look like 4.3.1, not 'latest'"),
    # issue 41: a line break in a broker setting wrote a setting of its own into server.properties
    ('kafka:\n  broker_config:\n    log.dir: "x\\r\\nzookeeper.connect=evil"\n',
     "kafka.broker_config.log.dir: 'x\\r\\nzookeeper.connect=evil' holds a control character"),
    ('kafka:\n  broker_config:\n    log.dir: "x\\rcontrolled.shutdown.enable=false"\n',
     "kafka.broker_config.log.dir: 'x\\rcontrolled.shutdown.enable=false' holds a control character"),
    ('kafka:\n  broker_config:\n    log.dir: "x\\x00"\n', "log.dir: 'x\\x00' holds a control character"),
    ('kafka:\n  broker_config:\n    "a\\nb": x\n',
     "kafka.broker_config: 'a\\nb' is not a Kafka setting name"),
    ('kafka:\n  broker_config:\n    "a=b": x\n', "kafka.broker_config: 'a=b' is not a Kafka setting name"),
    ('kafka:\n  broker_config:\n    "#a": x\n', "kafka.broker_config: '#a' is not a Kafka setting name"),
])
def test_a_spec_file_with_bad_values_is_one_line(tmp_path: Path, runs: list[TestSpec], text: str,
                                                 message: str) -> None:
    """Whole-spec checks name the option that sets the value, the file's or not."""
    f = tmp_path / "spec.yaml"
    f.write_text(text)
    assert message in _one_error_line(CliRunner().invoke(main, ["run", "-f", str(f)]))
    assert runs == []


def test_a_spec_file_that_is_not_text_is_one_line(tmp_path: Path, runs: list[TestSpec]) -> None:
    f = tmp_path / "spec.yaml"
    f.write_bytes(b"\x89PNG\r\n\x1a\n\x00")
    line = _one_error_line(CliRunner().invoke(main, ["run", "-f", str(f)]))
    assert line == f"faultline: error: {f}: not UTF-8 text (byte 0)"
    assert runs == []


@pytest.mark.parametrize(("args", "message"), [
    (["-f", "no-such.yaml"], "Invalid value for '-f' / '--spec': File 'no-such.yaml' does not exist."),
    (["-f", "."], "is a directory"),
    (["--nodes", "three"], "Invalid value for '--nodes': 'three' is not a valid integer."),
    (["--acks", "2"], "Invalid value for '--acks': '2' is not one of"),
    (["--partitons", "3"], "No such option '--partitons'"),
    (["--nemesis", "none,kill"], "unknown fault(s) none"),
    (["--seed", str(2**63)], f"--seed must be between 0 and {2**63 - 1}, not {2**63}"),
    (["--seed", "-1"], "--seed must be between 0 and"),
    # found by review: a schedule of faults this close never ended (its starts, in whole
    # milliseconds, rounded back onto each other), built once the cluster was up
    (["--nemesis", "kill", "--interval", "0.0001"], "--interval must be at least 0.01, not 0.0001"),
    (["--nemesis", "kill", "--interval", "1", "--time-limit", "600000"],
     "--interval must be at least --time-limit / 100000 (6) with faults, not 1.0"),
    (["--time-limit", "1e20"], "--time-limit must be positive and at most 604800 (a week), not 1e+20"),
    # found by review: librdkafka reads retries modulo 2**32, so 2**32 ran as 0 retries
    # while test.json and the checker said 2**32
    (["--retries", str(2**32)], f"--retries must be between 0 and {2**31 - 1}, not {2**32}"),
    # found by review: refused only by the cluster's start, after the run directory was made
    (["--kafka-version", "4.3"], "--kafka-version must look like 4.3.1, not '4.3'"),
    # issue 41: docker read an image named like an option as its option
    (["--image=--privileged"], "--image '--privileged' is not a docker image reference"),
    (["--image", "-x"], "--image '-x' is not a docker image reference"),
    (["--image", "Faultline/Kafka"], "--image 'Faultline/Kafka' is not a docker image reference"),
    (["--image", "kafka:4.3.1\n-x"], "--image 'kafka:4.3.1\\n-x' is not a docker image reference"),
    (["--image", "kafka latest"], "--image 'kafka latest' is not a docker image reference"),
    (["--image", "kafka@sha256:00"], "--image 'kafka@sha256:00' is not a docker image reference"),
])
def test_a_bad_command_line_is_one_line(runs: list[TestSpec], args: list[str], message: str) -> None:
    line = _one_error_line(CliRunner().invoke(main, ["run", *args]))
    assert message in line, line
    assert runs == []


@pytest.mark.parametrize("name", [
    "faultline/kafka:4.3.1", "kafka", "apache/kafka:4.1.0-rc2", "localhost:5000/team/kafka_x__y-z",
    "registry.example.com/a/b/c:v1.2", f"kafka@sha256:{'a' * 64}", f"[::1]:5000/kafka:1@sha256:{'0' * 64}",
    "e3b0c44298fc", f"sha256:{'e3' * 32}",
])
def test_a_docker_image_reference_is_taken(name: str) -> None:
    assert build_spec(None, {"kafka": {"image": name}}).kafka.image == name


def test_the_largest_seed_runs(tmp_path: Path, runs: list[TestSpec]) -> None:
    """2**63 - 1 is a seed (test.json and the pipeline's int64 column hold it); 2**63 is not."""
    result = CliRunner().invoke(main, ["run", "--seed", str(2**63 - 1), "--results", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert [spec.seed for spec in runs] == [2**63 - 1]


@pytest.fixture
def no_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real run_test up to its cluster, which is refused: what happens before it shows."""
    def refuse(spec: TestSpec) -> None:
        raise AssertionError("a cluster would start")

    monkeypatch.setattr(runner, "cluster_for", lambda spec: refuse)


@pytest.mark.usefixtures("no_cluster")
def test_a_results_directory_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    """Found by review: ``--results`` under a file (or on a read-only disk) ended in a
    traceback, "internal error"."""
    (tmp_path / "file").write_text("x")
    line = _one_error_line(CliRunner().invoke(main, ["run", "--results", str(tmp_path / "file" / "r")]))
    assert line == f"faultline: error: {tmp_path / 'file' / 'r' / 'queue'}: cannot make the run directory: " \
                   "Not a directory"


@pytest.mark.usefixtures("no_cluster")
def test_a_latest_that_is_no_link_is_one_line_and_left_alone(tmp_path: Path) -> None:
    """Found by review: a ``results/latest`` that is a directory (not the link) ended in a
    traceback, leaving an empty run directory and the temporary link behind."""
    (tmp_path / "latest").mkdir()
    line = _one_error_line(CliRunner().invoke(main, ["run", "--results", str(tmp_path)]))
    assert line == f"faultline: error: {tmp_path / 'latest'}: cannot point it at the new run: Is a directory"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["latest", "queue"]


@pytest.mark.usefixtures("no_cluster")
def test_a_test_named_latest_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    """Found by review: a test named ``latest`` made its run directory inside the newest
    run's (through the link) and left ``results/latest`` a link to itself."""
    before = new_run_dir(tmp_path, "t")
    line = _one_error_line(CliRunner().invoke(main, ["run", "--name", "latest", "--results", str(tmp_path)]))
    assert "test name 'latest' is taken" in line
    assert (tmp_path / "latest").resolve() == before.resolve() and list(before.iterdir()) == []


def test_an_unknown_command_is_one_line() -> None:
    assert "No such command 'rum'" in _one_error_line(CliRunner().invoke(main, ["rum"]))


def test_nemesis_none_runs_without_faults(tmp_path: Path, runs: list[TestSpec]) -> None:
    f = tmp_path / "spec.yaml"
    f.write_text("nemesis:\n  faults: [kill, partition]\n")
    result = CliRunner().invoke(main, ["run", "-f", str(f), "--nemesis", "none", "--results", str(tmp_path)])
    assert result.exit_code == 0, result.output
    (spec,) = runs
    assert spec.nemesis.faults == ()


def test_a_merge_key_is_no_duplicate_and_its_keys_may_be_overridden(tmp_path: Path,
                                                                  runs: list[TestSpec]) -> None:
    """``<<:`` (``<<: *base``: YAML's way of sharing settings), given twice or with a key
    of what it merges given again, is no key given twice."""
    f = tmp_path / "spec.yaml"
    f.write_text("producer:\n  <<: {acks: '1', linger_ms: 7}\n  <<: {retries: 3}\n  acks: all\n")
    result = CliRunner().invoke(main, ["run", "-f", str(f), "--results", str(tmp_path)])
    assert result.exit_code == 0, result.output
    (spec,) = runs
    assert (spec.producer.acks, spec.producer.linger_ms, spec.producer.retries) == ("all", 7, 3)


@pytest.mark.parametrize("raised", [RuntimeError("a bug"), KeyError("x")])
def test_a_crash_exits_2_not_1_which_says_invalid(monkeypatch: pytest.MonkeyPatch,
                                                  raised: Exception) -> None:
    """Found by review: an exception that is no FaultlineError (a client error the workload
    let through, a bug) ended in a traceback and exit 1, the code for a violation."""
    import faultline.run.runner as runner

    def crash(*args: object, **kwargs: object) -> None:
        raise raised

    monkeypatch.setattr(runner, "run_test", crash)
    result = CliRunner().invoke(main, ["run"])
    assert result.exit_code == 2
    assert f"faultline: internal error: {type(raised).__name__}" in result.output


def test_a_report_that_fails_for_any_reason_leaves_the_verdict(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Found by review: a report bug (not a FaultlineError) escaped run_test after
    results.json said valid, and the traceback's exit 1 said invalid."""
    import faultline.report.page as page
    from faultline.run.runner import _report

    def broken(run_dir: Path) -> Path:
        raise ValueError("a report bug")

    monkeypatch.setattr(page, "build_report", broken)
    assert _report(tmp_path) is None


@pytest.mark.parametrize("args", [["--help"], ["run", "--help"], ["check", "-h"], ["cluster", "--help"],
                                  ["cluster", "up", "--help"], ["--version"]])
def test_help_and_version_exit_0_without_a_traceback(args: list[str]) -> None:
    """Found in use: click ends ``--help`` of a command with ``Exit(0)``, which is no
    ClickException, and was taken for a bug (a traceback, "internal error", exit 2)."""
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output
    assert "Usage:" in result.output or "version" in result.output


def test_python_dash_m_faultline_cli_runs_the_cli() -> None:
    """Found in use: ``python -m faultline.cli --help`` printed nothing and exited 0."""
    done = subprocess.run([sys.executable, "-m", "faultline.cli", "--help"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0 and "Usage:" in done.stdout, done.stderr


@pytest.mark.parametrize(("args", "work"), [
    (["setup", "--kafka-version", "bogus"], "faultline.commands.setup:run_setup"),
    (["doctor", "--kafka-version", "bogus"], "faultline.commands.doctor:run_doctor"),
    (["cluster", "up", "--kafka-version", "bogus"], "faultline.run.session:start"),
    (["hunt", "--kafka-version", "bogus"], "faultline.commands.hunt:hunt"),
    (["hunt", "--safe-version", "bogus"], "faultline.commands.hunt:hunt"),
])
def test_a_bad_kafka_version_is_refused_before_any_work(monkeypatch: pytest.MonkeyPatch,
                                                        args: list[str], work: str) -> None:
    """Found by review: only the Maven download refused it, after the set-up had installed
    packages, the doctor had built a test network, or a cluster or session had started."""
    import importlib

    module, name = work.split(":")
    started: list[object] = []
    monkeypatch.setattr(importlib.import_module(module), name, lambda *a, **k: started.append(a))
    option = args[-2]
    line = _one_error_line(CliRunner().invoke(main, args))
    assert line == f"faultline: error: {option} must look like 4.3.1, not 'bogus'"
    assert started == []


def alias_bomb(levels: int) -> str:
    """A spec whose ``nemesis.faults`` is 9**levels items in a few hundred bytes: each list
    nine aliases of the one before."""
    lists = ["- &l0 [kill, kill, kill, kill, kill, kill, kill, kill, kill]"]
    lists += [f"- &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "nemesis:\n  faults:\n" + "".join(f"    {line}\n" for line in lists)


@pytest.mark.parametrize("levels", [6, 9])
def test_a_yaml_alias_bomb_is_refused_before_it_is_expanded(tmp_path: Path, levels: int) -> None:
    """Found by review: 600 bytes of aliases under ``nemesis.faults`` took 25 s and 2.2 GB
    before a MemoryError."""
    f = tmp_path / "spec.yaml"
    f.write_text(alias_bomb(levels))
    assert len(f.read_bytes()) < 700
    with pytest.raises(SpecError, match=rf"^{f}: stands for more than {MAX_YAML_NODES} YAML nodes, its "
                                        r"aliases expanded: not a spec written by hand$"):
        build_spec(f, {})


def test_a_yaml_merge_key_bomb_is_refused_and_a_merge_key_still_counts_once(tmp_path: Path) -> None:
    """``<<: [*a, *a]`` doubles what it merges: eighteen of them stand for 2**18 keys."""
    f = tmp_path / "m.yaml"
    f.write_text("a0: &a0 {x: 1, y: 2}\n" + "".join(
        f"a{i}: &a{i} {{<<: [*a{i - 1}, *a{i - 1}]}}\n" for i in range(1, 18)))
    with pytest.raises(SpecError, match=rf"stands for more than {MAX_YAML_NODES} YAML nodes"):
        read_yaml_mapping(f, "a mapping")
    f.write_text("base: &base {acks: '1', linger_ms: 7}\nproducer: {<<: *base, retries: 3}\n")
    assert read_yaml_mapping(f, "a mapping")["producer"] == {"acks": "1", "linger_ms": 7, "retries": 3}


@pytest.mark.parametrize(("text", "message"), [
    ("nemesis:\n  faults: &a [kill, *a]\n", "an alias inside the node it names (line 2)"),
    ("name: " + "[" * 1000 + "]" * 1000 + "\n", "nested too deep: not a spec written by hand"),
    ("#" * MAX_YAML_BYTES + "\n", f"longer than {MAX_YAML_BYTES} bytes: not a spec written by hand"),
    ("nemesis:\n  faults: [kill, [pause]]\n", "nemesis.faults[1]: expected a string, got a list of 1"),
    ("nemesis:\n  schedule: [{crash: leader}]\n",
     "nemesis.schedule[0]: expected a string, got a mapping of 1"),
])
def test_a_spec_file_no_one_writes_by_hand_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    """Found by review: such files ran forever, crashed with a traceback (RecursionError),
    or had their lists' lists read as names (``unknown fault(s) ['pause']``)."""
    f = tmp_path / "spec.yaml"
    f.write_text(text)
    result = CliRunner().invoke(main, ["run", "-f", str(f)])
    assert result.exit_code == 2 and result.output.endswith(f"{message}\n"), result.output
    assert len(result.output.splitlines()) == 1
