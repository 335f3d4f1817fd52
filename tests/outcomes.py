"""What each test of this pytest session came to, for tests that check a document against the
results (tests/compat/test_clients_doc.py). tests/conftest.py feeds it from pytest's hooks.

OUTCOMES: node id -> "passed", "failed" or "skipped" (a failure in any phase wins; a test passes
when its call did and nothing failed). COLLECTED: every node id of the session. Tests in
LAST_FILES run after every other, so that they see the others' outcomes.
"""

from __future__ import annotations

import pytest

OUTCOMES: dict[str, str] = {}
COLLECTED: set[str] = set()
LAST_FILES = ("test_clients_doc.py",)


def record(report: pytest.TestReport) -> None:
    nodeid, before = report.nodeid, OUTCOMES.get(report.nodeid)
    if report.failed:
        OUTCOMES[nodeid] = "failed"
    elif before == "failed":
        return
    elif report.skipped:
        OUTCOMES[nodeid] = "skipped"
    elif report.when == "call":
        OUTCOMES[nodeid] = "passed"


def collected(items: list[pytest.Item]) -> None:
    COLLECTED.update(item.nodeid for item in items)
    last = [item for item in items if item.path.name in LAST_FILES]
    if last:
        items[:] = [item for item in items if item.path.name not in LAST_FILES] + last
