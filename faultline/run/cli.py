"""``faultline run``: build a TestSpec from options and an optional YAML file, run it.

Precedence: defaults < the YAML file (``--spec``, the shape of ``test.json``) < the
options given on the command line. The spec is validated once, as a whole, so every
mistake is one line naming the option (``--min-insync must be between 1 and the
replication factor 3, not 4``) and exit code 2.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
import yaml
from rich.console import Console

from faultline.errors import SpecError
from faultline.spec import ACKS, FAULTS, TestSpec


def build_spec(spec_file: Path | None, overrides: Mapping[str, Any]) -> TestSpec:
    """The spec from ``spec_file`` (YAML or JSON; may be None) with ``overrides`` (nested
    like ``test.json``, None values ignored) merged on top; raises SpecError."""
    base: dict[str, Any] = {}
    source = "options"
    if spec_file is not None:
        source = str(spec_file)
        base = read_yaml_mapping(spec_file, "a mapping of spec keys")
    merged = _merge(base, overrides)
    merged.pop("start_wall_ms", None)  # set when the run starts
    return TestSpec.from_mapping(merged, source=source)


class _UniqueKeys(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a mapping that gives a key twice (PyYAML keeps the
    last value: the user would run another config than the one they read)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # ``<<: *base``: its keys may be overridden
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                again = key in seen
            except TypeError:  # unhashable: the safe loader's own error names it
                continue
            if again:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}",
                                                        key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


#: The longest YAML file read (a spec or a matrix by hand is a few KB).
MAX_YAML_BYTES = 1 << 20
#: The most nodes a YAML file may stand for, an alias counting as all of what it names
#: (a spec or a matrix by hand has a few hundred): a few hundred bytes of aliases of
#: aliases can stand for billions, which whatever walks them would expand.
MAX_YAML_NODES = 100_000


def read_yaml_mapping(path: Path, expected: str) -> dict[str, Any]:
    """The YAML mapping in ``path`` (an empty file is an empty mapping); one SpecError line
    naming the file (and the line, for a YAML error or a key given twice in one mapping)
    when it is unreadable or no mapping, longer than :data:`MAX_YAML_BYTES`, or standing
    for more than :data:`MAX_YAML_NODES` nodes (counted before anything is built from it).
    Every YAML file the project reads is read here."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_YAML_BYTES + 1)
        if len(raw) > MAX_YAML_BYTES:
            raise SpecError(f"{path}: longer than {MAX_YAML_BYTES} bytes: not a spec written by hand")
        loader = _UniqueKeys(raw.decode("utf-8"))
        try:
            node = loader.get_single_node()
            if node is not None:
                _count(path, node, {})
            data = (loader.construct_document(node) if node is not None else None) or {}
        finally:
            loader.dispose()
    except OSError as e:
        raise SpecError(f"{path}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise SpecError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except RecursionError:
        raise SpecError(f"{path}: nested too deep: not a spec written by hand") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise SpecError(f"{path}: not valid YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected {expected}, got {type(data).__name__}")
    return data


def _count(path: Path, node: yaml.Node, counted: dict[int, int]) -> int:
    """How many nodes ``node`` stands for, an alias (a node met again) as many as what it
    names; ``counted`` holds what is known by node id, -1 for a node being counted. A
    SpecError past :data:`MAX_YAML_NODES`, or for a node that holds an alias of itself."""
    if isinstance(node, yaml.ScalarNode):
        return 1
    known = counted.get(id(node))
    if known == -1:
        raise SpecError(f"{path}: an alias inside the node it names (line {node.start_mark.line + 1})")
    if known is not None:
        return known
    counted[id(node)] = -1
    inner = node.value if isinstance(node, yaml.SequenceNode) else [n for pair in node.value for n in pair]
    total = 1 + sum(_count(path, n, counted) for n in inner)
    if total > MAX_YAML_NODES:
        raise SpecError(f"{path}: stands for more than {MAX_YAML_NODES} YAML nodes, its aliases "
                        "expanded: not a spec written by hand")
    counted[id(node)] = total
    return total


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if v is None:
            continue
        if isinstance(v, Mapping):
            inner = out.get(k, {})
            # a section the file got wrong (``topic: 5``) stays, for validation to name it
            out[k] = _merge(inner, v) if isinstance(inner, Mapping) else inner
        else:
            out[k] = v
    return out


@click.command("run")
@click.option("-f", "--spec", "spec_file", type=click.Path(exists=True, dir_okay=False,
              path_type=Path), help="A YAML (or test.json) spec; options override it.")
@click.option("--name", help="Test name: results go to RESULTS/<name>/<timestamp>/.")
@click.option("--acks", type=click.Choice(ACKS), help="Producer acks.  [default: all]")
@click.option("--min-insync", type=int, help="Topic min.insync.replicas.  [default: 2]")
@click.option("--replication-factor", type=int, help="Topic replication factor.  [default: 3]")
@click.option("--partitions", type=int, help="Topic partitions.  [default: 3]")
@click.option("--unclean/--no-unclean", default=None,
              help="unclean.leader.election.enable.  [default: off]")
@click.option("--idempotence/--no-idempotence", default=None,
              help="Producer enable.idempotence (needs acks=all and retries > 0).  "
                   "[default: on where those hold, as Kafka's producer]")
@click.option("--retries", type=int,
              help="Producer retries; 0 lets definite rejections end as fail.  "
                   "[default: 2147483647]")
@click.option("--time-limit", type=float, help="Seconds of main phase.  [default: 60]")
@click.option("--rate", type=float, help="Target sends per second, 0: as fast as it goes.  "
                                         "[default: 0]")
@click.option("--client", type=click.Choice(("librdkafka", "java")),
              help="The client under test.  [default: librdkafka]")
@click.option("--producers", type=int, help="Producer clients.  [default: 2]")
@click.option("--consumers", type=int, help="Consumer clients.  [default: 1]")
@click.option("--seed", type=int, help="Seed of the nemesis schedule.  [default: 0]")
@click.option("--kafka-version", help="Apache Kafka version.")
@click.option("--nodes", type=int, help="Kafka nodes: 1, 3 or 5.  [default: 3]")
@click.option("--backend", type=click.Choice(["local", "docker"]),
              help="Nodes as JVMs in network namespaces, or as containers.  [default: local]")
@click.option("--image", help="The docker backend's image.  [default: faultline/kafka:<version>]")
@click.option("--nemesis", "nemesis", metavar="FAULTS",
              help=f"Comma-separated faults, or none. Known: {', '.join(FAULTS)}.  "
                   "[default: none]")
@click.option("--interval", type=float, help="Seconds between faults.  [default: 10]")
@click.option("--max-concurrent", type=int,
              help="At most this many faults held at once.  [default: 1]")
@click.option("--results", "results", type=click.Path(file_okay=False, path_type=Path),
              default=Path("results"), show_default=True, help="Results directory.")
def run(spec_file: Path | None, name: str | None, acks: str | None, min_insync: int | None,
        replication_factor: int | None, partitions: int | None, unclean: bool | None,
        idempotence: bool | None, retries: int | None, time_limit: float | None,
        rate: float | None, client: str | None, producers: int | None, consumers: int | None,
        seed: int | None, kafka_version: str | None, nodes: int | None, backend: str | None,
        image: str | None, nemesis: str | None,
        interval: float | None, max_concurrent: int | None, results: Path) -> None:
    """Run one test: workload and faults against a fresh cluster, then check and report.

    Exit code 0: valid; 1: invalid (a forbidden anomaly); 2: unknown or error.
    """
    overrides: dict[str, Any] = {
        "name": name,
        "seed": seed,
        "time_limit_s": time_limit,
        "backend": backend,
        "kafka": {"version": kafka_version, "nodes": nodes, "image": image},
        "topic": {"partitions": partitions, "replication_factor": replication_factor,
                  "min_insync_replicas": min_insync,
                  "unclean_leader_election_enable": unclean},
        "producer": {"acks": acks, "enable_idempotence": idempotence, "retries": retries},
        "workload": {"client": client, "producers": producers, "consumers": consumers,
                     "rate": rate},
        "nemesis": {"faults": nemesis, "interval_s": interval,
                    "max_concurrent": max_concurrent},
    }
    spec = build_spec(spec_file, overrides)

    from faultline.run.runner import run_test

    console = Console(stderr=True)
    try:
        outcome = run_test(spec, results=results, console=console)
    except KeyboardInterrupt:
        click.echo(f"faultline: interrupted; the partial run is in {results / 'latest'}",
                   err=True)
        sys.exit(2)
    for line in outcome.lines():
        click.echo(line)
    sys.exit(outcome.exit_code)
