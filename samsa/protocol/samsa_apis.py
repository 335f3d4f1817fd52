"""Samsa's own APIs, served beside Kafka's, in the form of the generated specs (_specs.py).

Their keys are far above Kafka's (Kafka's clients list an ApiVersions entry they do not know
and never use it), and they are flexible from v0.

DescribeLogCleaner (key 10000, v0): the log cleaner's state of this broker's compacted logs
(Kafka shows it only as JMX metrics and in log-cleaner.log). `samsa log-dirs --describe
--cleaner` prints it.

    request   topics: [name, partitions: [int32]] | null (null: every compacted log)
    response  throttle_time_ms, error_code,
              logs: [topic, partition, log_dir, first_dirty_offset, dirty_ratio (float64),
                     in_progress, uncleanable_reason (null: cleanable), last_clean_ms (-1: never),
                     cleans, bytes_reclaimed, last_summary]
"""

from __future__ import annotations

from typing import Any

DESCRIBE_LOG_CLEANER_KEY = 10000


def _f(name: str, kind: str, *, nullable: bool = False, array: bool = False, default: Any = ...,
       nested: Any = None) -> tuple[Any, ...]:
    return (name, kind, nullable, array, None, default, nested)


SPECS: dict[tuple[int, int], tuple[Any, Any]] = {
    (DESCRIBE_LOG_CLEANER_KEY, 0): (
        (True, (_f("topics", "struct", nullable=True, array=True, default=None, nested=(True, (
            _f("name", "string"), _f("partitions", "int32", array=True, default=()),))),)),
        (True, (_f("throttle_time", "timedelta_i32"), _f("error_code", "error_code"),
                _f("logs", "struct", array=True, default=(), nested=(True, (
                    _f("topic", "string"), _f("partition", "int32"), _f("log_dir", "string"),
                    _f("first_dirty_offset", "int64"), _f("dirty_ratio", "float64"), _f("in_progress", "bool"),
                    _f("uncleanable_reason", "string", nullable=True, default=None),
                    _f("last_clean_ms", "int64", default=-1), _f("cleans", "int32"),
                    _f("bytes_reclaimed", "int64"), _f("last_summary", "string")))))),
    ),
}
