"""tests/conftest.py's switch, in a pytest of its own: a missing prerequisite skips without
``FAULTLINE_REQUIRE_ALL=1`` and fails with its reason, on one line, with it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INNER = '''
import pytest

@pytest.fixture(scope="module")
def cluster():
    pytest.skip("no local cluster: java not found")

def test_uses_cluster(cluster):
    pass

def test_uses_cluster_too(cluster):
    pass

@pytest.mark.skipif(True, reason="table.json missing")
def test_marked():
    pass

def test_imports():
    pytest.importorskip("no_such_module_for_faultline")

def test_plain():
    pass
'''


MODULE = '''
import pytest

pytest.importorskip("no_such_browser_driver_for_faultline")

def test_in_a_skipped_module():
    pass
'''


CONFTEST = ("from tests.conftest import pytest_make_collect_report  # noqa: F401\n"
            "from tests.conftest import pytest_runtest_makereport, pytest_terminal_summary  # noqa: F401\n")
PREFIX = "missing prerequisite (FAULTLINE_REQUIRE_ALL=1): "


def _pytest(tmp_path: Path, require_all: str | None, module: str = INNER) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_inner.py").write_text(module)
    env = {k: v for k, v in os.environ.items() if k != "FAULTLINE_REQUIRE_ALL"}
    env["PYTHONPATH"] = str(ROOT)
    if require_all is not None:
        env["FAULTLINE_REQUIRE_ALL"] = require_all
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-ra", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("value", [None, "0"])
def test_without_the_switch_a_missing_prerequisite_skips(tmp_path: Path, value: str | None) -> None:
    done = _pytest(tmp_path, value)
    assert done.returncode == 0, done.stdout
    assert "1 passed, 4 skipped" in done.stdout


def test_with_the_switch_every_skip_fails_with_its_reason_on_one_line(tmp_path: Path) -> None:
    done = _pytest(tmp_path, "1")
    assert done.returncode == 1, done.stdout
    # a skip in set-up (fixture, mark) is an error, one in the test a failure: none passes quietly
    assert "1 failed, 1 passed, 3 errors" in done.stdout and "skipped" not in done.stdout
    lines = done.stdout.splitlines()
    for reason, n in [("no local cluster: java not found", "2 tests"), ("table.json missing", "1 test"),
                      ("could not import 'no_such_module_for_faultline': No module named "
                       "'no_such_module_for_faultline'", "1 test")]:
        assert f"{PREFIX}{reason} ({n})" in lines, done.stdout
    assert "Traceback" not in done.stdout


def test_with_the_switch_a_module_skipped_at_collection_fails_the_run(tmp_path: Path) -> None:
    assert "1 skipped" in _pytest(tmp_path, None, MODULE).stdout
    done = _pytest(tmp_path, "1", MODULE)
    assert done.returncode != 0 and "skipped" not in done.stdout, done.stdout
    reason = "could not import 'no_such_browser_driver_for_faultline': No module named " \
             "'no_such_browser_driver_for_faultline'"
    assert f"{PREFIX}{reason} (1 test)" in done.stdout.splitlines(), done.stdout
