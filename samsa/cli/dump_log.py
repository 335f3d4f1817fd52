"""`samsa dump-log`: kafka-dump-log.sh — print what a log directory's files hold.

    samsa dump-log --files DIR/00000000000000000000.log[,FILE...] [--print-data-log]
                   [--deep-iteration] [--verify-index-only] [--index-sanity-check]
                   [--offsets-decoder | --transaction-log-decoder] [--max-bytes N]

Each file is dumped by its suffix, line for line as Kafka's DumpLogSegments prints it (the
formats are in samsa/storage/: segment.py, offset_index.py, time_index.py, txn_index.py,
producer_state.py):

    .log        "Log starting offset: N", then one line per batch (its header fields, position,
                size, codec, CRC and whether the CRC holds); with --deep-iteration (implied by
                --print-data-log and the decoders) one "| offset: ..." line per record, with
                the transaction marker of a control record, and with --print-data-log its key
                and payload (UTF-8, or the JSON of a __consumer_offsets / __transaction_state
                record with a decoder, coordinator_json.py)
    .index      "offset: N position: P" per entry, each checked against the batch at P
    .timeindex  "timestamp: T offset: N" per entry, each checked against the log
    .txnindex   one line per aborted transaction
    .snapshot   one line per producer of a producer-state snapshot

`--verify-index-only` checks the indexes without listing them; `--index-sanity-check` runs only
the check a broker makes at start-up. The findings follow the dump on stderr, with Kafka's
words ("Mismatches in :FILE", "Non-consecutive offsets in FILE", ...), and do not change the
exit status, as in Kafka.

Where Kafka's tool stops with a stack trace (a file that cannot be opened, a batch whose length
field is impossible, records that do not decode, a file name without a base offset), this one
prints one line naming the file and the problem on stderr, goes on with the next batch or file,
and exits with status 1. Control records other than transaction markers (KRaft's, which Samsa
never writes) print as "controlType: NAME(id)" where Kafka prints their JSON.
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
from bisect import bisect_right
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from crc32c import crc32c

from samsa.cli import coordinator_json
from samsa.cli.common import ArgumentParser, CliError
from samsa.cli.java_order import hashmap_order, string_hash
from samsa.protocol.batch import ATTR_CONTROL, ATTR_TIMESTAMP_TYPE, ATTR_TRANSACTIONAL, CRC_START, HEADER, BatchHeader
from samsa.protocol.compression import CODEC_NAMES
from samsa.protocol.records import InvalidRecords, Record, decode_records

INT32_MAX = 2**31 - 1
LOG_OVERHEAD = 12  # base offset, batch length
HEADER_UP_TO_MAGIC = 17
MIN_RECORD_OVERHEAD = 14  # Kafka's smallest legal size field (a v0 message's)
ATTR_DELETE_HORIZON = 0x40
RECORD_INDENT = "|"
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER",
                 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}

_PREFIX = struct.Struct(">qib")  # base offset, batch length, (leader epoch skipped below), magic
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_TXN_ENTRY = struct.Struct(">hqqqq")
_SNAPSHOT_HEAD = struct.Struct(">hIi")
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="samsa dump-log", description="Parse log segment files and print their contents "
                       "(like kafka-dump-log.sh), to debug a seemingly corrupt log segment.")
    p.add_argument("--files", metavar="FILE1,FILE2,...", required=True,
                   help="REQUIRED: the comma-separated data and index files to dump")
    p.add_argument("--print-data-log", action="store_true",
                   help="print the records' contents (implied by a decoder option)")
    p.add_argument("--deep-iteration", action="store_true",
                   help="print every record, not only the batches (implied by --print-data-log)")
    p.add_argument("--verify-index-only", action="store_true", help="check the indexes without printing them")
    p.add_argument("--index-sanity-check", action="store_true",
                   help="only the index check a broker makes at start-up")
    p.add_argument("--offsets-decoder", action="store_true", help="decode records as __consumer_offsets records")
    p.add_argument("--transaction-log-decoder", action="store_true",
                   help="decode records as __transaction_state records")
    p.add_argument("--skip-record-metadata", action="store_true",
                   help="print the records' contents without their metadata")
    p.add_argument("--max-bytes", type=int, default=INT32_MAX, metavar="N",
                   help="read at most N bytes of each .log file")
    p.add_argument("--max-message-size", type=int, default=5 * 1024 * 1024, metavar="N",
                   help="the largest batch an index entry may point at (default 5 MiB)")
    return p


def java_path(arg: str) -> str:
    """The path as java.io.File prints it: repeated and trailing slashes removed."""
    while "//" in arg:
        arg = arg.replace("//", "/")
    return arg[:-1] if len(arg) > 1 and arg.endswith("/") else arg


def absolute(path: str) -> str:
    """java.io.File.getAbsolutePath: joined to the working directory, not resolved."""
    return path if path.startswith("/") else java_path(os.getcwd() + "/" + path)


def java_hashmap_order(paths: list[str]) -> list[str]:
    """Files in the order Kafka's summaries list them (a HashMap filled with computeIfAbsent)."""
    return hashmap_order(paths, string_hash, computed=True)


def increment_sequence(sequence: int, delta: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence (wraps at 2**31 - 1)."""
    if sequence > INT32_MAX - delta:
        return delta - (INT32_MAX - sequence) - 1
    return sequence + delta


def decrement_sequence(sequence: int, delta: int) -> int:
    if sequence < delta:
        return INT32_MAX - (delta - sequence) + 1
    return sequence - delta


def optional_long(v: int | None) -> str:
    return "OptionalLong.empty" if v is None else f"OptionalLong[{v}]"


class Findings:
    """What the dump found, printed on stderr after it (Kafka's summaries) or as it goes."""

    def __init__(self, err: TextIO) -> None:
        self.err = err
        self.problems = 0
        self.index_mismatches: dict[str, dict[int, int]] = {}
        self.time_mismatches: dict[str, list[tuple[int, int]]] = {}
        self.out_of_order: dict[str, list[tuple[int, int]]] = {}
        self.not_found: dict[str, list[tuple[int, int]]] = {}
        self.non_consecutive: dict[str, dict[int, int]] = {}

    def problem(self, message: str) -> None:
        self.problems += 1
        print(message, file=self.err)

    def summary(self) -> None:
        err = self.err
        for path in java_hashmap_order(list(self.index_mismatches)):
            print(f"Mismatches in :{path}", file=err)
            for index_offset, log_offset in sorted(self.index_mismatches[path].items(), reverse=True):
                print(f"  Index offset: {index_offset}, log offset: {log_offset}", file=err)
        for path in java_hashmap_order(list(self.time_mismatches)):
            print(f"Found timestamp mismatch in :{path}", file=err)
            for ts, log_ts in self.time_mismatches[path]:
                print(f"  Index timestamp: {ts}, log timestamp: {log_ts}", file=err)
        for path in java_hashmap_order(list(self.out_of_order)):
            print(f"Found out of order timestamp in :{path}", file=err)
            for ts, prev in self.out_of_order[path]:
                print(f"  Index timestamp: {ts}, Previously indexed timestamp: {prev}", file=err)
        for path in java_hashmap_order(list(self.not_found)):
            print("The following indexed offsets are not found in the log.", file=err)
            for offset, found in self.not_found[path]:
                print(f"Indexed offset: {offset}, found log offset: {found}", file=err)
        for path in java_hashmap_order(list(self.non_consecutive)):
            print(f"Non-consecutive offsets in {path}", file=err)
            for first, second in sorted(self.non_consecutive[path].items()):
                print(f"  {first} is followed by {second}", file=err)


class Batch:
    """One batch of a file, read whole: its header and bytes."""

    __slots__ = ("data", "header", "position")

    def __init__(self, position: int, data: bytes) -> None:
        self.position = position
        self.data = data
        self.header = BatchHeader._make(HEADER.unpack_from(data))

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def last_offset(self) -> int:
        return self.header.base_offset + self.header.last_offset_delta

    @property
    def valid(self) -> bool:
        return crc32c(memoryview(self.data)[CRC_START:]) == self.header.crc

    @property
    def timestamp_type(self) -> str:
        return "LogAppendTime" if self.header.attributes & ATTR_TIMESTAMP_TYPE else "CreateTime"

    @property
    def is_control(self) -> bool:
        return bool(self.header.attributes & ATTR_CONTROL)

    def records(self) -> list[Record]:
        return decode_records(self.data, self.header, verify_crc=False)


class Segment:
    """A .log file read as Kafka's FileLogInputStream does: batch after batch until fewer bytes
    are left than a header up to the magic byte, or than the batch says it takes (the
    remainder: "invalid bytes at the end")."""

    def __init__(self, path: str, fd: int, end: int, findings: Findings) -> None:
        self.path = path
        self.fd = fd
        self.end = end
        self.findings = findings
        self.valid_bytes = 0  # where the iteration stopped

    def batches(self, start: int = 0, limit: int | None = None) -> Iterator[Batch]:
        end = self.end if limit is None else min(self.end, start + limit)
        pos = self.valid_bytes = start
        while pos + HEADER_UP_TO_MAGIC < end:
            head = os.pread(self.fd, HEADER_UP_TO_MAGIC, pos)
            if len(head) < HEADER_UP_TO_MAGIC:
                return
            base_offset, length, magic = _PREFIX.unpack_from(head[:12] + head[16:17])
            if length < MIN_RECORD_OVERHEAD:
                self.findings.problem(f"{self.path}: the batch at position {pos} has a size of {length}, smaller "
                                      f"than the minimum record overhead ({MIN_RECORD_OVERHEAD}): the bytes "
                                      "from there on cannot be read")
                return
            if pos > end - LOG_OVERHEAD - length:
                return  # a batch cut short: the rest are invalid bytes
            size = LOG_OVERHEAD + length
            if magic != 2:
                self.findings.problem(f"{self.path}: the batch at position {pos} (offset {base_offset}) has magic "
                                      f"{magic}: only v2 record batches can be read; skipped")
            elif size < HEADER.size:
                self.findings.problem(f"{self.path}: the batch at position {pos} is {size} bytes, shorter than a "
                                      f"v2 batch header ({HEADER.size}): the bytes from there on cannot be read")
                return
            else:
                data = os.pread(self.fd, size, pos)
                if len(data) < size:
                    return
                yield Batch(pos, data)
            pos += size
            self.valid_bytes = pos


def _open(path: str, findings: Findings) -> tuple[int, int] | None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        findings.problem(f"{path}: cannot open: {e.strerror or e}")
        return None
    return fd, os.fstat(fd).st_size


def _base_offset(path: str, findings: Findings) -> int | None:
    stem = Path(path).name.split(".")[0]
    try:
        return int(stem)
    except ValueError:
        findings.problem(f"{path}: the file name does not start with a base offset ({stem!r})")
        return None


class Dumper:
    def __init__(self, opts: argparse.Namespace, out: TextIO, err: TextIO) -> None:
        self.out = out
        self.findings = Findings(err)
        self.print_data = bool(opts.print_data_log or opts.offsets_decoder
                               or opts.transaction_log_decoder)
        self.deep = bool(opts.deep_iteration) or self.print_data
        self.verify_only = bool(opts.verify_index_only)
        self.sanity_only = bool(opts.index_sanity_check)
        self.skip_metadata = bool(opts.skip_record_metadata)
        self.max_bytes = int(opts.max_bytes)
        self.max_message_size = int(opts.max_message_size)
        self.decoder: dict[int, tuple[coordinator_json.Schema, coordinator_json.Schema]] | None = None
        if opts.offsets_decoder:
            self.decoder = coordinator_json.OFFSETS_RECORDS
        elif opts.transaction_log_decoder:
            self.decoder = coordinator_json.TRANSACTION_RECORDS

    def line(self, text: str) -> None:
        self.out.write(text + "\n")

    def dump(self, arg: str) -> None:
        path = java_path(arg)
        self.line(f"Dumping {path}")
        name = Path(path).name
        suffix = name[name.rfind("."):] if "." in name else ""
        if suffix == ".log":
            self.dump_log(path)
        elif suffix == ".index":
            self.dump_index(path)
        elif suffix == ".timeindex":
            self.dump_time_index(path)
        elif suffix == ".txnindex":
            self.dump_txn_index(path)
        elif suffix == ".snapshot":
            self.dump_producer_snapshot(path)
        else:
            print(f"Ignoring unknown file {path}", file=self.findings.err)

    # -- .log --------------------------------------------------------------------------------

    def dump_log(self, path: str) -> None:
        base = _base_offset(path, self.findings)
        if base is None:
            return
        self.line(f"Log starting offset: {base}")
        opened = _open(path, self.findings)
        if opened is None:
            return
        fd, size = opened
        try:
            end = min(size, max(self.max_bytes, 0))
            segment = Segment(path, fd, end, self.findings)
            last_offset = [-1]
            for batch in segment.batches():
                self.batch_line(batch)
                if self.deep:
                    self.record_lines(path, batch, last_offset)
            trailing = end - segment.valid_bytes
            if trailing > 0 and self.max_bytes == INT32_MAX:
                self.line(f"Found {trailing} invalid bytes at the end of {Path(path).name}")
        finally:
            os.close(fd)

    def batch_line(self, b: Batch) -> None:
        h = b.header
        attrs = h.attributes
        last_sequence = -1 if h.base_sequence == -1 else increment_sequence(h.base_sequence, h.last_offset_delta)
        horizon = h.base_timestamp if attrs & ATTR_DELETE_HORIZON else None
        codec = CODEC_NAMES.get(attrs & 0x07, f"unknown({attrs & 0x07})")
        self.line(
            f"baseOffset: {h.base_offset} lastOffset: {b.last_offset} count: {h.record_count} "
            f"baseSequence: {h.base_sequence} lastSequence: {last_sequence} producerId: {h.producer_id} "
            f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
            f"isTransactional: {_bool(attrs & ATTR_TRANSACTIONAL)} isControl: {_bool(attrs & ATTR_CONTROL)} "
            f"deleteHorizonMs: {optional_long(horizon)} position: {b.position} {b.timestamp_type}: {h.max_timestamp} "
            f"size: {b.size} magic: {h.magic} compresscodec: {codec} crc: {h.crc} isvalid: {_bool(b.valid)}")

    def record_lines(self, path: str, b: Batch, last_offset: list[int]) -> None:
        try:
            records = b.records()
        except InvalidRecords as e:
            self.findings.problem(f"{path}: the records of the batch at position {b.position} cannot be read: {e}")
            return
        h = b.header
        for r in records:
            if r.offset != last_offset[0] + 1:
                self.findings.non_consecutive.setdefault(absolute(path), {})[last_offset[0]] = r.offset
            last_offset[0] = r.offset
            parts: list[str] = []
            if not self.skip_metadata:
                sequence = -1 if h.base_sequence < 0 else increment_sequence(h.base_sequence, r.offset - h.base_offset)
                parts.append(f"{RECORD_INDENT} offset: {r.offset} {b.timestamp_type}: {r.timestamp} "
                             f"keySize: {_size(r.key)} valueSize: {_size(r.value)} sequence: {sequence} "
                             f"headerKeys: [{','.join(k for k, _ in r.headers)}]")
                if b.is_control:
                    parts.append(self.control(path, r))
            if self.print_data and not b.is_control:
                parts.append(self.contents(path, r))
            self.line("".join(parts))

    def control(self, path: str, r: Record) -> str:
        key = r.key or b""
        if len(key) < 4:
            self.findings.problem(f"{path}: control record at offset {r.offset}: a key of {len(key)} bytes, "
                                  "at least 4 expected")
            return ""
        version, type_id = struct.unpack_from(">hh", key)
        if version < 0:
            self.findings.problem(f"{path}: control record at offset {r.offset}: invalid version {version}")
            return ""
        name = CONTROL_TYPES.get(type_id, "UNKNOWN")
        if type_id not in (0, 1):
            return f" controlType: {name}({type_id})"
        value = r.value
        if value is None or len(value) < 6:
            self.findings.problem(f"{path}: transaction marker at offset {r.offset}: a value of "
                                  f"{_size(value)} bytes, at least 6 expected")
            return ""
        marker_version, coordinator_epoch = struct.unpack_from(">hi", value)
        if marker_version < 0:
            self.findings.problem(f"{path}: transaction marker at offset {r.offset}: invalid version {marker_version}")
            return ""
        return f" endTxnMarker: {name} coordinatorEpoch: {coordinator_epoch}"

    def contents(self, path: str, r: Record) -> str:
        prefix = f"{RECORD_INDENT} " if self.skip_metadata else " "
        key: str | None
        payload: str | None
        if self.decoder is not None:
            if r.key is None:
                self.findings.problem(f"{path}: failed to decode the record at offset {r.offset} with the decoder "
                                      "(it has no key)")
                return ""
            key, payload = coordinator_json.coordinator_record(self.decoder, r.key, r.value, r.offset)
        else:
            key = None if r.key is None else r.key.decode("utf-8", "replace")
            payload = None if r.value is None else r.value.decode("utf-8", "replace")
        text = ""
        if key is not None:
            text += f"{prefix}key: {key}"
            prefix = " "
        if payload is not None:
            text += f"{prefix}payload: {payload}"
        return text

    # -- .index and .timeindex ------------------------------------------------------------------

    def _entries(self, path: str, entry: struct.Struct) -> tuple[list[tuple[int, ...]], int] | None:
        try:
            data = Path(path).read_bytes()
        except OSError as e:
            self.findings.problem(f"{path}: cannot read: {e.strerror or e}")
            return None
        n = len(data) // entry.size
        return [entry.unpack_from(data, i * entry.size) for i in range(n)], len(data)

    def _log_beside(self, path: str) -> tuple[str, int, int] | None:
        p = Path(path)
        log_path = java_path(str(p.parent / (p.name.split(".")[0] + ".log")))
        opened = _open(log_path, self.findings)
        if opened is None:
            return None
        return log_path, *opened

    def dump_index(self, path: str) -> None:
        base = _base_offset(path, self.findings)
        if base is None:
            return
        read = self._entries(path, _OFFSET_ENTRY)
        if read is None:
            return
        entries, length = read
        if not entries:
            self.line(f"{path} is empty.")
            return
        if self.sanity_only:
            last = base + entries[-1][0]
            if last < base:
                self.findings.problem(f"Corrupt index found, index file ({absolute(path)}) has non-zero size but the "
                                      f"last offset is {last} which is less than the base offset {base}")
            elif length % _OFFSET_ENTRY.size:
                self.findings.problem(f"Index file {absolute(path)} is corrupt, found {length} bytes which is "
                                      f"neither positive nor a multiple of {_OFFSET_ENTRY.size}")
            else:
                self.line(f"{path} passed sanity check.")
            return
        log = self._log_beside(path)
        if log is None:
            return
        log_path, fd, size = log
        try:
            segment = Segment(log_path, fd, size, self.findings)
            for i, (rel, position) in enumerate(entries):
                offset = base + rel
                if offset == base and i > 0:
                    return  # the zeroes of a preallocated index
                first = next(segment.batches(position, self.max_message_size), None) if position >= 0 else None
                if first is None:
                    self.findings.problem(f"{path}: the entry (offset {offset}, position {position}) points at no "
                                          f"whole batch of {log_path} ({size} bytes)")
                elif first.last_offset != offset:
                    self.findings.index_mismatches.setdefault(absolute(path), {})[offset] = first.last_offset
                if not self.verify_only:
                    self.line(f"offset: {offset} position: {position}")
        finally:
            os.close(fd)

    def dump_time_index(self, path: str) -> None:
        base = _base_offset(path, self.findings)
        if base is None:
            return
        read = self._entries(path, _TIME_ENTRY)
        if read is None:
            return
        entries, length = read
        if self.sanity_only:
            last_ts, last_rel = entries[-1] if entries else (-1, 0)
            where = absolute(path)
            if entries and last_ts < entries[0][0]:
                self.findings.problem(f"Corrupt time index found, time index file ({where}) has non-zero size but "
                                      f"the last timestamp is {last_ts} which is less than the first timestamp "
                                      f"{entries[0][0]}")
            elif entries and base + last_rel < base:
                self.findings.problem(f"Corrupt time index found, time index file ({where}) has non-zero size but "
                                      f"the last offset is {base + last_rel} which is less than the first offset "
                                      f"{base}")
            elif length % _TIME_ENTRY.size:
                self.findings.problem(f"Time index file {where} is corrupt, found {length} bytes which is neither "
                                      f"positive nor a multiple of {_TIME_ENTRY.size}")
            else:
                self.line(f"{path} passed sanity check.")
            return
        p = Path(path)
        index_path = java_path(str(p.parent / (p.name.split(".")[0] + ".index")))
        index_entries: list[tuple[int, ...]] = []
        if Path(index_path).exists():
            read_index = self._entries(index_path, _OFFSET_ENTRY)
            if read_index is None:
                return
            index_entries = read_index[0]
        index_offsets = [base + rel for rel, _ in index_entries]
        log = self._log_beside(path)
        if log is None:
            return
        log_path, fd, size = log
        where = absolute(path)
        try:
            segment = Segment(log_path, fd, size, self.findings)
            previous = -1
            for i, (timestamp, rel) in enumerate(entries):
                offset = base + rel
                if offset == base and i > 0:
                    return
                slot = bisect_right(index_offsets, offset) - 1
                position = index_entries[slot][1] if slot >= 0 else 0
                found = next((b for b in segment.batches(max(position, 0)) if b.last_offset >= offset), None)
                if found is None:
                    self.findings.not_found.setdefault(where, []).append((offset, -1))
                elif found.last_offset != offset:
                    self.findings.not_found.setdefault(where, []).append((offset, found.last_offset))
                else:
                    try:
                        max_ts = max((r.timestamp for r in found.records()), default=-1)
                    except InvalidRecords as e:
                        self.findings.problem(f"{log_path}: the records of the batch at position {found.position} "
                                              f"cannot be read: {e}")
                    else:
                        if max_ts != timestamp:
                            self.findings.time_mismatches.setdefault(where, []).append((timestamp, max_ts))
                        if previous >= timestamp:
                            self.findings.out_of_order.setdefault(where, []).append((timestamp, previous))
                if not self.verify_only:
                    self.line(f"timestamp: {timestamp} offset: {offset}")
                previous = timestamp
        finally:
            os.close(fd)

    # -- .txnindex and .snapshot ------------------------------------------------------------------

    def dump_txn_index(self, path: str) -> None:
        if _base_offset(path, self.findings) is None:
            return
        read = self._entries(path, _TXN_ENTRY)
        if read is None:
            return
        entries, length = read
        for version, producer_id, first, last, lso in entries:
            if version != 0:
                self.findings.problem(f"Unexpected aborted transaction version {version} in transaction index "
                                      f"{absolute(path)}, current version is 0")
                return
            self.line(f"version: {version} producerId: {producer_id} firstOffset: {first} lastOffset: {last} "
                      f"lastStableOffset: {lso}")
        if length % _TXN_ENTRY.size:
            self.findings.problem(f"{path}: {length % _TXN_ENTRY.size} bytes at the end are not a whole entry "
                                  f"({_TXN_ENTRY.size} bytes each)")

    def dump_producer_snapshot(self, path: str) -> None:
        try:
            data = Path(path).read_bytes()
        except OSError as e:
            self.findings.problem(f"{path}: cannot read: {e.strerror or e}")
            return
        if len(data) < _SNAPSHOT_HEAD.size:
            self.findings.problem(f"{path}: {len(data)} bytes, too short for a producer snapshot")
            return
        version, crc, count = _SNAPSHOT_HEAD.unpack_from(data)
        if version != 1:
            self.findings.problem(f"Snapshot contained an unknown file version {version}")
            return
        computed = crc32c(memoryview(data)[6:])
        if crc != computed:
            self.findings.problem(f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. "
                                  f"Computed crc: {computed}")
            return
        if count < 0 or _SNAPSHOT_HEAD.size + count * _SNAPSHOT_ENTRY.size > len(data):
            self.findings.problem(f"{path}: {count} entries declared, {len(data)} bytes hold fewer")
            return
        for i in range(count):
            pid, epoch, last_seq, last_offset, delta, ts, coordinator_epoch, txn_first = _SNAPSHOT_ENTRY.unpack_from(
                data, _SNAPSHOT_HEAD.size + i * _SNAPSHOT_ENTRY.size)
            self.line(f"producerId: {pid} producerEpoch: {epoch} coordinatorEpoch: {coordinator_epoch} "
                      f"currentTxnFirstOffset: {optional_long(txn_first if txn_first >= 0 else None)} "
                      f"lastTimestamp: {ts} firstSequence: {decrement_sequence(last_seq, delta)} "
                      f"lastSequence: {last_seq} lastOffset: {last_offset} offsetDelta: {delta} timestamp: {ts}")


def _bool(v: object) -> str:
    return "true" if v else "false"


def _size(b: bytes | None) -> int:
    return -1 if b is None else len(b)


def run(argv: list[str]) -> int:
    opts = build_parser().parse_args(argv)
    if opts.offsets_decoder and opts.transaction_log_decoder:
        raise CliError("--offsets-decoder and --transaction-log-decoder cannot be used together", exit_code=2)
    dumper = Dumper(opts, sys.stdout, sys.stderr)
    try:
        for arg in opts.files.split(","):
            dumper.dump(arg)
        sys.stdout.flush()
    except BrokenPipeError:
        # the reader went away (`| head`): stop quietly, as a pipe's writer does
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    dumper.findings.summary()
    return 1 if dumper.findings.problems else 0
