"""The dashboard's broker console on three brokers, in headless Chromium: a broker killed with
kill -9 shows as down and its partitions as under-replicated, on the page as in the view; started
again, it is back up and the under-replicated count returns to 0."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from samsa.pipeline.dashboard import Dashboard
from tests.cluster.cluster import Cluster
from tests.pipeline.console_helpers import PLAIN_COUNTS, Scenario
from tests.pipeline.test_dashboard_browser import CHROMIUM, Chromium

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason=f"{CHROMIUM} is not installed")]


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Chromium]:
    b = Chromium(tmp_path)
    yield b
    b.close()


def js_cells(selector: str, col: str) -> str:
    return f"[...document.querySelectorAll({json.dumps(selector)})].map(r => r.querySelector('[data-col={col}]')" \
           f".textContent)"


def test_a_killed_broker_shows_as_down_with_under_replicated_partitions(cluster: Callable[..., Cluster],
                                                                        browser: Chromium) -> None:
    c = cluster(3)
    scenario = Scenario(c.bootstrap, replication_factor=3)
    try:
        with Dashboard(c.bootstrap, port=0, console_interval_s=0.5, console_request_timeout_s=2.0,
                       min_event_interval_s=0.2) as dash:
            page = browser.open(dash.url + "#console")
            status = js_cells("[data-testid=console-broker-row]", "status")
            browser.wait_for(page, f"JSON.stringify({status}) === '[\"up\",\"up\",\"up\"]'", 30)
            plain = f"[data-testid=console-topic-row][data-topic='{scenario.plain}']"
            browser.wait_for(page, f"!!document.querySelector({json.dumps(plain)})", 30)
            assert browser.evaluate(page, js_cells(plain, "replication_factor")) == ["3"]
            controller = browser.evaluate(page, js_cells("[data-testid=console-broker-row]", "role")).index(
                "controller")
            victim = next(i for i in range(3) if i != controller)  # the controller's move is another test's

            c.kill9(victim)
            row = f"[data-testid=console-broker-row][data-broker='{victim}']"
            browser.wait_for(page, f"document.querySelector({json.dumps(row)})?.dataset.up === 'false'", 30)
            assert browser.evaluate(page, js_cells(row, "status")) == ["down"]
            urp = "Number(document.querySelector('[data-testid=console-urp]').textContent.replace(/,/g, ''))"
            browser.wait_for(page, f"{urp} > 0", 30)  # the controller shrinks the ISRs
            view = dash.console_view()
            assert view["summary"]["brokers_up"] == 2 and view["summary"]["under_replicated"] > 0
            [t] = [t for t in view["topics"] if t["name"] == scenario.plain]
            assert all(victim not in p["isr"] and victim in p["replicas"] for p in t["partitions"])
            assert [p["high_watermark"] for p in t["partitions"]] == list(PLAIN_COUNTS)
            assert browser.evaluate(page, js_cells(plain, "under_replicated")) == [str(len(PLAIN_COUNTS))]

            c.start(victim)
            browser.wait_for(page, f"document.querySelector({json.dumps(row)})?.dataset.up === 'true'", 30)
            browser.wait_for(page, f"{urp} === 0", 60)  # caught up, back in every ISR
            assert dash.console_view()["summary"]["brokers_up"] == 3
    finally:
        scenario.close()
