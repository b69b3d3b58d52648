"""The rule of ``tests/needs.py``: a missing tool skips a test with its reason, and fails it in CI."""

from __future__ import annotations

import pytest

from tests import needs


@pytest.mark.parametrize("value", ["true", "TRUE", "1", "yes"])
def test_in_ci_a_missing_tool_fails_the_test_naming_it(value, monkeypatch):
    monkeypatch.setenv("CI", value)
    monkeypatch.delenv("USS_NO_SUCH_VARIABLE", raising=False)
    with pytest.raises(pytest.fail.Exception, match="USS_NO_SUCH_VARIABLE is not set: start it"):
        needs.variable("USS_NO_SUCH_VARIABLE", "start it")
    with pytest.raises(pytest.fail.Exception, match="no-such-program-uss is not on PATH"):
        needs.program("no-such-program-uss", "install it")
    with pytest.raises(pytest.fail.Exception, match="no_such_module_uss is not importable"):
        needs.module("no_such_module_uss")


@pytest.mark.parametrize("value", [None, "", "false", "0"])
def test_elsewhere_a_missing_tool_skips_the_test_with_the_reason(value, monkeypatch):
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.skip.Exception, match=r"no_such_module_uss is not importable .*make setup"):
        needs.module("no_such_module_uss")
    with pytest.raises(pytest.skip.Exception, match="no-such-program-uss is not on PATH: install it"):
        needs.program("no-such-program-uss", "install it")


def test_what_is_there_is_returned(monkeypatch):
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("USS_SOME_VARIABLE", "http://r:8081")
    assert needs.variable("USS_SOME_VARIABLE", "") == "http://r:8081"
    assert needs.module("json").dumps([1]) == "[1]"
    assert needs.program("sh", "").endswith("/sh")
