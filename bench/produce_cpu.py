"""Where the CPU goes when Samsa takes produce at the native client's speed: Samsa against
librdkafka's in-process mock broker (issue 19's "within 0.9x of the mock"), with each side's
CPU time counted.

    PYTHONPATH=. .venv/bin/python bench/produce_cpu.py [--rounds 6] [--records 2000000]
                                                       [--size 1024] [--acks -1]

Each round runs `rdkafka_performance` (the C client bench/vs_kafka.py uses) producing
`--records` records of `--size` bytes (linger 5 ms) against the mock broker, then against a
fresh Samsa broker (one partition). Printed per round and as medians: records/s and the ratio
to the mock of the same round; the client's CPU time (user and system, the mock broker's
threads included when it is the peer), the broker's (user and system: the kernel's share is
the copy from the socket and the copy into the page cache, which any broker that stores the
bytes pays and the mock does not), and in cores (CPU seconds over the run's wall time): when
the two add up to the machine's cores, the rate is set by CPU per record, not by waiting.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vs_kafka import PERF, create  # noqa: E402

from tests.brokerproc import BrokerProcess  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
RATE = re.compile(r"(\d+) msgs/s")


def cpu_times(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / TICK, int(fields[12]) / TICK


def produce(args: list[str]) -> tuple[float, float, float, float]:
    """(records/s, wall s, client user s, client system s) of one rdkafka_performance run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    out = subprocess.run([str(PERF), *args], capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    last = [ln for ln in (out.stdout + out.stderr).splitlines() if "messages produced" in ln]
    if out.returncode != 0 or not last:
        raise SystemExit(f"rdkafka_performance failed: {out.stderr[-600:]}")
    return (float(RATE.findall(last[-1])[-1]), wall, after.ru_utime - before.ru_utime,
            after.ru_stime - before.ru_stime)


def one_round(a: argparse.Namespace, workdir: Path) -> dict[str, float]:
    common = ["-P", "-s", str(a.size), "-c", str(a.records), "-a", str(a.acks), "-X", "linger.ms=5",
              "-X", "queue.buffering.max.messages=1000000", "-q"]
    mock, wall, cu, cs = produce([*common, "-t", "m", "-X", "test.mock.num.brokers=1"])
    row = {"mock rec/s": mock, "mock: client cores": (cu + cs) / wall}
    b = BrokerProcess(workdir, a.override)
    b.start(60)
    try:
        create(b.bootstrap, "s", 1)
        assert b.proc is not None
        bu0, bs0 = cpu_times(b.proc.pid)
        rate, wall, cu, cs = produce([*common, "-t", "s", "-p", "0", "-b", b.bootstrap])
        bu1, bs1 = cpu_times(b.proc.pid)
    finally:
        b.stop(60)
    bu, bs = bu1 - bu0, bs1 - bs0
    row.update({"samsa rec/s": rate, "samsa / mock": rate / mock, "samsa: client cores": (cu + cs) / wall,
                "samsa: broker cores": (bu + bs) / wall, "broker user s": bu, "broker system s": bs,
                "broker system share": bs / (bu + bs) if bu + bs else float("nan"),
                "broker CPU us per MB": 1e6 * (bu + bs) / (a.records * a.size / 1e6)})
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--acks", type=int, default=-1)
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker config key (e.g. socket.receive.buffer.bytes=-1)")
    a = ap.parse_args()
    a.override = dict(kv.split("=", 1) for kv in a.override)
    if not PERF.exists():
        raise SystemExit(f"{PERF} is missing: run scripts/install-deps.sh")
    rows: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-produce-cpu-") as tmp:
        for r in range(a.rounds):
            row = one_round(a, Path(tmp) / f"r{r}")
            print(f"round {r + 1}: " + ", ".join(f"{k} {v:,.2f}" for k, v in row.items()), flush=True)
            for k, v in row.items():
                rows.setdefault(k, []).append(v)
    print(f"\nmedians of {a.rounds} rounds ({a.records:,} records of {a.size} B, acks={a.acks}, "
          f"{os.cpu_count()} cores):")
    for k, v in rows.items():
        print(f"  {k:28} {statistics.median(v):>14,.2f}   (range {min(v):,.2f} - {max(v):,.2f})")


if __name__ == "__main__":
    main()
