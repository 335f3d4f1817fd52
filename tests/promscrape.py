"""Reading a broker's /metrics in tests: scraped over HTTP, parsed by prometheus_client's own
text-format parser."""

from __future__ import annotations

import re
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


class Scrape:
    """One scrape, parsed by prometheus_client: values by sample name and labels."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
        self.samples: dict[str, list[tuple[dict[str, str], float]]] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                name = s.name
                # (the parser names a counter's samples NAME_total when TYPE named them without it)
                if name not in self.types and name.endswith("_total") and name[:-6] in self.types:
                    name = name[:-6]
                self.samples.setdefault(name, []).append((dict(s.labels), s.value))

    def value(self, name: str, **labels: str) -> float:
        """The sample with exactly these labels (0 when absent)."""
        found = [v for ls, v in self.samples.get(name, []) if ls == labels]
        assert len(found) <= 1, (name, labels)
        return found[0] if found else 0.0

    def sum(self, name: str, **labels: str) -> float:
        """The sum over the samples having these labels (and maybe others)."""
        return sum(v for ls, v in self.samples.get(name, []) if labels.items() <= ls.items() and ls)

    def by(self, name: str, label: str, **labels: str) -> dict[str, float]:
        return {ls[label]: v for ls, v in self.samples.get(name, []) if label in ls and labels.items() <= ls.items()}


def scrape(port: int) -> Scrape:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        return Scrape(r.read().decode())
