"""Samsa for Spark: a PySpark data source with the options and schema of Spark's Kafka source.

`spark.read.format("samsa")` / `spark.readStream.format("samsa")` work without registration
once `pip install samsa[spark]` is done (PySpark discovers the top-level `pyspark_samsa`);
`samsa.spark.register(spark)` registers it explicitly. `use_installed_pyspark()`, called before
the first SparkSession, makes Spark's Python workers start faster (see `home.py`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["register", "use_installed_pyspark"]


def __getattr__(name: str) -> Any:
    # Loaded on first use: Spark imports this package in every Python process it starts
    # (the streaming source's among them, on the query's critical path), and none of them needs it.
    if name == "use_installed_pyspark":
        from samsa.spark.home import use_installed_pyspark

        return use_installed_pyspark
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register(spark: Any) -> None:
    """Register the "samsa" data source with a SparkSession."""
    from samsa.spark.source import SamsaDataSource

    spark.dataSource.register(SamsaDataSource)
