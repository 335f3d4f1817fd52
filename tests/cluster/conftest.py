from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.cluster import Cluster
from tests.zk.conftest import ZooKeeperServer, zk_server  # noqa: F401  (the real ZooKeeper fixture)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: multi-broker tests with real processes (seconds each); "
                                       "deselect with -m 'not slow'")


@pytest.fixture
def cluster(zk_server: ZooKeeperServer, tmp_path: Path) -> Iterator[Callable[..., Cluster]]:  # noqa: F811
    """Factory: `cluster(n=3, **overrides)` starts N brokers on the session's ZooKeeper, in a
    chroot of their own; `cluster(n, start=False)` only prepares them. Every broker process it
    started is killed at teardown (by object), whatever the test left running or paused."""
    made: list[Cluster] = []

    def make(n: int = 3, start: bool = True, zk_hosts: str | None = None, **overrides: Any) -> Cluster:
        c = Cluster(tmp_path / f"cluster{len(made)}", zk_hosts or zk_server.hosts, n, overrides)
        made.append(c)
        return c.start_all() if start else c

    yield make
    for c in made:
        c.close()
