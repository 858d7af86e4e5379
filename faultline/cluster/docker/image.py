"""The docker backend's image, built here with no registry at all.

``faultline/kafka:<version>`` is a Debian root filesystem made by ``debootstrap`` from
Debian's packages (a JRE, iptables, iproute2, libfaketime), cached in
``<cache>/docker/rootfs-<suite>-<key>`` (the key names the packages: a cached root
filesystem of other packages is not reused, nor an image made from one), with the Kafka
jars the set-up resolves from Maven Central in ``/opt/kafka/libs``, imported into the
engine with ``docker import``. Nothing is pulled. A user's own image (``--image``) must
have ``java`` on its PATH and Kafka's jars in ``/opt/kafka/libs``; for clock faults, the
label ``faultline.faketime`` naming its libfaketime.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from faultline.cluster import kafka_dist
from faultline.cluster.host import clocks
from faultline.cluster.kafka_dist import Report
from faultline.errors import SetupError

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
PACKAGES = ("openjdk-17-jre-headless", "iptables", "iproute2", clocks.PACKAGE)
#: The root filesystem's key: its suite and packages.
KEY = hashlib.sha256(" ".join((SUITE, *PACKAGES)).encode()).hexdigest()[:12]
#: The image's labels: the key of the root filesystem it was made from, and the path of
#: its libfaketime (:mod:`faultline.cluster.host.clocks`).
KEY_LABEL = "faultline.rootfs"
FAKETIME_LABEL = "faultline.faketime"
#: Where the image keeps Kafka's jars: the broker's class path is ``LIBS/*``.
LIBS = "/opt/kafka/libs"
_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def default_image(version: str) -> str:
    return f"faultline/kafka:{version}"


def exists(image: str) -> bool:
    """True when the engine has ``image`` (after ``--``: a name is never read as an option)."""
    done = subprocess.run(["docker", "image", "inspect", "--", image], capture_output=True, check=False)
    return done.returncode == 0


def labels(image: str) -> dict[str, str]:
    """The labels of ``image``, which the engine has."""
    done = subprocess.run(["docker", "image", "inspect", "--format", "{{json .Config.Labels}}", "--", image],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(done.stdout) or {}


def faketime(image: str) -> Path:
    """Where ``image`` has libfaketime (its :data:`FAKETIME_LABEL`); SetupError when it
    says nothing of it."""
    found = labels(image).get(FAKETIME_LABEL)
    if not found:
        raise SetupError(f"clock faults need libfaketime in the image, and {image} has no label "
                         f"{FAKETIME_LABEL} naming it; use faultline's own image (no --image)")
    return Path(found)


def rootfs(report: Report) -> Path:
    """The cached Debian root filesystem (made once, by debootstrap)."""
    out = kafka_dist.cache_dir() / "docker" / f"rootfs-{SUITE}-{KEY}"
    if (out / ".complete").exists():
        return out
    kafka_dist.ensure_debian_commands(("debootstrap",), report)
    report(f"debootstrap {SUITE} with {', '.join(PACKAGES)} (once; a few minutes)")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))  # a name of its own
    try:
        tmp.chmod(0o755)  # the image's /
        done = subprocess.run(
            ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(tmp), MIRROR],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise SetupError(f"debootstrap failed: {(done.stdout + done.stderr).strip()[-300:]}")
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    (out / ".complete").touch()
    return out


def ensure_image(version: str, report: Report, image: str | None = None) -> str:
    """The image a docker cluster of Kafka ``version`` runs: ``image`` when given (it must
    exist in the engine), else ``faultline/kafka:<version>``, built when missing. Returns
    its name; SetupError naming the fix."""
    if image is not None:
        if not exists(image):
            raise SetupError(f"the engine has no image {image!r}; docker load or docker build it first")
        return image
    name = default_image(version)
    if exists(name) and labels(name).get(KEY_LABEL) == KEY:
        return name
    t0 = time.monotonic()
    base = rootfs(report)
    lib = sorted(base.glob(clocks.LIBRARY_GLOB.lstrip("/")))
    if not lib:
        raise SetupError(f"{base} has no libfaketime ({clocks.LIBRARY_GLOB}); remove it to build it anew")
    dist = kafka_dist.ensure_kafka(version, None, report)
    libs = base / LIBS.lstrip("/")
    shutil.rmtree(libs, ignore_errors=True)
    shutil.copytree(dist.libs, libs)
    report(f"importing {name} into the engine")
    tar = subprocess.Popen(["tar", "-C", str(base), "--exclude=./.complete", "-c", "."],
                           stdout=subprocess.PIPE)  # fmt: skip
    done = subprocess.run(
        ["docker", "import", "--change", f"ENV PATH={_PATH}", "--change", "LABEL faultline.image=kafka",
         "--change", f"LABEL {KEY_LABEL}={KEY}",
         "--change", f"LABEL {FAKETIME_LABEL}=/{lib[0].relative_to(base)}",
         "--", "-", name],
        stdin=tar.stdout, capture_output=True, text=True, check=False,
    )  # fmt: skip
    tar.wait()
    if done.returncode != 0 or tar.returncode != 0:
        raise SetupError(f"docker import of {name} failed: {done.stderr.strip()[-300:]}")
    report(f"built {name} in {time.monotonic() - t0:.0f} s")
    return name
