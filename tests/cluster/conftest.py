from tests.zk.conftest import zk_server  # noqa: F401  (the real ZooKeeper fixture)
