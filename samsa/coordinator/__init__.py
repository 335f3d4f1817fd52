"""The group coordinator: classic consumer groups and committed offsets, one shard per
`__consumer_offsets` partition (see shard.py for how the broker drives a shard)."""

from .base import CoordinatorConfig
from .group import Group, GroupState, Member
from .records import RecordDecodeError, partition_for
from .shard import GroupCoordinatorShard

__all__ = [
    "CoordinatorConfig",
    "Group",
    "GroupCoordinatorShard",
    "GroupState",
    "Member",
    "RecordDecodeError",
    "partition_for",
]
