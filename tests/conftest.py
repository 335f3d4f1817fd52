from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

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


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local SparkSession for the whole test session (its start-up costs ~10 s)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from samsa.spark.home import use_installed_pyspark

    use_installed_pyspark("local[2]")
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("samsa-tests")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
