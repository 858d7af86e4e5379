"""Stand-ins for what the host pieces and the docker backend read: the Docker SDK's
labelled objects, for the clean-up of docker runs, and ``ip`` answering from lists."""

from __future__ import annotations

from collections.abc import Sequence


class Labelled:
    """A container or network of the Docker SDK, as remove_labelled reads it."""

    def __init__(self, run_id: str, gone: list[str], kind: str) -> None:
        self.labels = {"faultline.run": run_id}
        self.attrs = {"Labels": self.labels}
        self._gone, self._name = gone, f"{kind} of {run_id}"

    def remove(self, force: bool = False) -> None:
        self._gone.append(self._name)


class FakeIp:
    """``netns.run`` answering ``ip -o link show`` in the host (``links``) and in each of
    ``namespaces``, with an alias mark where ``marks`` (a link or namespace -> run id)
    names one; every command is recorded in ``ran``."""

    def __init__(self, namespaces: Sequence[str], links: Sequence[str], marks: dict[str, str]) -> None:
        self.namespaces, self.links, self.marks = list(namespaces), list(links), marks
        self.ran: list[list[str]] = []

    def _line(self, index: int, name: str, marked: str) -> str:
        alias = f"\\    alias faultline.run={self.marks[marked]}" if marked in self.marks else ""
        return f"{index}: {name}@if2: <BROADCAST,UP> mtu 1500 qdisc noqueue\\    link/ether 0a:00{alias}\n"

    def __call__(self, cmd: Sequence[str], check: bool = True, timeout: float = 20.0) -> str:
        self.ran.append(list(cmd))
        if list(cmd) == ["ip", "-o", "link", "show"]:
            return "".join(self._line(i, name, name) for i, name in enumerate(self.links, 1))
        if list(cmd[:2]) == ["ip", "-n"] and list(cmd[3:]) == ["-o", "link", "show"]:
            return self._line(1, "lo", cmd[2])
        if list(cmd) == ["ip", "netns", "list"]:
            return "".join(f"{ns} (id: {i})\n" for i, ns in enumerate(self.namespaces))
        return ""

    def touched(self) -> str:
        return " ".join(" ".join(c) for c in self.ran if "delete" in c)
