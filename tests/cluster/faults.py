"""Fault injection under an acks=all idempotent producer, shared by `tests/cluster/test_faults.py`
(each fault once) and `bench/faults.py` (many random faults).

How it works. A `FaultProducer` (confluent_kafka, acks=all, enable.idempotence) writes
sequence-numbered records (`b"%010d" % seq`, one sequence per partition) to every partition of a
replicated topic from its own thread and records each acknowledgement: partition, sequence
number, offset and the time its delivery report arrived. `FaultRun.inject(kind)` then:

  1. picks the target from the cluster's state in ZooKeeper (the leader of a partition, a
     follower that is neither the controller nor, if possible, a leader, the controller, or
     ZooKeeper itself) and injects the fault at t0;
  2. waits for its effect, as an operator would see it in ZooKeeper (leadership moved away, the
     follower out of the ISR, a new controller with a higher epoch, the broker's session gone);
     a ZooKeeper outage instead lasts a set time, then ZooKeeper is started again;
  3. keeps the fault in place until every partition takes acknowledged writes again (or until
     the bound below has passed: then the gap is over the bound anyway);
  4. heals (start the killed broker, SIGCONT, remove the isolation) and waits until every
     broker is registered by a session that is connected to ZooKeeper (its `cons`: a broker
     still reconnecting keeps its node until its session expires, and that would land on the
     next fault), a controller exists and every partition has its full ISR, then until every
     partition has acknowledged writes again; that is the end of the fault's window.

The measure is the longest gap between two consecutive acknowledgements of one partition in
the window [t0, end] (counting from the last acknowledgement before t0, and up to `end`), and
the bound is the ZooKeeper session timeout + 6 s. A broker that exits by itself is reported and
started again. `FaultRun.finish()` stops the producer, reads every partition back with a real
consumer and checks that no acknowledged record is lost, duplicated or reordered and that the
replicas' segment files are byte-identical.

Everything is observed from outside: ZooKeeper (kazoo), client metadata and delivery reports,
files on disk, process exit codes. Nothing here imports the broker.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.cluster.acks import FaultProducer
from tests.cluster.cluster import Cluster
from tests.cluster.fabric import Loopback, NetnsFabric, ZooKeeperProcess
from tests.cluster.timeline import Timeline

KINDS = ("kill9_leader", "kill9_follower", "kill9_controller", "kill9_zookeeper", "sigstop_leader",
         "isolate_leader")
GAP_SLACK = 6.0  # the bound on a gap: the ZooKeeper session timeout + this
POLL = 0.05  # the state lives in other processes, which offer no event to wait on: poll it
RESUMED_ACKS = 10  # acknowledgements per partition that count as "taking writes again"


def _clock(wall: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(wall)) + f".{int(wall * 1000) % 1000:03d}"


@dataclass
class FaultResult:
    kind: str
    target: str  # "broker 1" or "ZooKeeper"
    roles: str  # what the target was when hit
    t0: float  # monotonic
    wall: float  # time.time() at t0
    into_run: float  # seconds since the run began
    bound: float
    effect: str = ""
    effect_s: float | None = None
    resumed_s: float | None = None
    healed_s: float | None = None
    end_s: float = 0.0
    gap_s: float = 0.0
    gap_partition: int = -1
    gap_from_s: float = 0.0
    gaps: dict[int, float] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    timeline: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)  # log lines of the window, for a failure

    @property
    def over_bound(self) -> bool:
        return self.gap_s > self.bound

    @property
    def ok(self) -> bool:
        return not self.over_bound and not self.problems

    def line(self) -> str:
        """One progress line."""
        def at(x: float | None) -> str:
            return "never" if x is None else f"+{x:.1f}s"
        verdict = "ok" if self.ok else ("OVER BOUND" if self.over_bound else "PROBLEM")
        extra = f" ({'; '.join(self.problems)})" if self.problems else ""
        return (f"{_clock(self.wall)} {self.kind:<16} {self.target:<9} [{self.roles}] effect {at(self.effect_s)} "
                f"acks {at(self.resumed_s)} healed {at(self.healed_s)} gap {self.gap_s:.2f}s p{self.gap_partition} "
                f"(bound {self.bound:.1f}s) {verdict}{extra}")

    def describe(self) -> str:
        """Everything about the fault, for a failure message."""
        def at(x: float | None) -> str:
            return "never" if x is None else f"+{x:.2f} s"
        lines = [
            f"{self.kind} of {self.target} ({self.roles}) at {_clock(self.wall)} (+{self.into_run:.1f} s into the run):",
            (f"  longest gap between acknowledgements: {self.gap_s:.2f} s on partition {self.gap_partition}, "
             f"from {self.gap_from_s:+.2f} s to {self.gap_from_s + self.gap_s:+.2f} s after the fault "
             f"(bound {self.bound:.1f} s = ZooKeeper session + {GAP_SLACK:.0f} s)"
             + (" -- OVER THE BOUND" if self.over_bound else "")),
            "  per partition: " + ", ".join(f"p{p} {g:.2f} s" for p, g in sorted(self.gaps.items())),
            (f"  timeline after the fault: effect ({self.effect}) {at(self.effect_s)}; acknowledged writes on every "
             f"partition again {at(self.resumed_s)}; healed {at(self.healed_s)}; window ends {at(self.end_s)}"),
        ]
        lines += [f"  problem: {p}" for p in self.problems]
        lines += ["  as seen from outside (ZooKeeper every 100 ms, and the harness's actions):"]
        lines += [f"    {e}" for e in self.timeline]
        if self.evidence:
            lines += ["  what the brokers and the client logged meanwhile (warnings, sessions, client errors):"]
            lines += [f"    {e}" for e in self.evidence]
        lines += ["  logs:"] + [f"    {log}" for log in self.logs]
        return "\n".join(lines)


@dataclass
class Verdict:
    acked: int
    produced: int
    failed: list[tuple[int, int, str]]
    undelivered: int | None
    fatal: list[str]
    lost: list[tuple[int, int, int, str]]  # partition, seq, acked offset, what is there
    dup: list[tuple[int, int, int]]  # partition, seq, copies
    reordered: list[tuple[int, int, int, int]]  # partition, offset, seq, seq before it
    alien: list[tuple[int, int, bytes | None]]  # partition, offset, value never produced
    unacked_stored: int  # records in the log whose delivery was not reported as a success
    acked_without_offset: int  # reported delivered with no offset (found by sequence number instead)
    diffs: list[str]

    @property
    def identical(self) -> bool:
        return not self.diffs

    def problems(self) -> list[str]:
        out = []
        if self.undelivered:
            out.append(f"{self.undelivered} records never delivered (no report after the flush)")
        if self.fatal:
            out.append(f"the idempotent producer hit fatal errors: {self.fatal[:3]}")
        if self.failed:
            out.append(f"{len(self.failed)} deliveries failed, first (partition, seq, error): {self.failed[:3]}")
        if self.lost:
            out.append(f"{len(self.lost)} of {self.acked} acknowledged records lost or moved, first "
                       f"(partition, seq, acked offset, found there): {self.lost[:5]}")
        if self.dup:
            out.append(f"{len(self.dup)} records stored more than once, first (partition, seq, copies): {self.dup[:5]}")
        if self.reordered:
            out.append(f"{len(self.reordered)} records out of order, first (partition, offset, seq, seq before): "
                       f"{self.reordered[:5]}")
        if self.alien:
            out.append(f"{len(self.alien)} records never produced, first: {self.alien[:5]}")
        out += [f"replicas differ: {d}" for d in self.diffs]
        return out


class FaultRun:
    """A cluster under a FaultProducer, faults injected one at a time (see the module docstring)."""

    def __init__(self, cluster: Cluster, fabric: NetnsFabric | Loopback, zk: ZooKeeperProcess, topic: str,
                 partitions: int, session_s: float, log: Callable[[str], None] = lambda s: None,
                 interval: float = 0.005, client_debug: str = "") -> None:
        self.c = cluster
        self.fabric = fabric
        self.zk = zk
        self.topic = topic
        self.partitions = list(range(partitions))
        self.session_s = session_s
        self.bound = session_s + GAP_SLACK
        self.log = log
        self.t_start = time.monotonic()
        self.down: set[int] = set()  # brokers stopped on purpose or found dead: started when healing
        self.results: list[FaultResult] = []
        self._current: FaultResult | None = None
        self.timeline = Timeline(cluster.zk, cluster.chroot, topic, self.partitions, zk.connected_sessions).start()
        self.producer = FaultProducer(cluster.bootstrap, topic, partitions,
                                      cluster.root / f"client-{topic}.log", interval=interval,
                                      debug=client_debug).start()

    # --- observing ------------------------------------------------------------------------------
    def unhealthy(self) -> str | None:
        """None when every broker runs, is registered and connected to ZooKeeper, a controller exists
        and every partition has a leader and its full ISR; else what is missing."""
        c = self.c
        if not self.zk.alive():
            return "ZooKeeper is down"
        dead = [i for i in range(c.n) if not c.alive(i)]
        if dead or c.paused:
            return f"brokers not running: {dead}, paused: {sorted(c.paused)}"
        isolated = getattr(self.fabric, "isolated", set())
        if isolated:
            return f"brokers cut off from ZooKeeper: {sorted(isolated)}"
        registered = c.registered()
        if registered != set(range(c.n)):
            return f"registered in ZooKeeper: {sorted(registered)}"
        connected = self.zk.connected_sessions()
        owners = {i: c.zk.exists(f"{c.chroot}/brokers/ids/{i}") for i in range(c.n)}
        stale = [i for i, st in owners.items() if st is None or st.ephemeralOwner not in connected]
        if stale:
            return f"brokers {stale} registered by a session with no connection to ZooKeeper (reconnecting)"
        if c.controller() is None:
            return "no controller"
        assignment = c.assignment(self.topic)
        for p in self.partitions:
            s = c.state(self.topic, p)
            if s is None or s["leader"] < 0:
                return f"partition {p} has no leader ({s})"
            if sorted(s["isr"]) != sorted(assignment[p]):
                return f"partition {p}: leader {s['leader']}, ISR {s['isr']} of replicas {assignment[p]}"
        return None

    def _reap(self) -> None:
        """Note (once) a broker that exited while it should run, with its exit code and log."""
        for i in range(self.c.n):
            p = self.c.brokers[i].proc
            if i not in self.down and p is not None and p.poll() is not None:
                self.down.add(i)
                what = (f"broker {i} exited by itself with code {p.returncode} "
                        f"at +{time.monotonic() - (self._current.t0 if self._current else self.t_start):.1f} s "
                        f"(log: {self.c.brokers[i].log_path})")
                if self._current is not None:
                    self._current.problems.append(what)
                self.timeline.note(f"broker {i} exited by itself (exit code {p.returncode})")
                self.log(f"  ! {what}")

    def _until(self, predicate: Callable[[], Any], timeout: float) -> float | None:
        """Poll `predicate` (exceptions count as "not yet") until true: when, or None."""
        deadline = time.monotonic() + timeout
        while True:
            self._reap()
            with contextlib.suppress(Exception):  # ZooKeeper down, a broker starting: "not yet"
                if predicate():
                    return time.monotonic()
            if time.monotonic() >= deadline:
                return None
            time.sleep(POLL)

    def roles(self, b: int) -> str:
        c, t = self.c, self.topic
        leads = [p for p in self.partitions if c.leader_of(t, p) == b]
        follows = [p for p in self.partitions if b in c.assignment(t)[p] and p not in leads]
        out = []
        if leads:
            out.append("leader of " + ",".join(f"p{p}" for p in leads))
        if follows:
            out.append("follower of " + ",".join(f"p{p}" for p in follows))
        if c.controller() == b:
            out.append("controller")
        return "; ".join(out) or "no replica"

    def warm_up(self, n: int = 100, timeout: float = 60.0) -> None:
        """Until every partition has acknowledged `n` records."""
        if self.producer.wait_acks(0.0, n, time.monotonic() + timeout) is None:
            raise AssertionError(f"the producer got fewer than {n} acknowledgements per partition in {timeout} s; "
                                 f"client errors: {[e.str() for e in self.producer.client_errors[-3:]]}\n"
                                 + self.c.report())

    # --- one fault ------------------------------------------------------------------------------
    def pick_target(self, kind: str, p: int) -> int:
        c, t = self.c, self.topic
        leader = c.leader_of(t, p)
        if kind in ("kill9_leader", "sigstop_leader", "isolate_leader"):
            assert leader is not None, f"partition {p} has no leader"
            return leader
        if kind == "kill9_controller":
            ctl = c.controller()
            assert ctl is not None, "no controller"
            return ctl
        ctl = c.controller()
        led = Counter(c.leader_of(t, q) for q in self.partitions)
        followers = [r for r in c.assignment(t)[p] if r != leader]
        return min(followers, key=lambda r: (r == ctl, led[r], r))

    def inject(self, kind: str, p: int = 0, zk_down_s: float | None = None) -> FaultResult:
        """One fault of `kind` (on partition p's leader or follower where that applies), held
        and healed as the module docstring says; returns what was measured."""
        assert kind in KINDS, kind
        if kind == "isolate_leader" and self.fabric.isolation_unavailable:
            raise RuntimeError(f"isolate_leader: {self.fabric.isolation_unavailable}")
        c, t = self.c, self.topic
        before: list[str] = []
        if self._until(lambda: self.unhealthy() is None, 60) is None:
            before.append(f"cluster not healthy before the fault: {self._safe_unhealthy()}")
        try:
            b = None if kind == "kill9_zookeeper" else self.pick_target(kind, p)
            roles = "ZooKeeper" if b is None else self.roles(b)
        except Exception as e:  # noqa: BLE001 - no leader, ZooKeeper unreachable: this fault cannot be made
            now = time.monotonic()
            r = FaultResult(kind, "?", "?", now, time.time(), now - self.t_start, self.bound,
                            problems=[*before, f"no target for {kind} on partition {p}: {e!r}"])
            self.results.append(r)
            self.log(r.line())
            return r
        led = [q for q in self.partitions if b is not None and c.leader_of(t, q) == b]
        ctl_epoch = c.controller_epoch() or 0

        t0, wall = time.monotonic(), time.time()
        r = FaultResult(kind, "ZooKeeper" if b is None else f"broker {b}", roles, t0, wall, t0 - self.t_start,
                        self.bound, problems=before)
        self._current = r
        r.logs = [str(path) for path in self.log_files()]

        def moved() -> bool:
            return all(c.leader_of(t, q) not in (None, b) for q in led)

        effect: Callable[[], bool] | None
        note = self.timeline.note
        note(f"FAULT {kind} of {r.target} ({roles})", t0)
        if kind in ("kill9_leader", "kill9_follower", "kill9_controller"):
            assert b is not None
            self.down.add(b)
            c.kill9(b)
        elif kind == "sigstop_leader":
            assert b is not None
            c.pause(b)
        elif kind == "isolate_leader":
            assert b is not None
            self.fabric.isolate(b)
        else:
            self.zk.kill9()

        if kind == "kill9_leader":
            r.effect = f"leadership of {','.join(f'p{q}' for q in led)} moved away from broker {b}"
            effect = moved
        elif kind == "kill9_follower":
            r.effect = f"broker {b} out of every ISR" + (", its leaderships moved" if led else "")
            effect = lambda: moved() and all(b not in c.isr(t, q) for q in self.partitions)
        elif kind == "kill9_controller":
            r.effect = "another broker is controller with a higher epoch" + (", leaderships moved" if led else "")
            effect = lambda: (c.controller() not in (None, b) and (c.controller_epoch() or 0) > ctl_epoch
                              and moved())
        elif kind in ("sigstop_leader", "isolate_leader"):
            r.effect = (f"broker {b}'s session expired (gone from /brokers/ids) and leadership of "
                        f"{','.join(f'p{q}' for q in led)} moved")
            effect = lambda: b not in c.registered() and moved()
        else:
            effect = None

        if effect is not None:
            eff = self._until(effect, self.bound + 10)
            r.effect_s = None if eff is None else eff - t0
            if eff is None:
                r.problems.append(f"effect not seen in {self.bound + 10:.0f} s: {r.effect}")
            else:
                note(f"effect seen: {r.effect}", eff)
        else:
            # A ZooKeeper outage is a length of time: there is nothing to wait for.
            down_s = zk_down_s if zk_down_s is not None else 1.5 * self.session_s
            r.effect = f"ZooKeeper down for {down_s:.1f} s, then started again"
            time.sleep(down_s)
            note("starting ZooKeeper again")
            try:
                self.zk.start()
                note("ZooKeeper serves again")
            except RuntimeError as e:
                r.problems.append(f"ZooKeeper did not come back: {e}")
            r.effect_s = time.monotonic() - t0

        # Hold the fault until every partition takes writes again (or past the bound).
        after = t0 + (r.effect_s or 0.0)
        resumed = self.producer.wait_acks(after, RESUMED_ACKS, t0 + self.bound + 3)
        r.resumed_s = None if resumed is None else resumed - t0
        if resumed is not None:
            note(f"acknowledged writes on every partition again ({RESUMED_ACKS} each)", resumed)
        else:
            note(f"acknowledged writes NOT back on every partition by +{self.bound + 3:.1f} s: healing anyway")

        # Heal.
        if kind == "sigstop_leader":
            assert b is not None
            note(f"healing: SIGCONT broker {b}")
            c.resume(b)
        elif kind == "isolate_leader":
            assert b is not None
            note(f"healing: broker {b} reaches ZooKeeper again")
            self.fabric.heal(b)
        self._restart_down(r)
        healed = self._until(lambda: self.unhealthy() is None, 90)
        if healed is None:
            r.problems.append(f"not healed 90 s after healing began: {self._safe_unhealthy()}")
            self._restart_down(r)  # a broker that died meanwhile
        else:
            note("healed: every broker registered and connected, a controller, every ISR full", healed)
        r.healed_s = None if healed is None else healed - t0
        end = self.producer.wait_acks(healed or time.monotonic(), RESUMED_ACKS, time.monotonic() + 30)
        if end is None:
            r.problems.append("no acknowledged writes on every partition within 30 s of healing")
            end = time.monotonic()
        r.end_s = end - t0
        note("end of the window", end)

        gaps = self.producer.gaps(t0, end)
        worst = max(gaps, key=lambda q: gaps[q][0])
        r.gap_s, r.gap_partition, r.gap_from_s = gaps[worst][0], worst, gaps[worst][1] - t0
        r.gaps = {q: g for q, (g, _) in gaps.items()}
        for q, (g, start) in gaps.items():
            if g > self.bound:
                note(f"(p{q}: no acknowledgement from here for {g:.2f} s)", start)
        self.timeline.sync()
        r.timeline = self.timeline.between(t0, end)
        if not r.ok:
            r.evidence = self.evidence(r.wall, r.wall + r.end_s)
        self._current = None
        self.results.append(r)
        self.log(r.line())
        return r

    def _safe_unhealthy(self) -> str | None:
        try:
            return self.unhealthy()
        except Exception as e:  # noqa: BLE001
            return repr(e)

    def _restart_down(self, r: FaultResult) -> None:
        for i in sorted(self.down):
            if self.c.alive(i):
                self.down.discard(i)
                continue
            try:
                self.timeline.note(f"healing: starting broker {i} again")
                self.c.brokers[i].start(30)
                self.down.discard(i)
            except (RuntimeError, TimeoutError) as e:
                r.problems.append(f"broker {i} did not start again: {str(e).splitlines()[0]} "
                                  f"(log: {self.c.brokers[i].log_path})")

    # --- the end --------------------------------------------------------------------------------
    def finish(self) -> Verdict:
        """Stop the producer, read everything back, compare with what was acknowledged, and
        compare the replicas' files."""
        prod = self.producer
        prod.stop()
        self.timeline.stop()
        if self._until(lambda: self.unhealthy() is None, 60) is None:
            self.log(f"  ! not healthy at the end: {self._safe_unhealthy()}")
        acked = {p: dict(prod.acked[p]) for p in self.partitions}  # seq -> offset
        n_acked = sum(len(v) for v in acked.values())
        log = self.c.consume_all(self.topic, self.partitions, timeout=120 + n_acked / 2000)
        lost, dup, reordered, alien = [], [], [], []
        unacked = no_offset = 0
        for p in self.partitions:
            at: dict[int, bytes | None] = {}
            seqs: list[int] = []
            for off, _key, value in log[p]:
                at[off] = value
                try:
                    s = int(value or b"")
                except ValueError:
                    s = -1
                if not 0 <= s < prod.produced[p]:
                    alien.append((p, off, value))
                    continue
                if seqs and s < seqs[-1]:
                    reordered.append((p, off, s, seqs[-1]))
                seqs.append(s)
                if s not in acked[p]:
                    unacked += 1
            dup += [(p, s, k) for s, k in Counter(seqs).items() if k > 1]
            present = set(seqs)
            for s, off in sorted(acked[p].items()):
                if off < 0:  # acknowledged without an offset: it must be in the log somewhere
                    no_offset += 1
                    if s not in present:
                        lost.append((p, s, off, "not anywhere in the log"))
                    continue
                found = at.get(off)
                if found != b"%010d" % s:
                    lost.append((p, s, off, "nothing" if found is None else found.decode(errors="replace")))
        diffs = []
        for p in self.partitions:
            if self._until(lambda p=p: self.c.replica_diff(self.topic, p) is None, 60) is None:
                diffs.append(str(self.c._safe(lambda p=p: self.c.replica_diff(self.topic, p))))
        return Verdict(
            acked=n_acked, produced=sum(prod.produced.values()),
            failed=[(p, s, e.str()) for p, s, e in prod.failed], undelivered=prod.left,
            fatal=[e.str() for e in prod.client_errors if e.fatal()],
            lost=lost, dup=sorted(dup), reordered=reordered, alien=alien, unacked_stored=unacked,
            acked_without_offset=no_offset, diffs=diffs)

    def evidence(self, start: float, end: float, per_source: int = 25) -> list[str]:
        """The lines of every broker's log (warnings and above, and the session guard's) and of
        the client's (its errors and failures) stamped within [start, end] (wall clock), the
        first `per_source` of each with a count of the rest: what a failure's reader needs
        first, in the failure message itself (a CI run keeps no files)."""
        def stamp(line: str, broker: bool) -> float | None:
            text = line[1:24] if broker else line[:23]
            try:
                return time.mktime(time.strptime(text[:19], "%Y-%m-%d %H:%M:%S")) + int(text[20:23]) / 1000
            except (ValueError, IndexError):
                return None

        out: list[str] = []
        sources = [(f"broker {i}", b.log_path, True) for i, b in enumerate(self.c.brokers)]
        sources.append(("client", self.producer.client_log, False))
        for name, path, broker in sources:
            try:
                lines = path.read_text(errors="replace").splitlines()
            except OSError as e:
                out.append(f"{name}: log unreadable ({e})")
                continue
            picked = []
            for line in lines:
                t = stamp(line, broker)
                if t is None or not start - 0.5 <= t <= end + 0.5:
                    continue
                if broker:
                    wanted = " DEBUG " not in line[:40] and (" INFO " not in line[:40] or "(samsa.session)" in line)
                else:
                    wanted = any(k in line for k in (" FAIL ", " REQERR ", " ERROR ", " BROKERUA ", " LEADER ",
                                                     "Selected for cluster connection", "Decommissioning"))
                if wanted:
                    picked.append(line)
            out += [f"{name}: {line[:300]}" for line in picked[:per_source]]
            if len(picked) > per_source:
                out.append(f"{name}: ... and {len(picked) - per_source} more such lines")
        return out

    def log_files(self) -> list[Path]:
        return [b.log_path for b in self.c.brokers] + [self.zk.log_path, self.producer.client_log]

    def keep_logs(self, name: str, results: list[FaultResult]) -> Path:
        """Copy every log to a directory that outlives pytest's rotation of its temporary
        directories ($SAMSA_FAULTS_LOGS, default <tmp>/samsa-faults-logs), point the results
        at the copies and write their descriptions there (report.txt); the directory."""
        root = Path(os.environ.get("SAMSA_FAULTS_LOGS") or Path(tempfile.gettempdir()) / "samsa-faults-logs")
        dest = root / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        dest.mkdir(parents=True, exist_ok=True)
        copies = {}
        for src in self.log_files():
            target = dest / f"{src.parent.name}-{src.name}" if src.parent.name.startswith("broker") else dest / src.name
            if src.exists():
                shutil.copyfile(src, target)
            copies[str(src)] = str(target)
        for r in results:
            r.logs = [copies.get(path, path) for path in r.logs]
        (dest / "report.txt").write_text("\n\n".join(r.describe() for r in results) + "\n")
        return dest

    def close(self) -> None:
        """Stop the producer quickly if it still runs (on failure), heal any isolation."""
        if self.producer.thread.is_alive():
            self.producer.stop(flush_timeout=0)
        self.timeline.stop()
        for i in sorted(getattr(self.fabric, "isolated", set())):
            self.fabric.heal(i)


def max_gaps(results: list[FaultResult]) -> dict[str, FaultResult]:
    """The fault with the longest gap, per kind."""
    out: dict[str, FaultResult] = {}
    for r in results:
        if r.kind not in out or r.gap_s > out[r.kind].gap_s:
            out[r.kind] = r
    return out


def stop_signals_raise() -> None:
    """SIGTERM and SIGHUP end the process through Python's cleanup (finally blocks, atexit) as
    Ctrl-C does, so no process or namespace is left behind."""
    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, handler)
