"""Fixtures of the transaction tests: the same as the client compatibility tests (kafkajs runner,
kafka-python's import warnings)."""

from tests.compat.conftest import kafkajs_runner, pytest_collection_modifyitems  # noqa: F401
