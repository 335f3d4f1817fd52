"""PySpark finds this module by its name (`pyspark_*` exposing `DefaultSource`), so
`spark.readStream.format("samsa")` works with no registration call."""

from samsa.spark.source import SamsaDataSource as DefaultSource

__all__ = ["DefaultSource"]
