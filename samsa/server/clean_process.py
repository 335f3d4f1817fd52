"""One clean in a child process: the cleaner's work shares neither the broker's GIL nor its
CPU priority.

Why a process. A cleaner thread in the broker's own process holds the GIL for the Python part
of its work (a few microseconds per batch, many batches a second). The event loop must take
the GIL back after every system call, and while a cleaner thread holds it and is itself off
the CPU (it runs at a lower priority, and this machine's cores are shared with the clients),
the loop waits for it: produce latency's tail grew several times while a large log was
cleaned. A child process has its own GIL, runs at nice 10 under SCHED_IDLE (on CPU time
nothing else wants) and at the lowest best-effort I/O priority, and its memory (the offset
map) goes back to the system when it exits.

How. `clean_in_process`, called from a cleaner thread of the broker (it only waits), starts
this module as a child (`python -c`, its priority lowered before anything is imported) with
the job's segment descriptors (the dups that keep the files readable whatever retention
renames) passed through, and sends it the rest of the job, pickled, on its stdin. The child
runs `samsa.storage.cleaner.clean` as the thread did and writes the result, pickled, to its
stdout; the parent rebuilds the `PreparedClean` around its own job (a segment's identity, in
the child, is its base offset). Meanwhile the parent:
- sends the child its share of `log.cleaner.io.max.bytes.per.second` (the rate over the cleans
  running, as it changes: the key is dynamic);
- kills it (SIGKILL) when the clean is stopped or cancelled, waits for it, and removes what it
  wrote;
- maps its failures back: a corrupt batch (CleanerError) and an I/O error arrive as such; an
  unexpected exception or a death by signal is a CleanerError with the reason (the log is then
  marked uncleanable, as Kafka marks it after an unexpected exception).
The child dies with its parent (PR_SET_PDEATHSIG): after a kill -9 of the broker no orphan
goes on writing `.cleaned` files beside the restarted broker's recovery.

Where a child cannot start (not Linux, or the system refuses a process), the clean runs in the
calling thread as before.
"""

from __future__ import annotations

import ctypes
import errno
import os
import pickle
import platform
import signal
import struct
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from samsa.storage.cleaner import (
    CleanAborted,
    CleanedGroup,
    CleanerError,
    CleanJob,
    JobSegment,
    PreparedClean,
    clean,
    remove_clean_files,
)
from samsa.storage.offset_map import new_offset_map

CLEANER_NICE = 10  # how much lower than the broker's the cleaner's CPU priority is
_RATE = struct.Struct("<d")
_LEN = struct.Struct("<I")
_POLL_S = 0.05
_PR_SET_PDEATHSIG = 1
_IOPRIO_SET = {"x86_64": 251, "aarch64": 30}  # syscall numbers
_IOPRIO_BEST_EFFORT_LOWEST = (2 << 13) | 7

SUPPORTED = sys.platform.startswith("linux")

# The child's first lines: its priority is lowered before it imports anything (its start-up,
# the interpreter and samsa's storage modules, is a burst of CPU of its own), then this module
# runs as its main.
_BOOT = f"""import os
try:
    os.setpriority(os.PRIO_PROCESS, 0, {CLEANER_NICE})
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
except (AttributeError, OSError):
    pass
import runpy
runpy.run_module("samsa.server.clean_process", run_name="__main__", alter_sys=True)
"""


@dataclass
class Throttler:
    """Bytes per second over all cleaner threads of a process (Kafka's Throttler; each child
    process gets its share of the broker's limit): a pacer with a second's credit. Each call
    books its bytes at the rate after those booked before (or a second ago, whichever is
    later); a thread whose bytes are booked past now sleeps until then. So a steady rate under
    the limit never waits, a burst may take a second's worth at once, and anything faster is
    held to the limit. The rate is read at each call (a dynamic config)."""

    rate: Callable[[], float]
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _booked: float = float("-inf")  # when the bytes counted so far are done, at the rate
    throttled_s: float = 0.0

    CREDIT_S = 1.0

    def __call__(self, n: int) -> None:
        rate = self.rate()
        if rate <= 0 or rate >= 1e300:
            return
        with self._lock:
            now = self.clock()
            self._booked = max(self._booked, now - self.CREDIT_S) + n / rate
            wait = self._booked - now
        if wait > 0:
            self.throttled_s += wait
            self.sleep(wait)


def clean_in_process(job: CleanJob, *, dedupe_buffer_size: int, load_factor: float, read_buffer_size: int,
                     rate: Callable[[], float], stop: threading.Event | None) -> PreparedClean:
    """Run `clean(job, ...)` in a child process and wait for it (in a worker thread: this
    blocks). `rate()`: this clean's share of the I/O limit in bytes/s, read every 50 ms."""
    fds = [js.fd for js in job.segments]
    by_base = {js.base_offset: js.segment for js in job.segments}
    request = {
        "directory": str(job.directory), "name": job.name,
        "segments": [(js.base_offset, js.next_base, js.fd, js.size, js.index_bytes, js.time_index_bytes, js.path)
                     for js in job.segments],
        "first_dirty": job.first_dirty, "first_uncleanable": job.first_uncleanable, "aborted": job.aborted,
        "producers": dict(job.producers), "config": job.config, "now_ms": job.now_ms, "bases": job.bases,
        "dedupe_buffer_size": dedupe_buffer_size, "load_factor": load_factor, "read_buffer_size": read_buffer_size,
        "parent": os.getpid(),
    }
    try:
        proc = subprocess.Popen([sys.executable, "-c", _BOOT], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, pass_fds=fds, env=_child_env())
    except OSError:
        return _in_thread(job, dedupe_buffer_size, load_factor, read_buffer_size, rate, stop)
    assert proc.stdin is not None and proc.stdout is not None
    out: list[bytes] = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read()),  # type: ignore[union-attr]
                              name="log-cleaner-result", daemon=True)
    reader.start()
    try:
        sent = rate()
        try:
            body = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
            proc.stdin.write(_LEN.pack(len(body)) + body + _RATE.pack(sent))
            proc.stdin.flush()
        except OSError:
            pass  # (it died at once: its exit says why)
        while True:
            try:
                proc.wait(_POLL_S)
                break
            except subprocess.TimeoutExpired:
                pass
            if job.cancelled.is_set() or (stop is not None and stop.is_set()):
                _kill(proc)
                remove_clean_files(job.directory, job.bases)
                raise CleanAborted("the clean was stopped")
            now = rate()
            if now != sent:
                sent = now
                try:
                    proc.stdin.write(_RATE.pack(now))
                    proc.stdin.flush()
                except OSError:
                    pass
    except BaseException:
        _kill(proc)
        raise
    finally:
        for f in (proc.stdin, proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        reader.join()
        job.close()
    return _result(job, by_base, proc.returncode, b"".join(out))


def _in_thread(job: CleanJob, dedupe_buffer_size: int, load_factor: float, read_buffer_size: int,
               rate: Callable[[], float], stop: threading.Event | None) -> PreparedClean:
    offset_map = new_offset_map(dedupe_buffer_size, load_factor)
    try:
        return clean(job, offset_map, throttle=Throttler(rate), stop=stop, read_buffer_size=read_buffer_size)
    finally:
        offset_map.clear()


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        proc.kill()
    except OSError:
        pass
    proc.wait()


def _child_env() -> dict[str, str]:
    """The broker's environment, with this checkout of samsa first on the path."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    return env


def _result(job: CleanJob, by_base: dict[int, Any], returncode: int, data: bytes) -> PreparedClean:
    kind: str | None = None
    payload: Any = None
    try:
        if data:
            kind, payload = pickle.loads(data)
    except Exception:  # noqa: BLE001 - a truncated answer: the exit status tells
        kind = None
    if kind == "ok":
        fields = dict(payload)
        fields["groups"] = [CleanedGroup(g.base_offset, tuple(by_base[b] for b in g.old), g.old_size, g.size,
                                         g.next_offset, g.first_batch_timestamp, g.files) for g in fields["groups"]]
        return PreparedClean(job, **fields)
    remove_clean_files(job.directory, job.bases)
    if kind == "cleaner":
        raise CleanerError(payload)
    if kind == "aborted":
        raise CleanAborted(payload)
    if kind == "oserror":
        no, text, filename = payload
        raise OSError(no, text, filename) if filename else OSError(no, text)
    if kind == "crash":
        raise CleanerError(f"unexpected error in the cleaner: {payload}")
    how = f"was killed by signal {-returncode}" if returncode < 0 else f"exited with status {returncode}"
    raise CleanerError(f"the cleaner process {how} without an answer")


# -- the child -------------------------------------------------------------------------------------

def _die_with_parent(parent: int) -> None:
    if not SUPPORTED:
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        number = _IOPRIO_SET.get(platform.machine())
        if number is not None:
            libc.syscall(number, 1, 0, _IOPRIO_BEST_EFFORT_LOWEST)  # (IOPRIO_WHO_PROCESS, this process)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # (it died before the signal was armed)
        os._exit(1)


def _give_way() -> None:
    """Nice 10, and Linux's SCHED_IDLE policy: the cleaner runs on CPU time nothing else wants.
    A woken thread of the broker (or of anything at normal priority) takes the CPU from it at
    once, where nice alone left it a slice first. A broker's event loop uses one core, so on a
    machine of two or more the cleaner still gets a core; only when every core is busy does
    cleaning slow down (its progress shows in `samsa log-dirs --describe --cleaner`)."""
    try:
        os.setpriority(os.PRIO_PROCESS, 0, CLEANER_NICE)
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        pass


def _read_exactly(f: IO[bytes], n: int) -> bytes:
    data = f.read(n)
    if data is None or len(data) < n:
        raise EOFError
    return data


def _child_job(req: dict[str, Any]) -> CleanJob:
    # A segment's identity here is its base offset (the parent maps it back to its object).
    segments = tuple(JobSegment(base, base, nxt, fd, size, ib, tb, path)
                     for base, nxt, fd, size, ib, tb, path in req["segments"])
    return CleanJob(Path(req["directory"]), req["name"], segments, req["first_dirty"], req["first_uncleanable"],
                    req["aborted"], req["producers"], req["config"], req["now_ms"], req["bases"])


def child_main() -> int:
    _give_way()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    try:
        req = pickle.loads(_read_exactly(stdin, _LEN.unpack(_read_exactly(stdin, _LEN.size))[0]))
        share = [_RATE.unpack(_read_exactly(stdin, _RATE.size))[0]]
    except (EOFError, OSError, pickle.UnpicklingError):
        return 2
    _die_with_parent(req["parent"])

    def follow_rate() -> None:
        try:
            while True:
                share[0] = _RATE.unpack(_read_exactly(stdin, _RATE.size))[0]
        except (EOFError, OSError):
            os._exit(3)  # the parent is gone

    threading.Thread(target=follow_rate, daemon=True).start()
    answer: tuple[str, Any]
    try:
        offset_map = new_offset_map(req["dedupe_buffer_size"], req["load_factor"])
        p = clean(_child_job(req), offset_map, throttle=Throttler(lambda: share[0]),
                  read_buffer_size=req["read_buffer_size"])
        answer = ("ok", {f: getattr(p, f) for f in PreparedClean.__dataclass_fields__ if f != "job"})
    except CleanerError as e:
        answer = ("cleaner", e.reason)
    except CleanAborted as e:
        answer = ("aborted", str(e))
    except OSError as e:
        answer = ("oserror", (e.errno or errno.EIO, e.strerror or str(e), e.filename))
    except Exception as e:  # noqa: BLE001 - reported to the parent, which marks the log uncleanable
        answer = ("crash", f"{type(e).__name__}: {e} ({traceback.extract_tb(e.__traceback__)[-1].name})")
    stdout.write(pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL))
    stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(child_main())
