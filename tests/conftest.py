from __future__ import annotations

import os
import subprocess
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


REPO = Path(__file__).resolve().parents[1]
# why the shared SparkSession has no Kafka connector (None: it has one)
_NO_KAFKA_CONNECTOR: list[str | None] = [None]


def _kafka_connector_jars() -> list[str]:
    """Spark's own Kafka connector's jars (scripts/kafka-jars.sh spark-kafka: Maven once, then
    cached in build/jars/spark-kafka), or [] with the reason kept for the `kafka_connector` fixture."""
    from samsa.spark.kafka_jars import ConnectorJarsMissing, connector_jars

    fetched = subprocess.run(["bash", str(REPO / "scripts" / "kafka-jars.sh"), "spark-kafka"],
                             capture_output=True, text=True, timeout=900)
    if fetched.returncode != 0:
        _NO_KAFKA_CONNECTOR[0] = ("Spark's Kafka connector could not be fetched: "
                                  + (fetched.stderr.strip().splitlines() or ["(no message)"])[-1])
        return []
    try:
        return connector_jars(str(REPO / "build" / "jars" / "spark-kafka"))
    except ConnectorJarsMissing as e:
        _NO_KAFKA_CONNECTOR[0] = str(e)
        return []


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local SparkSession for the whole test session (its start-up costs ~10 s), with Spark's
    own Kafka connector on spark.jars when its jars can be had (see `kafka_connector`)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from samsa.spark.home import use_installed_pyspark

    use_installed_pyspark("local[2]")
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[2]").appName("samsa-tests")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC"))
    jars = _kafka_connector_jars()
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def kafka_connector(spark: Any) -> Any:
    """The shared SparkSession, for a test of Spark's own Kafka connector (`format("kafka")`).
    Without its jars (no Maven, no network) the test skips, unless SAMSA_REQUIRE_JAVA is set
    (./test.sh sets it), where it fails."""
    why = _NO_KAFKA_CONNECTOR[0]
    if why is not None:
        if os.environ.get("SAMSA_REQUIRE_JAVA", "") not in ("", "0"):
            pytest.fail(f"{why} (and SAMSA_REQUIRE_JAVA is set)")
        pytest.skip(f"{why}: run scripts/install-deps.sh (SAMSA_REQUIRE_JAVA=1 makes this a failure)")
    return spark


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    from tests import outcomes

    outcomes.record(report)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    from tests import outcomes

    outcomes.collected(items)
