"""The log cleaner inside a running broker: how fast it cleans, what it costs produce latency,
and how much memory it takes (issue 20).

    PYTHONPATH=. .venv/bin/python bench/bench_compaction.py [--records 2000000] [--keys 1000000]
                                                           [--value-bytes 500] [--rounds 3]

Each round starts a fresh broker (log.cleaner.backoff.ms 100) and fills a compacted topic with
`--records` records over `--keys` keys (each key written records/keys times, ~1 GiB by
default) while `min.cleanable.dirty.ratio` is 1.0 (nothing is cleanable: the check is
"ratio > min"), and syncs the file systems (the fill's writeback out of the way). Then, with a
producer of 100 B records at `--rate` msg/s (acks=1, linger 0) to another topic (`--probe`:
confluent-kafka paced by sleeping, or rdkafka_performance, which spins a core at this rate):
- for `--seconds`, nothing else happens: the baseline delivery latency;
- then the dirty topic's ratio is set to 0.01, and the same producer runs while the cleaner
  cleans it (until its "Cleaned ..." line appears in the broker's log).
Printed per round and as medians: cleaning throughput (MB of dirty log read per second, from
the broker's own summary), produce p50/p99/p99.9 without and during the clean and their ratio
(goal: p99 within 1.5x), the broker's RSS before and at its highest during the clean, and
log.cleaner.dedupe.buffer.size for comparison (goal: peak memory bounded by it).
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic  # noqa: E402

from tests.brokerproc import BrokerProcess, free_port  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PERF = REPO / "compat/node-rdkafka/node_modules/node-rdkafka/deps/librdkafka/examples/rdkafka_performance"
DEDUPE = 128 << 20


def rss_mib(pid: int) -> float:
    """The RSS of `pid` and its children (the cleaner runs in a child process of the broker)."""
    total = 0.0
    pids = [pid]
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            pids += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        pass
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            pass
    return total


class PeakRss:
    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self._stop = pid, 0.0, threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_mib(self.pid))
            self._stop.wait(0.05)

    def __enter__(self) -> PeakRss:
        self._t.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._t.join()


def fill(bootstrap: str, topic: str, records: int, keys: int, value_bytes: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20, "acks": "1",
                  "queue.buffering.max.kbytes": 1 << 20, "compression.type": "none"})
    value = b"v" * value_bytes
    for i in range(records):
        while True:
            try:
                p.produce(topic, key=b"key-%08d" % (i % keys), value=value)
                break
            except BufferError:
                p.poll(0.05)
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(120) == 0


def latencies(bootstrap: str, topic: str, rate: int, until: Any, workdir: Path, tag: str,
              probe: str = "python") -> list[int]:
    """Delivery latencies (µs) of a producer at `rate` msg/s that runs until `until()` is true."""
    out = workdir / f"lat-{tag}.txt"
    if probe == "rdkafka":
        cmd = [str(PERF), "-P", "-l", "-A", str(out), "-t", topic, "-p", "0", "-b", bootstrap,
               "-s", "100", "-r", str(rate), "-a", "1", "-X", "linger.ms=0", "-q"]
    else:
        cmd = [sys.executable, __file__, "--probe-child", bootstrap, topic, str(rate), str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not until():
            time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(30)
    return sorted(int(x) for x in out.read_text().split() if x.strip()) if out.exists() else []


def probe_child(bootstrap: str, topic: str, rate: int, out: str) -> None:
    """The "python" probe: 100 B records at `rate` msg/s, one at a time (acks=1, linger 0), paced
    by sleeping, each one's latency taken in its delivery callback; written to `out` (µs, one a
    line) at SIGTERM. rdkafka_performance paces by polling with a timeout of 0 ms when less than a
    millisecond is left, i.e. it spins: 1.04 cores at 5,000 msg/s, on a machine of 2."""
    import signal

    lat: list[int] = []
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1})
    clock = time.perf_counter_ns
    value = b"x" * 100

    def done(sent: int, err: Any, msg: Any) -> None:
        if err is None:
            lat.append((clock() - sent) // 1000)

    interval = 1e9 / rate
    due = float(clock())
    while not stop[0]:
        p.produce(topic, value, partition=0, on_delivery=functools.partial(done, clock()))
        p.poll(0)
        due += interval
        wait = (due - clock()) / 1e9
        if wait > 0:
            time.sleep(wait)
    p.flush(30)
    Path(out).write_text("\n".join(map(str, lat)))


def buckets(port: int) -> dict[str, dict[float, float]]:
    """The broker's own histograms (cumulative bucket counts by upper bound, in ms): the event
    loop's lag and Produce's total time. They tell the broker's share of a client's latency
    from the client's and this VM's (whose idle timers are late by up to ~20 ms now and then)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out: dict[str, dict[float, float]] = {"loop lag": {}, "produce time": {}}
    for ln in text.splitlines():
        if ln.startswith("samsa_eventloop_lag_seconds_bucket"):
            name, scale = "loop lag", 1000.0
        elif ln.startswith('kafka_network_requestmetrics_totaltimems_bucket{request="Produce"'):
            name, scale = "produce time", 1.0
        else:
            continue
        le = ln.split('le="', 1)[1].split('"', 1)[0]
        out[name][float(le) * scale] = float(ln.rsplit(" ", 1)[1])
    return out


def over(before: dict[float, float], after: dict[float, float], ms: float) -> float:
    """The share (%) of observations between two scrapes that exceeded `ms` (a bucket bound)."""
    total = after[float("inf")] - before.get(float("inf"), 0)
    within = after[ms] - before.get(ms, 0)
    return 100 * (total - within) / total if total else float("nan")


def pct(us: list[int], q: float) -> float:
    return us[min(len(us) - 1, int(q * len(us)))] / 1000 if us else float("nan")


def one_round(workdir: Path, a: argparse.Namespace) -> dict[str, float]:
    port = free_port()
    b = BrokerProcess(workdir, {"log.cleaner.backoff.ms": "100", "log.cleaner.dedupe.buffer.size": str(DEDUPE),
                                "prometheus.listener": f"127.0.0.1:{port}", **a.override})
    b.start(60)
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in admin.create_topics([
                NewTopic("dirty", 1, 1, config={"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "1.0",
                                                "segment.bytes": str(128 << 20)}),
                NewTopic("lat", 1, 1)]).values():
            f.result(30)
        t0 = time.monotonic()
        fill(b.bootstrap, "dirty", a.records, a.keys, a.value_bytes)
        # the last segment must roll for everything to be cleanable: one more segment's worth
        fill(b.bootstrap, "dirty", (128 << 20) // (a.value_bytes + 30) + 10, 1, a.value_bytes)
        print(f"    filled in {time.monotonic() - t0:.1f} s", flush=True)
        os.sync()  # the fill's dirty pages written back first: their writeback would be in both figures
        assert b.proc is not None
        pid = b.proc.pid
        rss_before = rss_mib(pid)
        end = time.monotonic() + a.seconds
        h0 = buckets(port)
        base = latencies(b.bootstrap, "lat", a.rate, lambda: time.monotonic() >= end, workdir, "base", a.probe)
        h1 = buckets(port)
        res = ConfigResource("topic", "dirty", incremental_configs=[
            ConfigEntry("min.cleanable.dirty.ratio", "0.01", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(30)
        with PeakRss(pid) as peak:
            during = latencies(b.bootstrap, "lat", a.rate, lambda: "Cleaned dirty-0" in b.log_text(), workdir,
                               "clean", a.probe)
        h2 = buckets(port)
        line = [ln for ln in b.log_text().splitlines() if "Cleaned dirty-0" in ln][0]
        mbps = float(re.search(r"\(([\d.]+) MB/s\)", line).group(1))  # type: ignore[union-attr]
        print(f"    {line.split('Cleaned', 1)[1].strip()}", flush=True)
        logged = b.log_text().splitlines()
        stalls = [i for i, ln in enumerate(logged) if "Event loop stalled" in ln]
        print(f"    event loop stalls over 100 ms logged: {len(stalls)}", flush=True)
        for i in stalls[:3]:  # the loop monitor's warning and the culprit's innermost frames
            print("    " + "\n    ".join(ln.rstrip() for ln in logged[i:i + 8]), flush=True)
        return {"cleaning MB/s": mbps, "p50 ms without": pct(base, 0.5), "p99 ms without": pct(base, 0.99),
                "p99.9 ms without": pct(base, 0.999), "p50 ms cleaning": pct(during, 0.5),
                "p99 ms cleaning": pct(during, 0.99), "p99.9 ms cleaning": pct(during, 0.999),
                "latency samples while cleaning": len(during), "RSS before MiB": rss_before,
                "RSS peak while cleaning MiB": peak.peak,
                **{f"% {name} > {ms:g} ms {phase}": over(x[name], y[name], ms)
                   for name in ("loop lag", "produce time") for ms in (10.0, 25.0)
                   for phase, x, y in (("without", h0, h1), ("cleaning", h1, h2))}}
    finally:
        b.stop(120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--value-bytes", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rate", type=int, default=5000, help="the latency producer's msg/s")
    ap.add_argument("--seconds", type=float, default=5.0, help="the baseline's length")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker config key for every round (e.g. log.cleaner.io.max.bytes.per.second=...)")
    ap.add_argument("--probe", choices=("python", "rdkafka"), default="python",
                    help="the latency producer: confluent-kafka paced by sleeping (default), or rdkafka_performance "
                         "-l, which spins a core to pace itself")
    ap.add_argument("--probe-child", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.probe_child:
        bootstrap, topic, rate, out = a.probe_child
        probe_child(bootstrap, topic, int(rate), out)
        return
    a.override = dict(kv.split("=", 1) for kv in a.override)
    if not PERF.exists():
        raise SystemExit(f"{PERF} is missing: run scripts/install-deps.sh")
    rows: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-compaction-") as tmp:
        for r in range(a.rounds):
            print(f"==> round {r + 1}", flush=True)
            row = one_round(Path(tmp) / f"r{r}", a)
            print("    " + ", ".join(f"{k} {v:,.2f}" for k, v in row.items()), flush=True)
            for k, v in row.items():
                rows.setdefault(k, []).append(v)
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f"\nmedians of {a.rounds} rounds ({a.records:,} records over {a.keys:,} keys, {a.value_bytes} B values):")
    for k, v in med.items():
        print(f"  {k:34} {v:>12,.2f}")
    print(f"  {'p99 cleaning / without':34} {med['p99 ms cleaning'] / med['p99 ms without']:>12.2f}  (goal <= 1.5)")
    print(f"  {'RSS peak - before (MiB)':34} {med['RSS peak while cleaning MiB'] - med['RSS before MiB']:>12,.1f}  "
          f"(dedupe buffer {DEDUPE >> 20} MiB)")


if __name__ == "__main__":
    main()
