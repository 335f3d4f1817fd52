"""Where Spark's own Kafka connector is: the jars `format("kafka")` needs (`spark.jars`).

PySpark comes without its Kafka connector. `scripts/kafka-jars.sh spark-kafka` fetches it with
Maven, at exactly the installed PySpark's version, with what it adds to PySpark's own jars
(kafka-clients, spark-token-provider-kafka-0-10, commons-pool2), into this checkout's
`build/jars/spark-kafka/`. `connector_jars()` finds them there, or where a caller (an option)
or $SAMSA_SPARK_KAFKA_JARS points, and says in one line how to get them when they are not
there. Samsa's own source, `format("samsa")`, needs none of this.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
from pathlib import Path

ENV = "SAMSA_SPARK_KAFKA_JARS"
FETCH = "bash scripts/kafka-jars.sh spark-kafka"
CONNECTOR = re.compile(r"^spark-sql-kafka-0-10_2\.13-(?P<version>.+)\.jar$")


class ConnectorJarsMissing(RuntimeError):
    """The connector's jars are not where they were looked for (the message says how to get them)."""


def default_dir() -> Path:
    """`build/jars/spark-kafka` of the checkout this package runs from (scripts/kafka-jars.sh's)."""
    return Path(__file__).resolve().parents[2] / "build" / "jars" / "spark-kafka"


def pyspark_version() -> str | None:
    try:
        return importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        return None


def connector_jars(where: str | None = None) -> list[str]:
    """The connector's jar files, for `spark.jars`. `where` is a directory of jars or a list of
    jar files (comma- or os.pathsep-separated); default $SAMSA_SPARK_KAFKA_JARS, else
    `default_dir()`. Raises ConnectorJarsMissing when no connector jar is there, or when it is
    not for the installed PySpark's version (the connector must match Spark exactly)."""
    where = where or os.environ.get(ENV) or str(default_dir())
    jars: list[Path] = []
    for part in re.split(f"[,{re.escape(os.pathsep)}]", where):
        p = Path(part.strip()).expanduser()
        if p.is_dir():
            jars += sorted(p.glob("*.jar"))
        elif p.suffix == ".jar" and p.is_file():
            jars.append(p)
    found = [m.group("version") for m in (CONNECTOR.match(j.name) for j in jars) if m]
    if not found:
        raise ConnectorJarsMissing(f"Spark's Kafka connector (spark-sql-kafka-0-10_2.13) is not in {where}: "
                                   f"fetch it with `{FETCH}` (or give where its jars are: --connector-jars, ${ENV})")
    version = pyspark_version()
    if version is not None and version not in found:
        raise ConnectorJarsMissing(f"Spark's Kafka connector in {where} is for Spark {', '.join(found)}, PySpark is "
                                   f"{version}: fetch the matching one with `{FETCH}`")
    return [str(j.resolve()) for j in jars]
