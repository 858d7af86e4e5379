"""The pytest plugin as its users meet it: docs/plugin.md's example project, run by pytest
against a real cluster. On the local backend from a project of its own, with
kafka-faultline installed from this checkout into a virtual environment of its own (the
plugin found by its entry point), plus an application that does lose a record; on the
docker backend, its producer test alone."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import faultline
from faultline.cluster import kafka_dist
from faultline.cluster.docker import image
from faultline.cluster.host import runstate
from faultline.errors import SetupError
from faultline.history import read_history
from faultline.spec import DEFAULT_KAFKA_VERSION

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

pytest_plugins = ["pytester"]

CHECKOUT = Path(faultline.__file__).parents[1]
#: Kafka's jars and Toxiproxy, as installed: pytester gives the inner runs a HOME of their own.
CACHE = kafka_dist.cache_dir()

#: An application whose reader resumes one past its commit: it skips an order.
BUGGY = '''
import pytest
from orders import OrderReader, OrderWriter

pytestmark = pytest.mark.faultline(nodes=3, broker={"unclean.leader.election.enable": "false"})  # shared


class SkippingReader(OrderReader):
    def start_offset(self, committed):
        return committed + 1 if committed >= 0 else 0


def test_a_reader_that_resumes_past_its_commit_loses_an_order(faultline, orders):
    OrderWriter(faultline.bootstrap_servers, orders).write([f"order-{i}" for i in range(10)])
    reader = SkippingReader(faultline.bootstrap_servers, orders, "billing")
    seen = reader.read_until("order-4")
    reader.close()
    faultline.step(f"crash leader of {orders}/0")
    reader = SkippingReader(faultline.bootstrap_servers, orders, "billing")
    seen += reader.read_until("order-9")
    reader.close()
    missing = [f"order-{i}" for i in range(10) if f"order-{i}" not in seen]
    assert not missing, f"the reader skipped {missing}"
'''


def example_files() -> dict[str, str]:
    """docs/plugin.md's example project: each python block that starts ``# FILE``."""
    text = (CHECKOUT / "docs" / "plugin.md").read_text()
    blocks = re.findall(r"```python\n# (\S+)\n(.*?)```", text, re.S)
    assert [name for name, _ in blocks] == ["orders.py", "conftest.py", "test_orders.py"]
    return dict(blocks)


def _venv_with_the_checkout(where: Path) -> Path:
    """A virtual environment with kafka-faultline built and installed from this checkout
    (no index, no dependencies: those come from this interpreter's site-packages); its python."""
    src = where / "src"
    shutil.copytree(CHECKOUT / "faultline", src / "faultline",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(CHECKOUT / name, src / name)
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    "--no-index", "--no-build-isolation", str(src)], check=True)
    return python


def test_a_separate_project_passes_with_faults_and_fails_naming_them_when_its_app_loses_a_record(
        pytester: pytest.Pytester, local_backend: None, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    python = _venv_with_the_checkout(tmp_path)
    pytester.makepyfile(**{name.removesuffix(".py"): code for name, code in example_files().items()},
                        test_buggy=BUGGY)
    monkeypatch.delenv("PYTHONPATH", raising=False)  # faultline from the venv, not the checkout
    monkeypatch.setenv("FAULTLINE_CACHE", str(CACHE))
    installed = subprocess.run([python, "-c", "import faultline; print(faultline.__file__)"],
                               capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    assert installed.startswith(str(tmp_path / "venv")), installed
    journals = tmp_path / "journals"

    result = pytester.run(python, "-m", "pytest", "-p", "no:cacheprovider", "-v", "--faultline-heap-mb=384",
                          "-k", "not follower_is_isolated",  # the docker backend's test runs that one
                          f"--faultline-journal={journals}", timeout=480)

    out = result.stdout.str()
    result.assert_outcomes(passed=1, failed=1, deselected=1)
    (run_id,) = re.findall(r"^faultline: started a cluster: local backend, 3 nodes, Kafka \S+, run (\w+)$",
                           out, re.M)
    assert "test_a_reader_that_resumes_past_its_commit_loses_an_order FAILED" in out
    assert "AssertionError: the reader skipped ['order-5']" in out
    section = out[out.index("faultline: faults in effect at the failure"):]
    assert re.match(r"faultline: faults in effect at the failure -+\nkill: node \d\n\nsteps taken:\n"
                    r"crash leader of orders-\S+/0 \(leader of 0 = node \d\) -> kill \d: killed node \d\n"
                    r"journal: ", section), section[:600]
    # each test's steps journaled, and healed at its end, the failing one's too
    (buggy,) = journals.glob("*buggy*")
    ops = list(read_history(buggy))
    assert [(op.f, "result" in op.value) for op in ops] == [("kill", False), ("kill", True), ("start", False),
                                                          ("start", True)]
    assert ops[0].value["role"] == "leader of 0"
    assert len(list(journals.glob("*.jsonl"))) == 2
    assert run_id not in runstate.run_ids(), "the session's cluster outlived it"


def test_the_producer_example_passes_on_the_docker_backend(
        pytester: pytest.Pytester, local_backend: None, docker_engine: None, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAULTLINE_CACHE", str(CACHE))
    try:
        image.ensure_image(DEFAULT_KAFKA_VERSION, print)
    except SetupError as e:
        pytest.skip(f"no image for the docker backend: {e}")
    pytester.makepyfile(**{name.removesuffix(".py"): code for name, code in example_files().items()})
    result = pytester.runpytest_subprocess(
        "-p", "faultline.pytest_plugin", "-p", "no:cacheprovider", "--faultline-backend=docker",
        "--faultline-heap-mb=320", f"--faultline-journal={tmp_path}", "-k", "follower_is_isolated",
        timeout=420)
    result.assert_outcomes(passed=1, deselected=1)
    assert re.search(r"^faultline: started a cluster: docker backend, 3 nodes, Kafka ", result.stdout.str(),
                     re.M)
    (journal,) = tmp_path.glob("*.jsonl")
    assert [op.f for op in read_history(journal)] == ["partition", "partition", "wait", "wait", "heal",
                                                      "heal"]
