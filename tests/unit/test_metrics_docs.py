"""docs/grafana-samsa.json uses only metrics docs/metrics.md lists (the broker test checks that
the table is what a broker serves)."""

from __future__ import annotations

import json
import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"


def documented() -> dict[str, str]:
    return dict(re.findall(r"^\| `([a-z_]+)` \| (counter|gauge|histogram) \|", (DOCS / "metrics.md").read_text(), re.M))


def test_the_dashboard_uses_documented_metrics_only() -> None:
    table = documented()
    dashboard = json.loads((DOCS / "grafana-samsa.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert len(exprs) > 30
    used = set()
    for expr in exprs:
        for name in re.findall(r"\b((?:kafka|samsa|process)_[a-z_]+)\b", expr):
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            used.add(name if name in table else base)
            assert name in table or table.get(base) == "histogram", (name, expr)
    # Every family appears on the dashboard but a few that are rarely worth a panel.
    assert set(table) - used <= {"kafka_server_replicamanager_atminisrpartitioncount"}, set(table) - used
