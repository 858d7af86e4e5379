"""The pytest plugin's settings, without a cluster: a marker or option it cannot use is one
line naming it, and no cluster starts (the plugin on real clusters:
tests/integration/test_pytest_plugin.py)."""

from __future__ import annotations

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
