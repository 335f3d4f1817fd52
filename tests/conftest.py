from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Callable

import pytest

from tests.brokerproc import BrokerProcess


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker shared by the whole test session (tests use unique topic names)."""
    b = BrokerProcess(tmp_path_factory.mktemp("broker"))
    b.start()
    yield b
    b.close()


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    """Brokers of a test's own, for restarts, kill -9 and special configs."""
    made: list[BrokerProcess] = []

    def make(**overrides: str) -> BrokerProcess:
        b = BrokerProcess(tmp_path / f"broker{len(made)}", {k.replace("_", "."): v for k, v in overrides.items()})
        made.append(b)
        return b.start()

    yield make
    for b in made:
        b.close()


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"
