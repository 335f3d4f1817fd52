"""PySpark Python Data Source for Samsa topics (issue 5), with Spark's Kafka-source options.

`options` parses and validates the options, `offsets` handles Spark's per-partition offset JSON
and the micro-batch planning arithmetic, `arrow` decodes record batches into Arrow columns.
"""
