"""Fixtures for the real-client compatibility tests (see docs/compat.md).

The external tools (kcat, node with compat/kafkajs/node_modules) come from
scripts/install-deps.sh; a test that needs a missing one fails with that hint rather than
skipping, so a machine without them cannot look green.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.compat.kafkatools import kafka_tools  # noqa: F401  (Kafka's CLI tools, for test_kafka_tools.py)

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
JAVA_DIR = REPO / "compat" / "java"
JAVA_CLIENT = JAVA_DIR / "SamsaJavaClient.java"  # (main; its scenarios are in the other *.java files there)


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


@pytest.fixture(scope="session")
def java_client(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The command running compat/java/SamsaJavaClient.java (Kafka's own Java client) but for
    its JSON spec: the jars come from scripts/kafka-jars.sh (Maven, once; then cached in
    build/jars/clients), the program (every compat/java/*.java) is compiled once per session.

    Without a JDK or the jars, the tests skip, unless SAMSA_REQUIRE_JAVA is set (./test.sh sets
    it), where they fail."""
    required = os.environ.get("SAMSA_REQUIRE_JAVA", "") not in ("", "0")

    def unavailable(why: str) -> None:
        if required:
            pytest.fail(f"{why} (and SAMSA_REQUIRE_JAVA is set)")
        pytest.skip(f"{why}: run scripts/install-deps.sh (SAMSA_REQUIRE_JAVA=1 makes this a failure)")

    java, javac = shutil.which("java"), shutil.which("javac")
    if java is None or javac is None:
        unavailable("no JDK: java and javac are needed for Kafka's Java client")
    assert java is not None and javac is not None
    jars = subprocess.run(["bash", str(REPO / "scripts" / "kafka-jars.sh"), "--print-classpath", "clients"],
                          capture_output=True, text=True, timeout=900)
    if jars.returncode != 0:
        unavailable("Kafka's client jars could not be fetched: "
                    + (jars.stderr.strip().splitlines() or ["(no message)"])[-1])
    classpath = jars.stdout.strip()
    classes = tmp_path_factory.mktemp("java-client")
    sources = sorted(str(p) for p in JAVA_DIR.glob("*.java"))
    build = subprocess.run([javac, "-Xlint:all", "-Werror", "-d", str(classes), "-cp", classpath, *sources],
                           capture_output=True, text=True, timeout=300)
    if build.returncode != 0:
        pytest.fail(f"javac {' '.join(p.rsplit('/', 1)[-1] for p in sources)} failed:\n{build.stdout}{build.stderr}")
    # (C1 only and the serial collector: these short runs start faster on 2 loaded cores)
    return [java, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", f"{classpath}{os.pathsep}{classes}",
            "SamsaJavaClient"]


@pytest.fixture(scope="session")
def apache_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Apache Kafka 4.4 (KRaft, one node, 512 MiB heap) for the differential tests: its
    bootstrap address. Jars and JDK as for `java_client` (skip without them, unless
    SAMSA_REQUIRE_JAVA is set)."""
    from tests.kafkaproc import ApacheKafka, JarsMissing, kafka_classpath

    required = os.environ.get("SAMSA_REQUIRE_JAVA", "") not in ("", "0")
    why = None
    if shutil.which("java") is None:
        why = "no java: Apache Kafka needs a JRE"
    else:
        try:
            classpath = kafka_classpath("tools")
        except JarsMissing as e:
            why = f"Kafka's jars could not be fetched: {e}"
    if why is not None:
        if required:
            pytest.fail(f"{why} (and SAMSA_REQUIRE_JAVA is set)")
        pytest.skip(f"{why}: run scripts/install-deps.sh (SAMSA_REQUIRE_JAVA=1 makes this a failure)")
    kafka = ApacheKafka(tmp_path_factory.mktemp("apache-kafka"), classpath, heap="512M").start()
    try:
        yield kafka.bootstrap
    finally:
        kafka.stop(60)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.filterwarnings(f"ignore:{OPEN_TEXT_WARNING}:DeprecationWarning"))
