"""The pytest plugin's settings, without a cluster: a marker or option it cannot use is one
line naming it, and no cluster starts (the plugin on real clusters:
tests/integration/test_pytest_plugin.py)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

pytest_plugins = ["pytester"]


@pytest.mark.parametrize(("mark", "options", "message"), [
    ("faultline(nodez=3)", (), "faultline marker: unknown nodez; keywords: backend, nodes, "),
    ("faultline(broker=['a=b'])", (), "faultline marker: broker must be a mapping of settings"),
    ("faultline(nodes=9)", (), "faultline: no cluster: "),
    ("faultline", ("--faultline-broker=oops",), "--faultline-broker 'oops': expected KEY=VALUE"),
])
def test_settings_it_cannot_use_are_one_line_naming_them(pytester: pytest.Pytester, mark: str,
                                                         options: tuple[str, ...], message: str) -> None:
    pytester.makepyfile(f"""
        import pytest

        @pytest.mark.{mark}
        def test_it(faultline):
            pass
        """)
    result = pytester.runpytest_inprocess("-p", "faultline.pytest_plugin", *options)
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    assert message in out and "Traceback" not in out and "def test_it" not in out, out


FAKE = """
import pytest
import faultline.cluster.backends as backends

class Fake:
    def __init__(self, spec):
        self.spec, self.nodes = spec, [1] * spec.kafka.nodes

    def __enter__(self):
        print(f"fake: start {len(self.nodes)}")
        return self

    def __exit__(self, *exc):
        print(f"fake: stop {len(self.nodes)}")

    def wait_healthy(self, timeout):
        pass


@pytest.fixture(autouse=True)
def fake_backend(monkeypatch):
    monkeypatch.setattr(backends, "cluster_for", lambda spec: Fake)
"""


@pytest.mark.parametrize(("scope", "events"), [
    ("session", "start 3, stop 3, start 1, stop 1, start 3, stop 3"),
    ("module", "start 3, stop 3, start 3, stop 3, start 1, stop 1, start 3, stop 3"),
])
def test_tests_with_the_same_settings_share_a_cluster_for_the_session_or_the_module(
        pytester: pytest.Pytester, scope: str, events: str) -> None:
    pytester.makeconftest(FAKE)
    test = "def test_{}(faultline):\n    assert len(faultline.cluster.nodes) == {}\n"
    pytester.makepyfile(test_a=test.format("a", 3), test_b=test.format("b", 3),
                        test_c="import pytest\n\n@pytest.mark.faultline(nodes=1)\n" + test.format("c", 1)
                        + test.format("d", 3))
    result = pytester.runpytest_subprocess("-p", "faultline.pytest_plugin", f"--faultline-scope={scope}",
                                           "-s")
    result.assert_outcomes(passed=4)
    assert ", ".join(re.findall(r"fake: (\w+ \d)", result.stdout.str())) == events
    started = [line for line in result.outlines if line.startswith("faultline: started a cluster")]
    assert len(started) == events.count("start")


def test_loading_the_plugin_imports_no_other_faultline_module_and_names_every_backend() -> None:
    """Every pytest run where kafka-faultline is installed loads the plugin: that costs
    pytest alone; the cluster, spec and nemeses come with the fixture's first use."""
    code = ("import sys, faultline.pytest_plugin as p; "
            "print(sorted(m for m in sys.modules if m.startswith('faultline.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['faultline.pytest_plugin']"
    from faultline import pytest_plugin
    from faultline.cluster.backends import BACKENDS

    assert tuple(BACKENDS) == pytest_plugin.BACKEND_NAMES
