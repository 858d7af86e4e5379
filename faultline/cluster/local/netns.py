"""Network namespaces, a bridge, veths and iptables grudges for the local backend.

Layout of one run ``<run>`` (a short random id) with nodes 1..n::

    host namespace                       namespace fl<run>-n<i>
    bridge fl<run>br  10.241.X.1/24  <-- veth fl<run>v<i> == eth0  10.241.X.(10+i)/24

The host side of the bridge is the clients' side (Toxiproxy connects from there).
Partitions are iptables rules in a chain ``FAULTLINE`` inside each node's namespace,
jumped to from ``INPUT``, so the host's own firewall is never read for writing or
touched. Every command is an argument list; nothing goes through a shell.

The functions that build argument lists are pure (unit-tested); :func:`run` executes.
"""

from __future__ import annotations

import ipaddress
import re
import subprocess
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from faultline.errors import ClusterError

#: Every name the local backend gives starts with this, then the run id.
PREFIX = "fl"
#: Supernet the per-run /24s are taken from.
SUPERNET = ipaddress.IPv4Network("10.241.0.0/16")
#: The iptables chain holding a node's grudge rules.
CHAIN = "FAULTLINE"
_RUN_ID = re.compile(r"^[a-z][a-z0-9]{5}$")
_OWNED_NAME = re.compile(r"^fl([a-z][a-z0-9]{5})(?:-n\d+|br|v\d+|p\d+)$")


@dataclass(frozen=True, slots=True)
class Layout:
    """Every name and address of one run's network; a pure value."""

    run_id: str
    subnet: ipaddress.IPv4Network
    node_ids: tuple[int, ...]

    def __post_init__(self) -> None:
        if not _RUN_ID.match(self.run_id):
            raise ValueError(f"run id {self.run_id!r} must be 6 of [a-z0-9], starting with a letter")
        if self.subnet.prefixlen != 24:
            raise ValueError(f"subnet {self.subnet} must be a /24")
        if any(not 1 <= i <= 99 for i in self.node_ids):
            raise ValueError(f"node ids {self.node_ids} must be within 1..99")

    @property
    def bridge(self) -> str:
        return f"{PREFIX}{self.run_id}br"

    @property
    def host_address(self) -> str:
        """The bridge's address: where the proxies' connections to the nodes come from."""
        return str(self.subnet.network_address + 1)

    def namespace(self, node_id: int) -> str:
        return f"{PREFIX}{self.run_id}-n{node_id}"

    def veth_host(self, node_id: int) -> str:
        return f"{PREFIX}{self.run_id}v{node_id}"

    def veth_peer(self, node_id: int) -> str:
        """The peer's name until it is moved into the namespace and renamed ``eth0``."""
        return f"{PREFIX}{self.run_id}p{node_id}"

    def address(self, node_id: int) -> str:
        return str(self.subnet.network_address + 10 + node_id)


def owner_run_id(name: str) -> str | None:
    """The run id a namespace or link name belongs to, or None if it is not ours."""
    m = _OWNED_NAME.match(name)
    return m.group(1) if m else None


def setup_commands(layout: Layout) -> list[list[str]]:
    """The ``ip`` commands that build the run's bridge, namespaces and veths, in order."""
    br, prefix = layout.bridge, layout.subnet.prefixlen
    cmds: list[list[str]] = [
        ["ip", "link", "add", br, "type", "bridge"],
        ["ip", "addr", "add", f"{layout.host_address}/{prefix}", "dev", br],
        ["ip", "link", "set", br, "up"],
    ]
    for i in layout.node_ids:
        ns, host, peer = layout.namespace(i), layout.veth_host(i), layout.veth_peer(i)
        cmds += [
            ["ip", "netns", "add", ns],
            ["ip", "link", "add", host, "type", "veth", "peer", "name", peer],
            ["ip", "link", "set", peer, "netns", ns],
            ["ip", "link", "set", host, "master", br, "up"],
            ["ip", "-n", ns, "link", "set", peer, "name", "eth0"],
            ["ip", "-n", ns, "addr", "add", f"{layout.address(i)}/{prefix}", "dev", "eth0"],
            ["ip", "-n", ns, "link", "set", "eth0", "up"],
            ["ip", "-n", ns, "link", "set", "lo", "up"],
        ]
    return cmds


def chain_commands(namespace: str) -> list[list[str]]:
    """Create the (empty) grudge chain in a namespace and jump to it from INPUT."""
    return [
        _ipt(namespace, "-N", CHAIN),
        _ipt(namespace, "-I", "INPUT", "1", "-j", CHAIN),
    ]


def grudge_commands(
    layout: Layout, grudge: Mapping[int, Collection[int]]
) -> dict[int, list[list[str]]]:
    """node -> iptables commands that make its chain exactly its part of ``grudge``.

    Each node's chain is flushed first, so applying a grudge replaces the last one.
    Nodes absent from ``grudge`` get a flushed chain (they drop nothing).
    """
    unknown = sorted(
        {n for n in grudge if n not in layout.node_ids}
        | {d for ds in grudge.values() for d in ds if d not in layout.node_ids}
    )
    if unknown:
        raise ValueError(f"grudge names unknown node(s) {unknown}; nodes are {list(layout.node_ids)}")
    out: dict[int, list[list[str]]] = {}
    for node in layout.node_ids:
        ns = layout.namespace(node)
        cmds = [_ipt(ns, "-F", CHAIN)]
        for src in sorted(set(grudge.get(node, ())) - {node}):
            cmds.append(_ipt(ns, "-A", CHAIN, "-s", f"{layout.address(src)}/32", "-j", "DROP"))
        out[node] = cmds
    return out


def heal_commands(layout: Layout) -> list[list[str]]:
    """Flush every node's grudge chain."""
    return [_ipt(layout.namespace(i), "-F", CHAIN) for i in layout.node_ids]


def teardown_commands(namespaces: Iterable[str], links: Iterable[str]) -> list[list[str]]:
    """Delete namespaces (which destroys their veth ends, and so the peers) and links.

    Deleting a namespace also drops its iptables rules; nothing in the host changes.
    """
    return [["ip", "netns", "delete", ns] for ns in namespaces] + [
        ["ip", "link", "delete", link] for link in links
    ]


def build(layout: Layout, node_ids: Iterable[int]) -> None:
    """Create the run's bridge, each node's namespace and veth, and its firewall chain."""
    for cmd in setup_commands(layout):
        run(cmd)
    for i in node_ids:
        for cmd in chain_commands(layout.namespace(i)):
            run(cmd)


def _ipt(namespace: str, *args: str) -> list[str]:
    # -w: wait for the xtables lock instead of failing while another namespace's
    # iptables holds it.
    return ["ip", "netns", "exec", namespace, "iptables", "-w", "5", *args]


def run(cmd: Sequence[str], *, check: bool = True, timeout: float = 20.0) -> str:
    """Run one command; ClusterError with its stderr if it fails and ``check``."""
    try:
        done = subprocess.run(
            list(cmd), capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as e:
        raise ClusterError(f"{' '.join(cmd)} timed out after {timeout:.0f} s") from e
    except FileNotFoundError as e:
        raise ClusterError(f"{cmd[0]} not found; run `faultline doctor`") from e
    if check and done.returncode != 0:
        raise ClusterError(f"{' '.join(cmd)} failed: {done.stderr.strip() or done.returncode}")
    return done.stdout


def list_namespaces() -> list[str]:
    """Names of all network namespaces on the machine."""
    out = run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def list_links() -> list[str]:
    """Names of all links in the host namespace (without ``@peer`` suffixes)."""
    out = run(["ip", "-o", "link", "show"], check=False)
    names = []
    for line in out.splitlines():
        parts = line.split(":", 2)
        if len(parts) >= 2:
            names.append(parts[1].strip().split("@")[0])
    return names


def used_networks() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network the host already routes or has an address in."""
    nets: list[ipaddress.IPv4Network] = []
    for line in run(["ip", "-4", "-o", "addr", "show"], check=False).splitlines():
        fields = line.split()
        if "inet" in fields:
            nets.append(ipaddress.IPv4Interface(fields[fields.index("inet") + 1]).network)
    for line in run(["ip", "-4", "route", "show", "table", "all"], check=False).splitlines():
        dest = line.split()[0] if line.split() else ""
        if dest in ("default", "broadcast", "local", "unreachable", "blackhole", "prohibit"):
            dest = line.split()[1] if len(line.split()) > 1 else ""
        try:
            nets.append(ipaddress.IPv4Network(dest, strict=False))
        except ValueError:
            continue
    return nets


def free_subnets(
    taken: Iterable[ipaddress.IPv4Network], supernet: ipaddress.IPv4Network = SUPERNET
) -> list[ipaddress.IPv4Network]:
    """The /24s of ``supernet`` that overlap nothing in ``taken`` (a default route does not
    count: it overlaps everything)."""
    blocked = [n for n in taken if n.prefixlen > 0]
    return [s for s in supernet.subnets(new_prefix=24) if not any(s.overlaps(b) for b in blocked)]
