"""Summarize a bench/compare_peers.sh results directory as a Markdown table (medians)."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def rows(path: Path, kind: str) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if d.get("kind") == kind:
            out.append(d)
    return out


def med(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f}" if values else "-"


def main() -> None:
    out = Path(sys.argv[1])
    labels = ["samsa", "tansu", "noida", "mock"]
    if (out / "A-samsa-base.jsonl").exists():  # compare_peers.sh with SAMSA_BASE: before/after
        labels.insert(1, "samsa-base")
    print("| workload | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    for wl, name in (("A", "1M x 100 B acks=1"), ("B", "200k x 1 KiB acks=all")):
        for phase in ("produce", "consume"):
            cells = []
            for label in labels:
                rs = rows(out / f"{wl}-{label}.jsonl", phase)
                cpu = [r["other_cpu_pct"] for r in rs if r.get("other_cpu_pct") is not None]
                cell = med([r["records_per_s"] for r in rs])
                if cpu:
                    cell += f" (other {max(cpu):.0f}%)"
                cells.append(cell)
            print(f"| {name} {phase} rec/s | " + " | ".join(cells) + " |")
    for wl, linger in (("C", 5), ("D", 0)):
        for rate in (10000, 1000):
            cells = []
            for label in labels:
                rs = [r for r in rows(out / f"{wl}-{label}.jsonl", "latency") if r.get("target_rate", rate) == rate]
                p50 = statistics.median(r["p50_ms"] for r in rs) if rs else None
                p99 = statistics.median(r["p99_ms"] for r in rs) if rs else None
                cells.append(f"{p50:.2f} / {p99:.2f}" + (f" ({len(rs)} runs)" if len(rs) > 1 else "") if rs else "-")
            print(f"| e2e latency {rate // 1000}k/s linger {linger}, p50 / p99 ms | " + " | ".join(cells) + " |")
    cells = []
    for label in labels:
        rs = rows(out / f"{label}-startup.jsonl", "startup")
        cells.append(f"{rs[0]['metadata_s'] * 1000:.0f} ms / {rs[0]['rss_mb']:.0f} MB" if rs and rs[0].get("metadata_s") else "-")
    print("| ready after launch / RSS | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
