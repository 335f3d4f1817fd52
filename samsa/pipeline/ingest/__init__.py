"""Acquisition: the sources that feed the pipeline's topics (`samsa ingest http|simulate|file`).

`producer.IngestProducer` is the one producer they share (acks=all, idempotent, delivery reports
counted and logged, failed records sent again on request); `simulate`, `poll_http` and `filetail`
are the sources, each a class with `run(stop)` that the CLI and the demo run in a thread.
"""
