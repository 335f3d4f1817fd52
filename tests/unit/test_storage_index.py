"""samsa.storage on-disk pieces: offset/time indexes, checkpoints, LogConfig."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

from samsa.storage.checkpoints import (
    EpochEntry,
    read_leader_epochs,
    read_offsets,
    write_leader_epochs,
    write_offsets,
)
from samsa.storage.config import LogConfig
from samsa.storage.errors import CorruptCheckpoint, CorruptIndex
from samsa.storage.offset_index import OffsetIndex
from samsa.storage.time_index import TimeIndex

# ----------------------------------------------------------------------------- offset index


def test_offset_index_lookup_write_and_lazy_reload(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    idx = OffsetIndex(path, 100, max_entries=1000)
    assert idx.lookup(150) == (100, 0)
    for i in range(1, 50):
        assert idx.append(100 + 3 * i, 1000 * i)
    assert idx.lookup(99) == (100, 0)
    assert idx.lookup(103) == (103, 1000)
    assert idx.lookup(104) == (103, 1000)
    assert idx.lookup(106) == (106, 2000)
    assert idx.lookup(10**12) == (247, 49000)
    with pytest.raises(ValueError):
        idx.append(200, 100)  # positions and offsets must grow
    idx.write()
    raw = path.read_bytes()
    assert len(raw) == 49 * 8
    assert struct.unpack(">ii", raw[:8]) == (3, 1000)  # relative offset, position; big-endian
    again = OffsetIndex(path, 100, max_entries=1000, exists=True)
    assert len(again) == 49 and again.last_entry() == (247, 49000)
    assert again.lookup(104) == (103, 1000)  # loads lazily
    again.truncate_to(106)
    assert again.last_entry() == (103, 1000)
    again.append(110, 5000)
    again.write(fsync=True)
    assert len(path.read_bytes()) == 16
    assert OffsetIndex(path, 100, 1000, exists=True).entries() == [(103, 1000), (110, 5000)]


def test_offset_index_full_and_sanity(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    idx = OffsetIndex(path, 0, max_entries=2)
    assert idx.append(1, 10) and idx.append(2, 20)
    assert idx.is_full and not idx.append(3, 30)
    idx.write()
    loaded = OffsetIndex(path, 0, 2, exists=True)
    loaded.sanity_check(log_size=21)
    with pytest.raises(CorruptIndex):
        loaded.sanity_check(log_size=20)  # last position beyond the .log
    path.write_bytes(b"\x00" * 9)
    with pytest.raises(CorruptIndex):
        OffsetIndex(path, 0, 2, exists=True)


# ----------------------------------------------------------------------------- time index


def test_time_index_monotonic_lookup_and_reload(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000010.timeindex"
    idx = TimeIndex(path, 10, max_entries=3)
    assert idx.lookup(5) == (-1, 10)
    assert idx.maybe_append(1000, 12)
    assert not idx.maybe_append(1000, 13)  # timestamp did not grow
    assert not idx.maybe_append(-1, 14)
    assert idx.maybe_append(2000, 15) and idx.maybe_append(3000, 20)
    assert not idx.maybe_append(4000, 25)  # full
    assert idx.maybe_append(4000, 25, skip_full_check=True)  # the final entry at roll
    assert idx.lookup(999) == (-1, 10)
    assert idx.lookup(2500) == (2000, 15)
    assert idx.lookup(10**15) == (4000, 25)
    idx.write()
    raw = path.read_bytes()
    assert len(raw) == 48 and struct.unpack(">qi", raw[:12]) == (1000, 2)
    again = TimeIndex(path, 10, 3, exists=True)
    assert again.last_entry() == (4000, 25)  # without loading the rest
    assert again.entries() == [(1000, 12), (2000, 15), (3000, 20), (4000, 25)]
    again.truncate_to(16)
    assert again.last_entry() == (2000, 15)
    again.write()
    assert TimeIndex(path, 10, 3, exists=True).entries() == [(1000, 12), (2000, 15)]
    path.write_bytes(b"\x00" * 13)
    with pytest.raises(CorruptIndex):
        TimeIndex(path, 10, 3, exists=True)


# ----------------------------------------------------------------------------- shared base (index.py)


@pytest.mark.parametrize(("cls", "fmt"), [(OffsetIndex, ">ii"), (TimeIndex, ">qi")])
def test_index_file_is_the_struct_layout_through_appends_truncation_and_reset(tmp_path: Path, cls: Any,
                                                                             fmt: str) -> None:
    """Whatever the entry widths, the file is the entries packed big-endian back to back:
    written in pieces, reloaded lazily, cut by truncation and emptied by reset."""
    path = tmp_path / "idx"
    idx = cls(path, 1000, max_entries=1000)
    assert cls.ENTRY == struct.calcsize(fmt)

    def add(i: int) -> None:  # offsets 1000 + 2i, positions/timestamps growing, some past int32
        if cls is OffsetIndex:
            assert idx.append(1000 + 2 * i, 100 * i + 7)
        else:
            assert idx.maybe_append((1 << 33) + 5 * i, 1000 + 2 * i)

    def want(n: int) -> bytes:
        if cls is OffsetIndex:
            return b"".join(struct.pack(fmt, 2 * i, 100 * i + 7) for i in range(1, n + 1))
        return b"".join(struct.pack(fmt, (1 << 33) + 5 * i, 2 * i) for i in range(1, n + 1))

    for i in range(1, 6):
        add(i)
    idx.write()
    assert path.read_bytes() == want(5)
    for i in range(6, 11):
        add(i)
    assert idx.dirty
    idx.write(fsync=True)
    assert path.read_bytes() == want(10) and not idx.dirty and idx.synced
    again = cls(path, 1000, max_entries=1000, exists=True)
    assert len(again) == 10 and not again.dirty  # counted from the file size, not loaded
    assert again.entries() == idx.entries()  # loads on first use
    again.truncate_to(1000 + 2 * 7)  # keeps entries 1..6
    again.write()
    assert path.read_bytes() == want(6)
    again.reset()
    assert len(again) == 0 and again.dirty
    again.write()
    assert path.read_bytes() == b""


# ----------------------------------------------------------------------------- checkpoints


def test_offset_checkpoint_round_trip_and_format(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    assert read_offsets(path) == {}
    offsets = {("my-topic.v2", 0): 1234, ("a", 7): 0, ("my-topic.v2", 11): 9}
    write_offsets(path, offsets)
    assert read_offsets(path) == offsets
    assert path.read_text().splitlines()[:3] == ["0", "3", "a 7 0"]
    assert not list(tmp_path.glob("*.tmp"))
    write_offsets(path, {})
    assert read_offsets(path) == {} and path.read_text() == "0\n0\n"


@pytest.mark.parametrize("text", ["", "1\n0\n", "0\n2\nt 0 5\n", "0\n1\nt zero 5\n", "0\n1\nt 0\n", "\xff"])
def test_corrupt_checkpoint_raises(tmp_path: Path, text: str) -> None:
    path = tmp_path / "cp"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(CorruptCheckpoint):
        read_offsets(path)


def test_leader_epoch_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    assert read_leader_epochs(path) == []
    write_leader_epochs(path, [(0, 0), EpochEntry(3, 1200)])
    assert path.read_text() == "0\n2\n0 0\n3 1200\n"
    assert read_leader_epochs(path) == [EpochEntry(0, 0), EpochEntry(3, 1200)]
    path.write_text("0\n1\n3\n")
    with pytest.raises(CorruptCheckpoint):
        read_leader_epochs(path)


# ----------------------------------------------------------------------------- LogConfig


def test_log_config_defaults_and_topic_configs() -> None:
    d = LogConfig()
    assert (d.segment_bytes, d.retention_ms, d.retention_bytes) == (1073741824, 604800000, -1)
    assert (d.index_interval_bytes, d.segment_index_bytes, d.max_message_bytes) == (4096, 10485760, 1048588)
    assert d.flush_messages == 2**63 - 1 and d.cleanup_policy == "delete" and d.delete_enabled
    c = LogConfig.from_topic_configs({"segment.bytes": "1048576", "retention.ms": "-1", "cleanup.policy": "compact",
                                      "message.timestamp.type": "LogAppendTime", "min.insync.replicas": "2"})
    assert c.segment_bytes == 1048576 and c.retention_ms == -1 and c.log_append_time
    assert c.compact_enabled and not c.delete_enabled
    assert LogConfig.from_topic_configs(c.to_topic_configs()) == c
    with pytest.raises(ValueError, match=r"retention\.bytes"):
        LogConfig.from_topic_configs({"retention.bytes": "lots"})
    with pytest.raises(ValueError):
        LogConfig.from_topic_configs({"cleanup.policy": "shred"})


def test_log_config_from_broker_configs() -> None:
    c = LogConfig.from_broker_configs({"log.retention.hours": "168", "log.segment.bytes": "1000000",
                                       "log.roll.hours": "1", "log.flush.interval.messages": "1"})
    assert (c.retention_ms, c.segment_bytes, c.segment_ms, c.flush_messages) == (604800000, 1000000, 3600000, 1)
    c = LogConfig.from_broker_configs({"log.retention.hours": "1", "log.retention.minutes": "2"})
    assert c.retention_ms == 120000
    assert LogConfig.from_broker_configs({"log.retention.hours": "-1"}).retention_ms == -1
