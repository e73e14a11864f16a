"""Shared pytest settings for the oracle suites.

Strict mode (env ZINC_STRICT=1, set by ctest, i.e. by `make test` and CI): a skipped test is a
failure. The suites skip when a model, a built tool or an oracle package (llama_cpp, gguf,
jinja2) is missing, which is convenient while developing but must never let CI pass having
checked nothing.
"""
import os

import pytest

STRICT = os.environ.get("ZINC_STRICT", "") not in ("", "0")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    if not STRICT:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    if skipped:
        lines = []
        for rep in skipped:
            reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
            lines.append(f"  {rep.nodeid}: {reason}")
        print("\nZINC_STRICT=1: skipped tests count as failures (install deps, fetch models):")
        print("\n".join(lines))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
