"""Network namespaces, a bridge, veths and iptables grudges for the local backend
(docs/design.md, "Cluster: the local backend", says why this layout).

Layout of one run ``<run>`` (a short random id) with nodes 1..n::

    host namespace            namespace fl<run>-br             namespace fl<run>-n<i>
    veth fl<run>h  <-------> host ==+
    10.241.X.1/24                   br0 (bridge) +== v<i> <--> eth0  10.241.X.(10+i)/24
                                    10.241.X.2/24: Toxiproxy

Partitions are iptables rules in a chain ``FAULTLINE`` inside each node's namespace,
jumped to from ``INPUT``: a grudge drops every packet from a node, a *replication*
grudge only those to or from the inter-broker listener
(:data:`faultline.cluster.kafka_config.BROKER_PORT`). Each namespace and the host's veth
carry the alias ``faultline.run=<run>`` on a link, set right after it is made:
:func:`owned_namespaces` and :func:`owned_links` find what a run left by name and mark,
never by a name alone. :func:`probe` and :func:`diagnose` tell which firewall stands
between nodes. The functions that build argument lists are pure; :func:`run` executes
them, never through a shell.
"""

from __future__ import annotations

import ipaddress
import json
import re
import subprocess
import sys
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from faultline.cluster.host.stateroot import RUN_ID
from faultline.cluster.kafka_config import BROKER_PORT
from faultline.errors import ClusterError

#: Every name the local backend gives starts with this, then the run id.
PREFIX = "fl"
#: Supernet the per-run /24s are taken from.
SUPERNET = ipaddress.IPv4Network("10.241.0.0/16")
#: The iptables chain holding a node's grudge rules.
CHAIN = "FAULTLINE"
#: The iptables chain holding a node's degraded-link rules (:mod:`.links`).
LINKS_CHAIN = "FAULTLINE-LINKS"
#: The iptables chain holding a node's held transaction ends (:mod:`.ends`).
ENDS_CHAIN = "FAULTLINE-ENDS"
# -n<i> node namespaces, -br the bridge's namespace, h the host's veth
_OWNED_NAME = re.compile(rf"fl({RUN_ID.pattern})(?:-n\d+|-br|h)")
#: A link's alias that marks it, or its namespace, as a run's (module docstring).
MARK = "faultline.run="
_MARKED = re.compile(rf"\balias {re.escape(MARK)}({RUN_ID.pattern})(?![a-z0-9])")
#: The bridge's name inside the run's bridge namespace.
BRIDGE = "br0"


@dataclass(frozen=True, slots=True)
class Layout:
    """Every name and address of one run's network; a pure value."""

    run_id: str
    subnet: ipaddress.IPv4Network
    node_ids: tuple[int, ...]

    def __post_init__(self) -> None:
        if not RUN_ID.fullmatch(self.run_id):
            raise ValueError(f"run id {self.run_id!r} must be 6 of [a-z0-9], starting with a letter")
        if self.subnet.prefixlen != 24:
            raise ValueError(f"subnet {self.subnet} must be a /24")
        if any(not 1 <= i <= 99 for i in self.node_ids):
            raise ValueError(f"node ids {self.node_ids} must be within 1..99")

    @property
    def bridge_namespace(self) -> str:
        """The namespace holding the bridge (:data:`BRIDGE`) and the nodes' veth ends."""
        return f"{PREFIX}{self.run_id}-br"

    @property
    def host_veth(self) -> str:
        """The host's link to the bridge; it carries :attr:`host_address`."""
        return f"{PREFIX}{self.run_id}h"

    @property
    def host_address(self) -> str:
        """The host's address on the run's subnet."""
        return str(self.subnet.network_address + 1)

    @property
    def proxy_address(self) -> str:
        """The bridge's address in the run's bridge namespace: where the proxies listen and
        their connections to the nodes come from."""
        return str(self.subnet.network_address + 2)

    def namespace(self, node_id: int) -> str:
        return f"{PREFIX}{self.run_id}-n{node_id}"

    def address(self, node_id: int) -> str:
        return str(self.subnet.network_address + 10 + node_id)


def owner_run_id(name: str) -> str | None:
    """The run id a namespace or link is named for, or None if the name is none of ours."""
    m = _OWNED_NAME.fullmatch(name)
    return m.group(1) if m else None


def setup_commands(layout: Layout) -> list[list[str]]:
    """The ``ip`` commands that build the run's bridge namespace, the host's veth into it,
    and each node's namespace and veth, in order (module docstring). Every link but the
    host's is created inside a namespace of the run, so no name is ever taken in the host."""
    brns, host, prefix = layout.bridge_namespace, layout.host_veth, layout.subnet.prefixlen
    mark = MARK + layout.run_id
    cmds: list[list[str]] = [
        ["ip", "netns", "add", brns],
        ["ip", "-n", brns, "link", "set", "lo", "alias", mark],
        ["ip", "-n", brns, "link", "add", BRIDGE, "type", "bridge"],
        ["ip", "-n", brns, "addr", "add", f"{layout.proxy_address}/{prefix}", "dev", BRIDGE],
        ["ip", "-n", brns, "link", "set", BRIDGE, "up"],
        ["ip", "-n", brns, "link", "set", "lo", "up"],
        ["ip", "link", "add", host, "type", "veth", "peer", "name", "host", "netns", brns],
        ["ip", "link", "set", host, "alias", mark],
        ["ip", "-n", brns, "link", "set", "host", "master", BRIDGE, "up"],
        ["ip", "addr", "add", f"{layout.host_address}/{prefix}", "dev", host],
        ["ip", "link", "set", host, "up"],
    ]
    for i in layout.node_ids:
        ns, veth = layout.namespace(i), f"v{i}"
        cmds += [
            ["ip", "netns", "add", ns],
            ["ip", "-n", ns, "link", "set", "lo", "alias", mark],
            ["ip", "-n", brns, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns],
            ["ip", "-n", brns, "link", "set", veth, "master", BRIDGE, "up"],
            ["ip", "-n", ns, "addr", "add", f"{layout.address(i)}/{prefix}", "dev", "eth0"],
            ["ip", "-n", ns, "link", "set", "eth0", "up"],
            ["ip", "-n", ns, "link", "set", "lo", "up"],
        ]
    return cmds


def chain_rules() -> list[list[str]]:
    """iptables arguments that create the (empty) grudge chain and jump to it from INPUT,
    the (empty) degraded-link chain, jumped to from INPUT and OUTPUT, and the (empty)
    held-ends chain, jumped to from INPUT."""
    return [["-N", CHAIN], ["-I", "INPUT", "1", "-j", CHAIN],
            ["-N", LINKS_CHAIN], ["-I", "INPUT", "1", "-j", LINKS_CHAIN],
            ["-I", "OUTPUT", "1", "-j", LINKS_CHAIN],
            ["-N", ENDS_CHAIN], ["-I", "INPUT", "1", "-j", ENDS_CHAIN]]


def chain_commands(namespace: str) -> list[list[str]]:
    """:func:`chain_rules` run in a node's namespace."""
    return [_ipt(namespace, *rule) for rule in chain_rules()]


def grudge_rules(
    layout: Layout, grudge: Mapping[int, Collection[int]],
    replication: Mapping[int, Collection[int]] | None = None,
) -> dict[int, list[list[str]]]:
    """node -> the iptables arguments that make its chain exactly its part of ``grudge``
    (drop every packet from those nodes) and of ``replication`` (drop their packets to
    or from the inter-broker port :data:`BROKER_PORT` only).

    Each node's chain is flushed first, so applying a grudge replaces the last one.
    Nodes absent from both get a flushed chain (they drop nothing).
    """
    replication = replication or {}
    named = [*grudge.items(), *replication.items()]
    unknown = sorted({n for n, _ in named if n not in layout.node_ids}
                     | {d for _, ds in named for d in ds if d not in layout.node_ids})
    if unknown:
        raise ValueError(f"grudge names unknown node(s) {unknown}; nodes are {list(layout.node_ids)}")
    out: dict[int, list[list[str]]] = {}
    for node in layout.node_ids:
        rules = [["-F", CHAIN]]
        for src in sorted(set(grudge.get(node, ())) - {node}):
            rules.append(["-A", CHAIN, "-s", f"{layout.address(src)}/32", "-j", "DROP"])
        for src in sorted(set(replication.get(node, ())) - set(grudge.get(node, ())) - {node}):
            for port in ("--dport", "--sport"):
                rules.append(["-A", CHAIN, "-s", f"{layout.address(src)}/32", "-p", "tcp", port,
                              str(BROKER_PORT), "-j", "DROP"])
        out[node] = rules
    return out


def grudge_commands(
    layout: Layout, grudge: Mapping[int, Collection[int]],
    replication: Mapping[int, Collection[int]] | None = None,
) -> dict[int, list[list[str]]]:
    """:func:`grudge_rules`, each run in its node's namespace."""
    return {node: [_ipt(layout.namespace(node), *r) for r in rules]
            for node, rules in grudge_rules(layout, grudge, replication).items()}  # fmt: skip


def heal_commands(layout: Layout) -> list[list[str]]:
    """Flush every node's grudge chain."""
    return [_ipt(layout.namespace(i), "-F", CHAIN) for i in layout.node_ids]


def teardown_commands(namespaces: Iterable[str], links: Iterable[str]) -> list[list[str]]:
    """Delete namespaces (which destroys their bridge and veth ends, and so the peers,
    the host's veth among them) and links.

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


#: A TCP connect to each ``host:port`` argument; prints one outcome each, as JSON.
_PROBE = """
import json, socket, sys
out = []
for target in sys.argv[2:]:
    host, port = target.rsplit(":", 1)
    s = socket.socket()
    s.settimeout(float(sys.argv[1]))
    try:
        s.connect((host, int(port)))
        out.append("open")
    except TimeoutError:
        out.append("timed out")
    except ConnectionRefusedError:
        out.append("refused")
    except OSError as e:
        out.append(e.strerror or str(e))
    finally:
        s.close()
print(json.dumps(out))
"""


@dataclass(frozen=True, slots=True)
class Probe:
    """One TCP connect from node ``source`` (None: the host) to ``target``'s ``port``."""

    source: int | None
    target: int
    address: str
    port: int
    outcome: str  # "open", "refused", "timed out", or the connect error

    @property
    def reached(self) -> bool:
        """The packets got there: a listener answered, or the node refused (no listener)."""
        return self.outcome in ("open", "refused")

    def __str__(self) -> str:
        src = "the host" if self.source is None else f"node {self.source}"
        return f"{src} could not reach node {self.target} ({self.address}:{self.port}: {self.outcome})"


def probe(layout: Layout, port: int, timeout: float = 2.0,
          enter: Callable[[int], list[str]] | None = None) -> list[Probe]:  # fmt: skip
    """A TCP connect from every node to every other node, and from the host to every node,
    on ``port``; all sources at once, so it takes about ``timeout`` at worst. A refused
    connection counts as reached: a port nobody listens on still tells the path works.
    ``enter(node)`` is the command prefix that runs a command in the node's network
    namespace (default: ``ip netns exec`` of the layout's namespace)."""
    sources: list[int | None] = [None, *layout.node_ids]
    plans: dict[int | None, list[int]] = {
        s: [t for t in layout.node_ids if t != s] for s in sources
    }
    procs = {}
    for src, targets in plans.items():
        args = [sys.executable, "-c", _PROBE, str(timeout), *(f"{layout.address(t)}:{port}" for t in targets)]
        if src is None:
            cmd = args
        else:
            cmd = [*(enter(src) if enter else ["ip", "netns", "exec", layout.namespace(src)]), *args]
        procs[src] = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out: list[Probe] = []
    for src, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=timeout * len(plans[src]) + 20)
        try:
            outcomes = json.loads(stdout)
        except ValueError:
            outcomes = [f"no probe ran: {stderr.strip() or proc.returncode}"] * len(plans[src])
        out += [Probe(src, t, layout.address(t), port, o) for t, o in zip(plans[src], outcomes, strict=True)]
    return out


def diagnose(layout: Layout) -> str:
    """What on the nodes' path could drop packets, read (never changed): the firewall of
    the bridge's namespace (and whether bridged traffic passes it), the nodes' grudge
    chains, the host's INPUT and OUTPUT policies. "no firewall drops ..." when none."""
    found: list[str] = []
    brns = layout.bridge_namespace
    nf = run(["ip", "netns", "exec", brns, "cat", "/proc/sys/net/bridge/bridge-nf-call-iptables"],
             check=False).strip()  # fmt: skip
    forward = _chain(brns, "FORWARD")
    if nf == "1" and (forward.policy == "DROP" or forward.rules):
        found.append(f"namespace {brns}: bridged traffic passes iptables (bridge-nf-call-iptables=1) and "
                     f"its FORWARD chain {forward}")  # fmt: skip
    for i in layout.node_ids:
        for name in ("INPUT", "OUTPUT", CHAIN):
            chain = _chain(layout.namespace(i), name)
            if chain.policy == "DROP" or (name == CHAIN and chain.rules):
                found.append(f"namespace {layout.namespace(i)}: {name} {chain}")
    for name in ("INPUT", "OUTPUT"):
        chain = _chain(None, name)
        if chain.policy == "DROP":
            found.append(f"host: {name} {chain}")
    return "; ".join(found) or "no firewall on the path drops anything (look at the links: ip -n " \
        f"{brns} link)"


@dataclass(frozen=True, slots=True)
class _Chain:
    policy: str  # "" for a user chain, or when iptables could not be read
    rules: int

    def __str__(self) -> str:
        policy = f"policy {self.policy}, " if self.policy else ""
        return f"{policy}{self.rules} rule(s)"


def _chain(namespace: str | None, name: str) -> _Chain:
    cmd = ["iptables", "-w", "5", "-S", name]
    out = run(cmd if namespace is None else ["ip", "netns", "exec", namespace, *cmd], check=False)
    lines = out.splitlines()
    policy = next((ln.split()[2] for ln in lines if ln.startswith("-P ")), "")
    return _Chain(policy, sum(ln.startswith("-A ") for ln in lines))


def reachability(layout: Layout, port: int, timeout: float = 2.0) -> str | None:
    """None when every node reaches every other on ``port`` (and the host reaches them);
    else one line: who could not reach whom, then :func:`diagnose`."""
    failed = [p for p in probe(layout, port, timeout) if not p.reached]
    if not failed:
        return None
    return f"{'; '.join(map(str, failed))}; what could drop them: {diagnose(layout)}"


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
    return list(_marks(run(["ip", "-o", "link", "show"], check=False)))


def owned_namespaces() -> dict[str, str]:
    """Namespace -> run id, for each named for a run and marked as that run's."""
    owned = {}
    for ns in list_namespaces():
        rid = owner_run_id(ns)
        listing = run(["ip", "-n", ns, "-o", "link", "show"], check=False) if rid else ""
        if rid is not None and rid in _marks(listing).values():
            owned[ns] = rid
    return owned


def owned_links() -> dict[str, str]:
    """Link of the host namespace -> run id, for each named for a run and marked as its."""
    marks = _marks(run(["ip", "-o", "link", "show"], check=False))
    return {name: rid for name, rid in marks.items() if rid is not None and owner_run_id(name) == rid}


def _marks(listing: str) -> dict[str, str | None]:
    """Link name -> the run id its alias marks it for (None: no mark), from ``ip -o link show``."""
    marks: dict[str, str | None] = {}
    for line in listing.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            m = _MARKED.search(parts[2])
            marks[parts[1].strip().split("@")[0]] = m.group(1) if m else None
    return marks


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


def run_per_node(plan: Iterable[Sequence[Sequence[str]]]) -> list[str]:
    """Run each node's commands in order, every node's even when another node's fail:
    one namespace whose iptables fails (the xtables lock not had in time, a chain gone)
    must not leave the rules of the nodes after it as they were, partitioned after a heal
    or under the last grudge. Each node's outputs joined, in the plan's order; ClusterError
    naming every failure, once all have run."""
    errors: list[str] = []
    out: list[str] = []
    for cmds in plan:
        try:
            out.append("".join(run(cmd) for cmd in cmds))
        except ClusterError as e:  # the node's later commands depend on this one; next node
            errors.append(str(e))
    if errors:
        raise ClusterError("; ".join(errors))
    return out
