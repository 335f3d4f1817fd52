"""Fixtures for the real-client compatibility tests (see docs/compat.md).

The external tools (kcat, node with compat/kafkajs/node_modules) come from
scripts/install-deps.sh; a test that needs a missing one fails with that hint rather than
skipping, so a machine without them cannot look green.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest

# kafka-python 3.0 builds its protocol classes at import time from JSON schemas read with
# importlib.resources.read_text, deprecated in Python 3.11. The read_text warning is attributed
# to kafka-python (ignored by pyproject's `kafka.*` filter), but the nested open_text warning is
# attributed to importlib itself, so it is silenced here by its message, for these imports and
# (below) for these tests only.
OPEN_TEXT_WARNING = "open_text is deprecated"
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", OPEN_TEXT_WARNING, DeprecationWarning)
    import kafka  # noqa: F401
    import kafka.admin  # noqa: F401
    import kafka.consumer  # noqa: F401
    import kafka.producer  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
KAFKAJS_DIR = REPO / "compat" / "kafkajs"


@pytest.fixture(scope="session")
def kcat_bin() -> str:
    path = shutil.which("kcat")
    if path is None:
        pytest.fail("kcat not found: run scripts/install-deps.sh")
    return path


@pytest.fixture(scope="session")
def kafkajs_runner() -> list[str]:
    node = shutil.which("node")
    if node is None or not (KAFKAJS_DIR / "node_modules" / "kafkajs").is_dir():
        pytest.fail("node or compat/kafkajs/node_modules missing: run scripts/install-deps.sh")
    return [node, str(KAFKAJS_DIR / "runner.js")]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.filterwarnings(f"ignore:{OPEN_TEXT_WARNING}:DeprecationWarning"))
