"""The real components a local cluster runs on, located or installed into a cache.

- Kafka: the server jars resolved by ``mvn`` from Maven Central (a pom template in the
  package, the version a property), cached in ``<cache>/kafka-<version>/libs`` with a
  completion marker; or an existing distribution named by ``KAFKA_HOME``.
- Kafka's DumpLogSegments (:func:`dump_log_segments`): ``kafka.tools.DumpLogSegments`` in
  the server jar up to Kafka 4.2; from 4.3 (KAFKA-14579) ``org.apache.kafka.tools.DumpLogSegments``
  in the ``kafka-tools`` jar, which the server does not depend on, resolved alone by
  ``mvn dependency:copy`` into ``<cache>/kafka-<version>/tools``, outside the broker's
  class path (whose class-data archive stays valid); a ``KAFKA_HOME`` distribution has
  it in ``libs/`` already.
- Toxiproxy: ``go install github.com/Shopify/toxiproxy/v2/cmd/server@v2.12.0`` into
  ``<cache>/bin``.
- iptables, iproute2, chromium: Debian packages installed with apt-get when missing.

``<cache>`` is ``$FAULTLINE_CACHE``, else ``$XDG_CACHE_HOME/kafka-faultline``, else
``~/.cache/kafka-faultline``. Every ``ensure_*`` is idempotent: once its result is
cached it downloads nothing. Failures raise :class:`SetupError` naming the fix.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from faultline.errors import SetupError
from faultline.spec import DEFAULT_KAFKA_VERSION, kafka_version

TOXIPROXY_VERSION = "2.12.0"
TOXIPROXY_MODULE = "github.com/Shopify/toxiproxy/v2/cmd/server"
_MARKER = ".complete"

#: Called with one line per thing done (a download, an install); silent when all is cached.
Report = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


@dataclass(frozen=True, slots=True)
class KafkaDist:
    """A Kafka server that can be launched: ``java -cp classpath kafka.Kafka props``."""

    version: str
    libs: Path
    java: Path

    @property
    def classpath(self) -> str:
        """The JVM class path (a wildcard over ``libs``: short command lines)."""
        return str(self.libs / "*")

    def command(self, main_class: str, *args: str, jvm_opts: tuple[str, ...] = ()) -> list[str]:
        """A java command line running ``main_class`` on this distribution."""
        return [str(self.java), *jvm_opts, "-cp", self.classpath, main_class, *args]


def cache_dir() -> Path:
    """The cache root (see module docstring)."""
    if env := os.environ.get("FAULTLINE_CACHE"):
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kafka-faultline"


def log4j_config() -> Path:
    """The packaged log4j2 config (server.log, state-change.log, controller.log)."""
    return Path(str(resources.files("faultline.cluster") / "data" / "log4j2.properties"))


def find_java() -> Path:
    """The java binary: ``$JAVA_HOME/bin/java`` or ``java`` on PATH; must be 17 or newer."""
    home = os.environ.get("JAVA_HOME")
    java = Path(home) / "bin" / "java" if home else None
    if java is None or not java.exists():
        found = shutil.which("java")
        if not found:
            raise SetupError("java not found; install Java 17+: apt-get install -y openjdk-17-jre-headless")
        java = Path(found)
    return java


def java_major(java: Path) -> int:
    """The Java feature version of a java binary (17 for 17.0.15)."""
    out = subprocess.run([str(java), "-version"], capture_output=True, text=True, check=False)
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not m:
        raise SetupError(f"cannot tell the version of {java}")
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def kafka_libs(version: str) -> Path:
    """Where the jars of ``version`` are cached (complete or not)."""
    return cache_dir() / f"kafka-{version}" / "libs"


def kafka_cached(version: str) -> bool:
    """True when ``version``'s jars are cached completely."""
    return (kafka_libs(version).parent / _MARKER).exists()


def ensure_kafka(
    version: str = DEFAULT_KAFKA_VERSION, home: str | None = None, report: Report = _quiet
) -> KafkaDist:
    """Locate Kafka ``version``, resolving it with Maven on first use.

    ``home`` (or ``$KAFKA_HOME`` when ``home`` is None) names an existing distribution
    instead: its ``libs/`` is used as it is and ``version`` is read from its jars.
    """
    java = find_java()
    home = home if home is not None else os.environ.get("KAFKA_HOME")
    if home:
        return _from_home(Path(home), java)
    libs = kafka_libs(kafka_version(version))
    if kafka_cached(version):
        return KafkaDist(version, libs, java)
    mvn = shutil.which("mvn")
    if not mvn:
        raise SetupError("mvn not found; install it: apt-get install -y maven")
    report(f"resolving Kafka {version} from Maven Central into {libs}")
    libs.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=libs.parent, prefix=".mvn-") as tmp:
        pom = Path(tmp) / "pom.xml"
        pom.write_bytes(
            (resources.files("faultline.cluster") / "data" / "kafka-dist.pom.xml").read_bytes()
        )
        out = Path(tmp) / "libs"
        cmd = [
            mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
            "-DincludeScope=runtime", f"-DoutputDirectory={out}", f"-Dkafka.version={version}",
        ]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not any(out.glob(f"kafka_2.13-{version}.jar")):
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-5:])
            raise SetupError(f"mvn could not resolve org.apache.kafka:kafka_2.13:{version}: {tail}")
        if libs.exists():  # a half-finished earlier attempt
            shutil.rmtree(libs)
        out.rename(libs)
    (libs.parent / _MARKER).write_text(version + "\n")
    report(f"Kafka {version}: {len(list(libs.glob('*.jar')))} jars cached")
    return KafkaDist(version, libs, java)


def _from_home(home: Path, java: Path) -> KafkaDist:
    libs = home / "libs"
    jars = sorted(libs.glob("kafka_2.13-*.jar")) if libs.is_dir() else []
    server = [j for j in jars if re.fullmatch(r"kafka_2\.13-[\d.]+(?:-[A-Za-z0-9.]+)?\.jar", j.name)]
    if not server:
        raise SetupError(f"KAFKA_HOME={home} has no libs/kafka_2.13-<version>.jar")
    version = server[0].name.removeprefix("kafka_2.13-").removesuffix(".jar")
    return KafkaDist(version, libs, java)


#: DumpLogSegments up to Kafka 4.2, a Scala object in the server jar.
DUMP_LOG_SEGMENTS_CORE = "kafka.tools.DumpLogSegments"
#: DumpLogSegments from Kafka 4.3, in the kafka-tools jar.
DUMP_LOG_SEGMENTS_TOOLS = "org.apache.kafka.tools.DumpLogSegments"


def dump_log_segments(dist: KafkaDist, report: Report = _quiet) -> tuple[str, str]:
    """(class path, main class) that run Kafka's DumpLogSegments for ``dist``.

    Decided by what the jars hold, not by the version number: the server jar's
    ``kafka/tools/DumpLogSegments.class`` where it has one (Kafka 3.x to 4.2), else the
    ``kafka-tools`` jar's class (:func:`tools_classpath`, resolved on first use).
    """
    if _server_jar_has(dist, DUMP_LOG_SEGMENTS_CORE):
        return dist.classpath, DUMP_LOG_SEGMENTS_CORE
    return tools_classpath(dist, report), DUMP_LOG_SEGMENTS_TOOLS


def _server_jar_has(dist: KafkaDist, main_class: str) -> bool:
    jar = dist.libs / f"kafka_2.13-{dist.version}.jar"
    try:
        with zipfile.ZipFile(jar) as z:
            z.getinfo(main_class.replace(".", "/") + ".class")
    except KeyError:
        return False
    except (OSError, zipfile.BadZipFile) as e:
        raise SetupError(f"cannot read the Kafka server jar {jar}: {e}") from None
    return True


def tools_classpath(dist: KafkaDist, report: Report = _quiet) -> str:
    """The class path that runs Kafka's tools (DumpLogSegments): ``dist``'s own, plus the
    ``kafka-tools`` jar resolved with mvn on first use when ``dist.libs`` lacks it.

    The server's jars come first, so a JVM started with the broker's class-data archive
    still maps it (the archive allows a class path that extends the one it was built on).
    """
    if any(dist.libs.glob(f"kafka-tools-{dist.version}.jar")):
        return dist.classpath
    tools = dist.libs.parent / "tools"
    jar = tools / f"kafka-tools-{dist.version}.jar"
    if not jar.exists():
        mvn = shutil.which("mvn")
        if not mvn:
            raise SetupError("mvn not found; install it: apt-get install -y maven")
        report(f"resolving kafka-tools {dist.version} from Maven Central into {tools}")
        tools.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=tools, prefix=".mvn-") as tmp:
            cmd = [mvn, "-q", "-B", "dependency:copy", f"-DoutputDirectory={tmp}",
                   f"-Dartifact=org.apache.kafka:kafka-tools:{dist.version}"]  # fmt: skip
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            got = Path(tmp) / jar.name
            if done.returncode != 0 or not got.exists():
                tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-5:])
                raise SetupError(f"mvn could not resolve org.apache.kafka:kafka-tools:{dist.version}: {tail}")
            got.rename(jar)
    return f"{dist.classpath}:{jar}"


def toxiproxy_path() -> Path:
    """Where the Toxiproxy server binary is cached."""
    return cache_dir() / "bin" / f"toxiproxy-server-{TOXIPROXY_VERSION}"


def find_go() -> str | None:
    """The go binary on PATH, or Go's default install place; None if neither."""
    return shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)


def ensure_toxiproxy(report: Report = _quiet) -> Path:
    """The Toxiproxy server binary, built with ``go install`` on first use."""
    target = toxiproxy_path()
    if target.exists():
        return target
    go = find_go()
    if not go:
        raise SetupError("go not found; install Go (apt-get install -y golang-go) to build Toxiproxy")
    report(f"building Toxiproxy v{TOXIPROXY_VERSION} with go install")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".go-") as tmp:
        env = {**os.environ, "GOBIN": tmp, "CGO_ENABLED": "0"}
        done = subprocess.run(
            [go, "install", f"{TOXIPROXY_MODULE}@v{TOXIPROXY_VERSION}"],
            capture_output=True, text=True, env=env, check=False,
        )  # fmt: skip
        built = Path(tmp) / "server"
        if done.returncode != 0 or not built.exists():
            raise SetupError(f"go install {TOXIPROXY_MODULE}@v{TOXIPROXY_VERSION} failed: "
                             f"{done.stderr.strip()[-300:]}")
        built.rename(target)
    return target


def cds_archive(dist: KafkaDist) -> Path:
    """Where the AppCDS archive of ``dist`` lives (it may not exist yet), keyed by the
    class path and the JVM: the only ones it is valid for."""
    java = Path(os.path.realpath(dist.java))
    key = f"{dist.libs.resolve()}|{java}|{java.stat().st_mtime_ns if java.exists() else 0}"
    digest = hashlib.sha1(key.encode()).hexdigest()[:12]
    return cache_dir() / "cds" / f"kafka-{dist.version}-{digest}.jsa"


def cds_options(dist: KafkaDist) -> list[str]:
    """``-XX:SharedArchiveFile=...`` when ``dist``'s archive exists, else nothing
    (and nothing when ``FAULTLINE_CDS=0``, to measure what the archive buys)."""
    if os.environ.get("FAULTLINE_CDS") == "0":
        return []
    archive = cds_archive(dist)
    return [f"-XX:SharedArchiveFile={archive}"] if archive.exists() else []


def build_cds_archive(dist: KafkaDist, classlist: Path) -> Path:
    """Dump the archive of the classes named in ``classlist`` (from a broker run with
    ``-XX:DumpLoadedClassList``); an existing archive is replaced atomically."""
    archive = cds_archive(dist)
    archive.parent.mkdir(parents=True, exist_ok=True)
    tmp = archive.with_suffix(f".tmp{os.getpid()}")
    cmd = [str(dist.java), "-Xshare:dump", f"-XX:SharedClassListFile={classlist}",
           f"-XX:SharedArchiveFile={tmp}", "-cp", dist.classpath]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not tmp.exists():
        tmp.unlink(missing_ok=True)
        raise SetupError(f"building the class-data archive failed: {done.stderr.strip()[-300:]}")
    tmp.replace(archive)
    return archive


#: Runs Kafka's own StorageTool once per config in one JVM: a JVM start is most of what
#: formatting costs, and a cluster needs one format per node.
FORMAT_ALL_JAVA = """\
public class FormatAll {
    // usage: FormatAll CLUSTER_ID [--feature=NAME=LEVEL]... CONFIG...
    public static void main(String[] args) {
        int rc = 0;
        java.util.List<String> features = new java.util.ArrayList<>();
        int i = 1;
        while (i < args.length && args[i].startsWith("--feature=")) features.add(args[i++]);
        for (; i < args.length && rc == 0; i++) {
            java.util.List<String> format = new java.util.ArrayList<>(java.util.List.of(
                "format", "--config=" + args[i], "--cluster-id=" + args[0]));
            format.addAll(features);
            rc = kafka.tools.StorageTool.execute(format.toArray(new String[0]), System.out);
        }
        System.out.flush();
        Runtime.getRuntime().halt(rc);
    }
}
"""


def format_all_dir(dist: KafkaDist) -> Path | None:
    """The directory holding ``FormatAll.class`` for ``dist``, compiled with ``javac`` on
    first use; None without a JDK (then each node is formatted by its own JVM)."""
    javac = dist.java.parent / "javac"
    javac_path = str(javac) if javac.exists() else which("javac")
    key = hashlib.sha1(f"{dist.libs.resolve()}|{FORMAT_ALL_JAVA}".encode()).hexdigest()[:12]
    out = cache_dir() / "tools" / key
    if (out / "FormatAll.class").exists():
        return out
    if javac_path is None:
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".javac-") as tmp:
        src = Path(tmp) / "FormatAll.java"
        src.write_text(FORMAT_ALL_JAVA)
        done = subprocess.run([javac_path, "-cp", dist.classpath, "-d", tmp, str(src)],
                              capture_output=True, text=True, check=False)  # fmt: skip
        if done.returncode != 0:
            return None
        src.unlink()
        with contextlib.suppress(OSError):  # another process won the race: fine
            Path(tmp).rename(out)
    return out if (out / "FormatAll.class").exists() else None


#: command -> the Debian package that provides it.
DEBIAN_PACKAGES: dict[str, str] = {
    "ip": "iproute2", "iptables": "iptables", "chromium": "chromium",
    "dockerd": "docker.io", "debootstrap": "debootstrap", "nft": "nftables",
}


def ensure_debian_commands(commands: tuple[str, ...], report: Report = _quiet) -> None:
    """apt-get install the packages providing ``commands`` that are not on PATH."""
    apt_install([DEBIAN_PACKAGES[c] for c in commands if not which(c)], report)


def apt_install(missing: list[str], report: Report = _quiet) -> None:
    """apt-get install the Debian packages ``missing`` (nothing when it is empty);
    SetupError when not root or apt-get fails."""
    if not missing:
        return
    if os.geteuid() != 0:
        raise SetupError(f"missing {', '.join(missing)}; run as root: apt-get install -y {' '.join(missing)}")
    report(f"installing {', '.join(missing)} with apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", *missing]):
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            raise SetupError(f"{' '.join(cmd)} failed: {done.stderr.strip()[-300:]}")


def ensure_iptables(report: Report = _quiet) -> None:
    """iptables and iproute2 (``ip``), installed with apt-get if missing."""
    ensure_debian_commands(("ip", "iptables"), report)


def which(command: str) -> str | None:
    """``shutil.which``, also looking in /usr/sbin and /sbin."""
    # root's PATH has /usr/sbin; a user's may not, and `ip`/`iptables` live there.
    return shutil.which(command) or shutil.which(command, path="/usr/sbin:/sbin")
