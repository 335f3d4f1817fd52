"""The broker console in a real headless Chromium (the DevTools-protocol driver of
test_dashboard_browser.py): reached from the pipeline view with the keyboard, it shows the
cluster's partitions, leaders and lag as the broker has them, follows new records live, and
draws its header in its colour (checked in a screenshot). At 1,000 partitions it stays small and
quick: the JSON's size and the render time are measured and bounded."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from samsa.pipeline.dashboard import Dashboard
from tests.brokerproc import BrokerProcess
from tests.pipeline.console_helpers import CLIENT_ID, COMMITTED, PLAIN_COUNTS, Scenario
from tests.pipeline.test_dashboard import _get
from tests.pipeline.test_dashboard_browser import CHROMIUM, Chromium, decode_png

pytestmark = pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason=f"{CHROMIUM} is not installed")

CONSOLE_HEADER = "#24406e"  # --console in dashboard.css


def css_var(name: str) -> str:
    css = (Path(__file__).parents[2] / "samsa/pipeline/dashboard/static/dashboard.css").read_text()
    return css.split(f"{name}:", 1)[1].split(";", 1)[0].strip()


def press(browser: Chromium, page: str, key: str, code: int) -> None:
    for kind in ("keyDown", "keyUp"):
        browser.call("Input.dispatchKeyEvent", {"type": kind, "key": key, "code": key, "windowsVirtualKeyCode": code},
                     page)


def cells(browser: Chromium, page: str, row_selector: str, cols: list[str]) -> list[list[str]]:
    """The text of columns `cols` (their data-col) of every row matching `row_selector`."""
    return browser.evaluate(page, f"[...document.querySelectorAll({json.dumps(row_selector)})].map(r => "
                                  f"{json.dumps(cols)}.map(c => r.querySelector(`[data-col=${{c}}]`).textContent))")


def q(selector: str) -> str:
    return f"document.querySelector({json.dumps(selector)})"


def present(*selectors: str) -> str:
    """A JS expression: every selector matches (as a boolean: a DOM node comes back as {})."""
    return " && ".join(f"!!{q(s)}" for s in selectors)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Chromium]:
    b = Chromium(tmp_path)
    yield b
    b.close()


@pytest.fixture
def broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    """A broker of this test's own: on the session's shared broker, other tests' topics push
    the internal topics (listed last) onto a later page of the console's topic list."""
    return broker_factory()


@pytest.fixture
def scenario(broker: BrokerProcess) -> Iterator[Scenario]:
    s = Scenario(broker.bootstrap)
    yield s
    s.close()


def test_console_shows_the_cluster_and_follows_the_lag(broker: BrokerProcess, scenario: Scenario,
                                                       browser: Chromium, tmp_path: Path) -> None:
    assert css_var("--console") == CONSOLE_HEADER
    with Dashboard(broker.bootstrap, port=0, console_interval_s=0.5, min_event_interval_s=0.2) as dash:
        page = browser.open(dash.url)
        assert browser.evaluate(page, q("#panel-console") + ".hidden") is True
        # The keyboard alone: focus the selected tab, then the right arrow selects the next one.
        browser.evaluate(page, q("#tab-pipeline") + ".focus()")
        press(browser, page, "ArrowRight", 39)
        assert browser.evaluate(page, "[document.activeElement.id, " + q("#tab-console") + ".getAttribute("
                                       "'aria-selected'), " + q("#panel-console") + ".hidden, "
                                       + q("#panel-pipeline") + ".hidden, location.hash]") == [
            "tab-console", "true", False, True, "#console"]

        plain_row = f"[data-testid=console-topic-row][data-topic='{scenario.plain}']"
        group_row = f"[data-testid=console-group-row][data-group='{scenario.group}']"
        browser.wait_for(page, present(plain_row, group_row), 90)
        assert browser.evaluate(page, q("[data-testid=console-connection]") + ".textContent") == "live"
        assert cells(browser, page, "[data-testid=console-broker-row]", ["id", "address", "status", "role"]) == [
            ["0", broker.bootstrap, "up", "controller"]]
        assert cells(browser, page, plain_row, ["partitions", "replication_factor", "under_replicated", "records"]) == [
            ["3", "1", "0", str(sum(PLAIN_COUNTS))]]
        compacted_configs = cells(browser, page, f"[data-testid=console-topic-row][data-topic='{scenario.compacted}']",
                                  ["configs"])
        assert "cleanup.policy=compact" in compacted_configs[0][0]
        assert browser.evaluate(page, q("[data-topic=__consumer_offsets] [data-testid=internal]") + ".textContent") \
            == "internal"

        # Expand the topic and the group (their buttons say so to assistive technology).
        browser.evaluate(page, q(plain_row + " .expander") + ".click()")
        browser.evaluate(page, q(group_row + " .expander") + ".click()")
        browser.wait_for(page, present("[data-testid=console-lag-row]", "[data-testid=console-partition-row]"), 60)
        assert browser.evaluate(page, q(plain_row + " .expander") + ".getAttribute('aria-expanded')") == "true"
        assert cells(browser, page, f"[data-testid=console-partition-row][data-topic='{scenario.plain}']",
                     ["partition", "leader", "replicas", "isr", "log_start_offset", "high_watermark"]) == [
            [str(p), "0", "0", "0", "0", str(n)] for p, n in enumerate(PLAIN_COUNTS)]
        assert cells(browser, page, group_row, ["state", "protocol", "members", "total_lag"]) == [
            ["Stable", "classic", "1", "11"]]
        lag_cols = ["partition", "committed", "high_watermark", "lag", "client_id"]
        assert cells(browser, page, "[data-testid=console-lag-row]", lag_cols) == [
            ["0", str(COMMITTED[0]), str(PLAIN_COUNTS[0]), str(PLAIN_COUNTS[0] - COMMITTED[0]), CLIENT_ID],
            ["1", str(COMMITTED[1]), str(PLAIN_COUNTS[1]), str(PLAIN_COUNTS[1] - COMMITTED[1]), CLIENT_ID],
            ["2", "—", str(PLAIN_COUNTS[2]), "—", CLIENT_ID]]
        assert cells(browser, page, "[data-testid=console-member-row]", ["client_id", "assignment"]) == [
            [CLIENT_ID, f"{scenario.plain}: 0, 1, 2"]]

        shot = tmp_path / "console.png"
        png = browser.screenshot(page, shot)
        print(f"console screenshot: {shot}")
        width, height, colors = color_counts(png)
        assert width == 1280 and height >= 1000, (width, height)
        header = colors[rgb(CONSOLE_HEADER)]
        assert header > 30_000, f"only {header} pixels of the console header's {CONSOLE_HEADER} in {shot}"
        assert colors[rgb("#12805c")] > 300, f"no green 'up'/'live' pills in {shot}"  # --ok
        assert colors.most_common(1)[0][1] < 0.8 * width * height, f"{shot} is mostly one colour"
        # The same checks see an unstyled page for what it is.
        browser.evaluate(page, "document.styleSheets[0].disabled = true")
        _, _, unstyled = color_counts(browser.screenshot(page, tmp_path / "unstyled.png"))
        assert unstyled[rgb(CONSOLE_HEADER)] == 0 and unstyled[rgb("#12805c")] == 0
        browser.evaluate(page, "document.styleSheets[0].disabled = false")

        # Live: three more records on partition 0; the lag cell and the total follow, no reload.
        scenario.produce(scenario.plain, 0, 3)
        browser.wait_for(page, q("[data-testid=console-lag-row][data-partition='0'] [data-col=lag]")
                          + ".textContent === '9'", 60)
        assert cells(browser, page, group_row, ["total_lag"]) == [["14"]]
        assert browser.evaluate(page, q(plain_row + " .expander") + ".getAttribute('aria-expanded')") == "true"

        # Back to the pipeline: the console's stream closes, and the server stops polling.
        press(browser, page, "ArrowLeft", 37)
        assert browser.evaluate(page, "[document.activeElement.id, location.hash]") == ["tab-pipeline", ""]
        published = dash.console.published  # type: ignore[union-attr]
        deadline = time.monotonic() + 30
        while published.demanded():
            assert time.monotonic() < deadline, "the console's stream stayed open after leaving its tab"
            published.wait_newer(published.payload()[0], 0.5)


def rgb(hex_color: str) -> bytes:
    return bytes.fromhex(hex_color.lstrip("#"))


def color_counts(png: bytes) -> tuple[int, int, Counter[bytes]]:
    """(width, height, pixels per opaque RGB colour) of a screenshot, decoded once."""
    width, height, bpp, pixels = decode_png(png)
    if bpp == 3:
        return width, height, Counter(pixels[i:i + 3] for i in range(0, len(pixels), 3))
    return width, height, Counter(pixels[i:i + 3] for i in range(0, len(pixels), 4) if pixels[i + 3] == 255)


def test_a_thousand_partitions_stay_small_and_quick(broker_factory: Callable[..., BrokerProcess],
                                                   browser: Chromium) -> None:
    """One topic of 1,000 partitions and a group with an offset on each: the view's JSON, the
    poll and the page's render, measured (the figures are printed) and bounded generously."""
    b = broker_factory()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in admin.create_topics([NewTopic("wide", num_partitions=1000, replication_factor=1)]).values():
        f.result(60)
    producer = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    for p in range(1000):
        producer.produce("wide", value=b"r", partition=p)
    assert producer.flush(60) == 0
    committer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "wide-readers"})
    committer.commit(offsets=[TopicPartition("wide", p, p % 2) for p in range(1000)], asynchronous=False)
    committer.close()
    with Dashboard(b.bootstrap, port=0, console_interval_s=1.0) as dash:
        view = dash.wait_console(lambda v: v["state"] == "ok" and v["groups"] and v["summary"]["partitions"] >= 1000,
                                 60)
        status, _, body = _get(dash.url + "api/console")
        assert status == 200
        page = browser.open(dash.url + "#console")
        browser.wait_for(page, present("[data-testid=console-topic-row][data-topic=wide]"), 90)
        browser.evaluate(page, q("[data-topic=wide] .expander") + ".click()")
        browser.evaluate(page, q("[data-group=wide-readers] .expander") + ".click()")
        browser.wait_for(page, present("[data-testid=console-lag-row]"), 60)
        render_ms = float(browser.evaluate(page, q("#panel-console") + ".dataset.renderMs"))
        rows = browser.evaluate(page, "document.querySelectorAll('tr').length")
        pager = browser.evaluate(page, q("[data-topic=wide] ~ tr.detail [data-testid=pager] span") + ".textContent")
        assert pager == "partitions 1–50 of 1,000"
        browser.evaluate(page, q("[aria-label='Next page of partitions']") + ".click()")
        browser.wait_for(page, present("[data-testid=console-partition-row][data-partition='99']"), 60)
        lag = view["groups"][0]
        print(f"\n1,000 partitions: /api/console {len(body):,} B, poll {view['poll_ms']} ms, "
              f"render {render_ms:.1f} ms, {rows} table rows in the DOM")
        assert lag["total_lag"] == 500 and len(lag["partitions"]) == 1000
        assert len(body) < 600_000, f"the console's JSON is {len(body):,} B at 1,000 partitions"
        assert render_ms < 1500, f"rendering took {render_ms} ms"
        assert rows < 250, "the page renders pages of rows, not every partition"
