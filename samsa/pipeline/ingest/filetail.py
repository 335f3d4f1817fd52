"""Tail log files into a topic, one record per line, the way Filebeat does.

How it works:

* **Records.** Value: the line's bytes without its newline (and without a `\\r` before it).
  Key: the file's absolute path (`key_by_path=False`: no key), so one file's lines share a
  partition and stay in order. A line longer than `max_line_bytes` is sent in pieces of that
  size. A last line without its newline is held back until the newline arrives.
* **One harvester per open file**, identified by (device, inode). Every `poll_interval_s` each
  watched path is read to its end, then `stat`ed: another identity means the file was rotated by
  rename (or deleted): the old harvester keeps reading its open file — a writer may not have
  reopened yet — and is closed after `close_inactive_s` without growth (a held partial line is
  then sent as is, it will never be completed); a new harvester reads the new file from its
  start. A file shorter than what was read, or whose first bytes changed, was truncated
  (copytruncate): it is read again from the start. (A truncation followed, within one poll
  interval, by as many bytes as were read before, starting with the same 64 bytes, cannot be
  told from growth.)
* **Registry.** Each line is sent with its end offset; an `AckTracker` advances a file's
  committed offset only over a prefix of acknowledged lines. The registry file — JSON, one entry
  per (path, device, inode) with the committed offset and a fingerprint of the file's first
  bytes (guarding against inode reuse) — is rewritten atomically (temporary file, fsync,
  rename) when committed offsets moved, at most every `registry_flush_s`, and on shutdown after
  the producer is flushed. A crash re-sends lines after the last saved offset (at-least-once); a
  clean stop saves exactly what was delivered, so a restart sends exactly the rest.
  Undelivered records are resent by the producer until acknowledged (`resend=True`).
* **Start.** A file known to the registry resumes at its committed offset (from the start if the
  file is now shorter or its first bytes differ); an unknown file is read from its start, or
  from its end with `from_end` — only for files present at start; files appearing later are
  always read from the start. Lines left unread in a file rotated away while the tailer was not
  running are not read (only the watched paths are opened).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import hashlib
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Message

from samsa.pipeline.ingest.producer import Sender

log = logging.getLogger("samsa.ingest.file")

DEFAULT_REGISTRY = ".samsa-ingest-registry.json"
REGISTRY_VERSION = 1
_READ_CHUNK = 256 * 1024
_MAX_READ_PER_POLL = 4 * 1024 * 1024  # per file and poll, so one busy file does not starve others
_FINGERPRINT_BYTES = 64

RegistryKey = tuple[str, int, int]  # (path, device, inode)


class AckTracker:
    """The committed offset of one file: the end of the longest prefix of sent lines that were all
    acknowledged, whatever order acknowledgements arrive in."""

    def __init__(self, committed: int) -> None:
        self.committed = committed
        self._pending: collections.deque[list[Any]] = collections.deque()  # [end offset, acked]

    def sent(self, end: int) -> list[Any]:
        entry = [end, False]
        self._pending.append(entry)
        return entry

    def acked(self, entry: list[Any], _msg: Message | None = None) -> None:
        entry[1] = True
        while self._pending and self._pending[0][1]:
            self.committed = self._pending.popleft()[0]

    @property
    def outstanding(self) -> int:
        return len(self._pending)


@dataclass
class RegistryEntry:
    offset: int
    head_len: int = 0
    head_sha1: str = ""


def load_registry(path: str) -> dict[RegistryKey, RegistryEntry]:
    """The registry's entries; a missing file is empty. Raises ValueError if it is unreadable."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"cannot read registry {path}: {e}") from None
    if not isinstance(doc, dict) or doc.get("version") != REGISTRY_VERSION or not isinstance(doc.get("files"), list):
        raise ValueError(f"registry {path} is not a version {REGISTRY_VERSION} samsa ingest registry")
    out: dict[RegistryKey, RegistryEntry] = {}
    try:
        for f in doc["files"]:
            out[(str(f["path"]), int(f["dev"]), int(f["ino"]))] = RegistryEntry(
                int(f["offset"]), int(f.get("head_len", 0)), str(f.get("head_sha1", ""))
            )
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ValueError(f"registry {path} has a malformed entry: {e!r}") from None
    return out


def save_registry(path: str, entries: dict[RegistryKey, RegistryEntry]) -> None:
    """Replace the registry atomically: a reader sees the old or the new file, never a mix."""
    files = [
        {"path": p, "dev": dev, "ino": ino, "offset": e.offset, "head_len": e.head_len, "head_sha1": e.head_sha1}
        for (p, dev, ino), e in sorted(entries.items())
    ]
    text = json.dumps({"version": REGISTRY_VERSION, "files": files}, indent=1)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".registry-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _fingerprint(fd: int, length: int) -> str:
    return hashlib.sha1(os.pread(fd, length, 0)).hexdigest()


class _Harvester:
    """One open file: reads it from `offset`, splits lines, sends them."""

    def __init__(self, path: str, f: Any, offset: int, now: float) -> None:
        st = os.fstat(f.fileno())
        self.path = path
        self.file = f
        self.dev, self.ino = st.st_dev, st.st_ino
        self.offset = offset  # bytes consumed from the file
        self.line_start = offset  # file offset of buf[0]
        self.buf = bytearray()
        self.tracker = AckTracker(offset)
        self.last_growth = now
        self.rotated = False
        # The file's first bytes (up to _FINGERPRINT_BYTES of what was read): if they change, the
        # file was truncated and rewritten, even when it has since grown past `offset`.
        self.head = os.pread(f.fileno(), min(offset, _FINGERPRINT_BYTES), 0)

    @property
    def key(self) -> RegistryKey:
        return (self.path, self.dev, self.ino)

    def entry(self) -> RegistryEntry:
        n = min(self.tracker.committed, len(self.head))
        return RegistryEntry(self.tracker.committed, n, hashlib.sha1(self.head[:n]).hexdigest() if n else "")

    def rewritten(self) -> bool:
        return bool(self.head) and os.pread(self.file.fileno(), len(self.head), 0) != self.head

    def size(self) -> int:
        return int(os.fstat(self.file.fileno()).st_size)

    def close(self) -> None:
        self.file.close()


class FileTailer:
    """Tails `paths` into `topic` (see the module comment). `poll_once()` does one round;
    `run(stop)` repeats it every `poll_interval_s` and saves the registry on the way out."""

    def __init__(
        self,
        producer: Sender,
        paths: Sequence[str],
        *,
        topic: str,
        registry_path: str = DEFAULT_REGISTRY,
        from_end: bool = False,
        key_by_path: bool = True,
        poll_interval_s: float = 0.25,
        close_inactive_s: float = 5.0,
        registry_flush_s: float = 1.0,
        max_line_bytes: int = 512 * 1024,
        max_outstanding: int = 20_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not paths:
            raise ValueError("no files to tail")
        self.producer = producer
        self.paths = list(dict.fromkeys(os.path.abspath(p) for p in paths))
        self.topic = topic
        self.registry_path = registry_path
        self.key_by_path = key_by_path
        self.poll_interval_s = poll_interval_s
        self.close_inactive_s = close_inactive_s
        self.registry_flush_s = registry_flush_s
        self.max_line_bytes = max(1, max_line_bytes)
        self.max_outstanding = max_outstanding
        self._clock = clock
        if not os.path.isdir(os.path.dirname(os.path.abspath(registry_path))):
            raise ValueError(f"the registry's directory does not exist: {os.path.dirname(registry_path)}")
        self._registry = load_registry(registry_path)
        # Entries of files this tailer does not watch are kept as they are.
        self._foreign = {k: e for k, e in self._registry.items() if k[0] not in self.paths}
        self._current: dict[str, _Harvester | None] = {p: None for p in self.paths}
        self._draining: list[_Harvester] = []
        self._saved: dict[RegistryKey, RegistryEntry] | None = None
        self._saved_at = -float("inf")
        self._missing_logged: set[str] = set()
        self.lines_sent = 0
        self.lines_acked = 0
        now = clock()
        for p in self.paths:
            self._current[p] = self._open(p, now, at_start=True, from_end=from_end)

    # -- the loop ------------------------------------------------------------------------------

    def run(self, stop: threading.Event, flush_timeout: float = 30.0) -> None:
        log.info("tailing %s into %s (registry %s)", ", ".join(self.paths), self.topic, self.registry_path)
        try:
            while not stop.is_set():
                busy = self.poll_once()
                self.producer.poll(0)
                self.maybe_save_registry()
                if not busy:
                    stop.wait(self.poll_interval_s)
        finally:
            left = self.producer.flush(flush_timeout)
            if left:
                log.warning("%d lines were still unacknowledged after %.0f s; they will be read again", left,
                            flush_timeout)
            self.save_registry()
            self.close()

    def poll_once(self) -> bool:
        """Read every watched file (and rotated ones still open) to its end, follow rotations and
        truncations. Returns True if a file had more data than one round reads. Reads nothing
        while more than `max_outstanding` lines wait for their acknowledgement."""
        if self.producer.outstanding() > self.max_outstanding:
            return False
        now = self._clock()
        busy = False
        for path in self.paths:
            h = self._current[path]
            if h is not None:
                busy |= self._read(h, now)
                if self._rotated(h):
                    busy |= self._read(h, now)  # what was written before the rename
                    h.rotated = True
                    self._draining.append(h)
                    h = self._current[path] = None
            if h is None:
                h = self._current[path] = self._open(path, now, at_start=False, from_end=False)
                if h is not None:
                    busy |= self._read(h, now)
        for h in list(self._draining):
            busy |= self._read(h, now)
            if now - h.last_growth >= self.close_inactive_s:
                if h.buf:
                    log.info("%s: sending the unterminated last line of the rotated file", h.path)
                    self._send(h, bytes(h.buf), h.line_start + len(h.buf))
                    h.line_start += len(h.buf)
                    h.buf.clear()
                if h.tracker.outstanding == 0:
                    log.info("closing rotated file of %s (inode %d) after %d bytes", h.path, h.ino, h.offset)
                    h.close()
                    self._draining.remove(h)
        return busy

    def _open(self, path: str, now: float, *, at_start: bool, from_end: bool) -> _Harvester | None:
        try:
            f = open(path, "rb", buffering=0)  # noqa: SIM115 - the harvester owns it
        except FileNotFoundError:
            if path not in self._missing_logged:
                self._missing_logged.add(path)
                log.info("%s does not exist (yet); waiting for it", path)
            return None
        except OSError as e:
            if path not in self._missing_logged:
                self._missing_logged.add(path)
                log.warning("cannot open %s: %s; will retry", path, e.strerror or e)
            return None
        self._missing_logged.discard(path)
        st = os.fstat(f.fileno())
        offset, why = 0, "new file, from the start"
        known = self._registry.get((path, st.st_dev, st.st_ino))
        if known is not None:
            if known.offset > st.st_size:
                why = f"shorter than the registry's offset {known.offset}, truncated: from the start"
            elif known.head_len and _fingerprint(f.fileno(), known.head_len) != known.head_sha1:
                why = "first bytes differ from the registry's (a new file on a reused inode): from the start"
            else:
                offset, why = known.offset, f"resuming at offset {known.offset}"
        elif at_start and from_end:
            offset, why = st.st_size, f"from its end (offset {st.st_size})"
        if offset:
            f.seek(offset)
        log.info("%s (inode %d): %s", path, st.st_ino, why)
        return _Harvester(path, f, offset, now)

    def _rotated(self, h: _Harvester) -> bool:
        try:
            st = os.stat(h.path)
        except FileNotFoundError:
            log.info("%s was removed or renamed; finishing the open file", h.path)
            return True
        except OSError:
            return False
        if (st.st_dev, st.st_ino) != (h.dev, h.ino):
            log.info("%s was rotated (inode %d -> %d); finishing the old file", h.path, h.ino, st.st_ino)
            return True
        return False

    def _read(self, h: _Harvester, now: float) -> bool:
        size = h.size()
        if size < h.offset or (size > h.offset and h.rewritten()):
            self._truncated(h)
        budget = _MAX_READ_PER_POLL
        while budget > 0:
            data = h.file.read(min(_READ_CHUNK, budget))
            if not data:
                return False
            h.offset += len(data)
            h.last_growth = now
            budget -= len(data)
            if len(h.head) < _FINGERPRINT_BYTES:
                h.head = os.pread(h.file.fileno(), min(h.offset, _FINGERPRINT_BYTES), 0)
            self._split(h, data)
        return True

    def _truncated(self, h: _Harvester) -> None:
        log.info("%s was truncated (size now %d, %d bytes read); reading it from the start", h.path, h.size(), h.offset)
        if h.buf:
            self._send(h, bytes(h.buf), h.line_start + len(h.buf))
            h.buf.clear()
        # Acknowledgements of the old content go to the old tracker, which is dropped.
        h.tracker = AckTracker(0)
        h.offset = h.line_start = 0
        h.head = b""
        h.file.seek(0)

    def _split(self, h: _Harvester, data: bytes) -> None:
        buf = h.buf
        buf += data
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl == -1:
                break
            end = nl - 1 if nl > start and buf[nl - 1] == 0x0D else nl
            self._send_line(h, buf, start, end, h.line_start + nl + 1)
            start = nl + 1
        # A line without its newline yet: held back, unless it is already too long.
        while len(buf) - start >= self.max_line_bytes:
            self._send(h, bytes(buf[start : start + self.max_line_bytes]), h.line_start + start + self.max_line_bytes)
            start += self.max_line_bytes
        del buf[:start]
        h.line_start += start

    def _send_line(self, h: _Harvester, buf: bytearray, start: int, end: int, end_offset: int) -> None:
        if end - start <= self.max_line_bytes:
            self._send(h, bytes(buf[start:end]), end_offset)
            return
        for i in range(start, end, self.max_line_bytes):
            j = min(end, i + self.max_line_bytes)
            # Only the last piece completes the line (and its offset covers the newline).
            self._send(h, bytes(buf[i:j]), end_offset if j == end else h.line_start + j)

    def _send(self, h: _Harvester, value: bytes, end_offset: int) -> None:
        entry = h.tracker.sent(end_offset)
        on_ack = functools.partial(self._acked, h.tracker, entry)
        key = os.fsencode(h.path) if self.key_by_path else None
        self.producer.send(self.topic, value, key, on_ack=on_ack, resend=True)
        self.lines_sent += 1

    def _acked(self, tracker: AckTracker, entry: list[Any], msg: Message) -> None:
        self.lines_acked += 1
        tracker.acked(entry)

    # -- the registry --------------------------------------------------------------------------

    def registry_entries(self) -> dict[RegistryKey, RegistryEntry]:
        entries = dict(self._foreign)
        for h in [*self._draining, *(h for h in self._current.values() if h is not None)]:
            entries[h.key] = h.entry()
        return entries

    def maybe_save_registry(self) -> None:
        now = self._clock()
        if now - self._saved_at >= self.registry_flush_s:
            self.save_registry()

    def save_registry(self) -> None:
        """Write the registry if a committed offset moved since the last write."""
        entries = self.registry_entries()
        self._saved_at = self._clock()
        if entries == self._saved:
            return
        save_registry(self.registry_path, entries)
        self._saved = entries
        self._registry = entries

    def close(self) -> None:
        for h in [*self._draining, *(h for h in self._current.values() if h is not None)]:
            h.close()
        self._draining.clear()
        self._current = {p: None for p in self.paths}
