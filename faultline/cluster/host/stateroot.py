"""The state root: where runs keep what finds and removes their leftovers, trusted only
when nobody but this user can change it.

The root is ``$FAULTLINE_STATE``, else ``/run/kafka-faultline`` for root (``/run`` is
root's alone and emptied at boot, as network namespaces are) and
``/tmp/kafka-faultline-<uid>`` for another user. It is refused, with one line, when it
or any directory above it can be changed by another user (owner neither root nor this
user; group- or world-writable without the sticky bit; a link owned by another user),
or when the root itself is a link. A root that does not exist is made mode 0700.

A run id read from anywhere (a process's environment, a directory's name, a state file,
a label, the command line) is used only when it has :data:`RUN_ID`'s shape, so a path
built from one stays one level under the root. Files in the root are opened without
following links (:func:`open_private`).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from pathlib import Path

from faultline.errors import SetupError

#: A run id: six of [a-z0-9], a letter first (so ``fl<id>-n<i>`` stays within 15 characters).
RUN_ID = re.compile(r"[a-z][a-z0-9]{5}")
ENV = "FAULTLINE_STATE"


def run_id_ok(text: str) -> bool:
    return RUN_ID.fullmatch(text) is not None


def checked_run_id(text: str) -> str:
    """``text`` if it is a run id; SetupError otherwise (a run named on the command line)."""
    if not run_id_ok(text):
        raise SetupError(f"{text!r} is not a run id (6 of a-z and 0-9, a letter first)")
    return text


def default_root() -> Path:
    uid = os.geteuid()
    return Path("/run/kafka-faultline" if uid == 0 else f"/tmp/kafka-faultline-{uid}")


def state_root() -> Path:
    """The state root, made if missing; SetupError when another user could change it."""
    root = Path(os.path.abspath(os.environ.get(ENV) or default_root()))
    try:
        _trusted_ancestors(root.parent)
        with contextlib.suppress(FileExistsError):
            root.mkdir(mode=0o700, parents=True)
        _trusted_ancestors(root.parent)  # also those just made
        st = os.lstat(root)
    except OSError as e:
        raise SetupError(f"state root {root}: {e.strerror or e}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise SetupError(f"state root {root} is not a directory (a link or a file): remove it, "
                         f"or set {ENV} to a directory only you can write")
    _check_owner(root, st)
    return root


def _trusted_ancestors(path: Path) -> None:
    """Each directory from ``/`` down to ``path``, as named and as resolved, is one no
    other user can change (module docstring)."""
    for chain in (path, Path(os.path.realpath(path))):
        for part in [*reversed(chain.parents), chain]:
            try:
                st = os.lstat(part)
            except FileNotFoundError:
                return  # made below, by us
            _check_owner(part, st)


def _check_owner(path: Path, st: os.stat_result) -> None:
    if st.st_uid not in (0, os.geteuid()):
        raise SetupError(f"state root: {path} belongs to uid {st.st_uid}, not to root or you: "
                         f"remove it, or set {ENV} to a directory only you can write")
    if (stat.S_ISDIR(st.st_mode) and st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX):
        raise SetupError(f"state root: other users can write {path} "
                         f"(mode {stat.S_IMODE(st.st_mode):o}): chmod go-w it, "
                         f"or set {ENV} to a directory only you can write")


def open_private(path: Path, flags: int) -> int:
    """``os.open`` of a file in the state root that never follows a link in its last
    component; a file it makes is mode 0600."""
    return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


def read_private(path: Path) -> bytes:
    """The bytes of a regular file in the state root (OSError for a link or anything else)."""
    fd = open_private(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise IsADirectoryError(f"{path} is not a regular file")
        return f.read()
