"""The dashboard page in a real headless Chromium: the JS renders the broker's data, follows /events,
and paints AQI categories in their EPA colours.

Chromium is driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`) rather than
with `--dump-dom`/`--screenshot`: those wait for `--virtual-time-budget`, and virtual time does
not advance while a request is in flight, which an open EventSource always is, so they never
return on this page. Over the protocol the test waits for what it expects (with a deadline),
takes the DOM and a PNG screenshot, and can watch a live update arrive.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

from samsa.pipeline.dashboard import CATEGORY_COLORS, Dashboard
from tests.brokerproc import BrokerProcess
from tests.pipeline.test_dashboard import Pipeline, make_topics

CHROMIUM = "/usr/bin/chromium"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--remote-debugging-pipe",
)
# Put chromium's protocol pipe ends on fds 3 and 4, which is where --remote-debugging-pipe wants them.
_TRAMPOLINE = (
    "import os, sys\n"
    "r, w = int(sys.argv[1]), int(sys.argv[2])\n"
    "os.dup2(r, 3); os.dup2(w, 4); os.close(r); os.close(w)\n"
    "os.execv(sys.argv[3], sys.argv[3:])\n"
)

pytestmark = pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason=f"{CHROMIUM} is not installed")


class Chromium:
    """One headless Chromium process and its DevTools protocol connection."""

    def __init__(self, workdir: Path, width: int = 1280, height: int = 1000) -> None:
        self.width, self.height = width, height
        r_cmd, w_cmd = os.pipe()
        r_evt, w_evt = os.pipe()
        # Lift the child's ends above 4 so the trampoline's dup2 onto 3 and 4 cannot clobber them.
        child_r = fcntl.fcntl(r_cmd, fcntl.F_DUPFD_CLOEXEC, 10)
        child_w = fcntl.fcntl(w_evt, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(r_cmd)
        os.close(w_evt)
        self._log = open(workdir / "chromium.log", "wb")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _TRAMPOLINE, str(child_r), str(child_w), CHROMIUM, *FLAGS,
                 f"--user-data-dir={workdir / 'profile'}", f"--window-size={width},{height}", "about:blank"],
                pass_fds=(child_r, child_w),
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
            )
        finally:
            os.close(child_r)
            os.close(child_w)
        self._out, self._in = w_cmd, r_evt
        self._buf = b""
        self._next_id = 0

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
             timeout: float = 15.0) -> dict[str, Any]:
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            msg["sessionId"] = session
        os.write(self._out, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self._buf:
                raw, _, self._buf = self._buf.partition(b"\0")
                reply = json.loads(raw)
                if reply.get("id") == self._next_id:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply["result"]  # type: ignore[no-any-return]
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self._in], [], [], remaining)[0]:
                raise TimeoutError(f"chromium did not answer {method} in {timeout} s")
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise EOFError(f"chromium exited ({self.proc.poll()}); see {self._log.name}")
            self._buf += chunk

    def open(self, url: str) -> str:
        """A new page showing `url`; returns its session id."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session: str = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False}, session)
        self.call("Page.navigate", {"url": url}, session)
        self.wait_for(session, f"location.href === {json.dumps(url)} && document.readyState === 'complete'", 15)
        return session

    def evaluate(self, session: str, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, session: str, expression: str, timeout: float) -> Any:
        """Poll a JS expression until it is truthy (TimeoutError after `timeout` s)."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(session, expression)
            if value:
                return value
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{expression!r} still falsy after {timeout} s (last: {value!r})")
            time.sleep(0.1)  # polling a page across processes: there is no event to await here

    def screenshot(self, session: str, path: Path) -> bytes:
        """The whole page as PNG, saved at `path`."""
        size = self.call("Page.getLayoutMetrics", {}, session)["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": self.width, "height": min(4000, size["height"]), "scale": 1}
        shot = self.call("Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True},
                         session)
        png = base64.b64decode(shot["data"])
        path.write_bytes(png)
        return png

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=5)
        except (OSError, EOFError, TimeoutError, RuntimeError):
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._out)
        os.close(self._in)
        self._log.close()


def decode_png(data: bytes) -> tuple[int, int, int, bytes]:
    """(width, height, channels, pixel bytes) of an 8-bit, non-interlaced RGB or RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, bytearray(), None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    assert header is not None
    width, height, depth, color_type, _, _, interlace = header
    assert depth == 8 and color_type in (2, 6) and interlace == 0, f"unsupported PNG {header}"
    bpp = 3 if color_type == 2 else 4
    raw = zlib.decompress(bytes(idat))
    stride = width * bpp
    out = bytearray(height * stride)
    prev = bytearray(stride)
    for y in range(height):
        ftype = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        if ftype == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif ftype == 2:
            for i in range(stride):
                line[i] = (line[i] + prev[i]) & 0xFF
        elif ftype == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif ftype == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pred) & 0xFF
        elif ftype != 0:
            raise ValueError(f"bad PNG filter type {ftype}")
        out[y * stride : (y + 1) * stride] = line
        prev = line
    return width, height, bpp, bytes(out)


def count_color(png: bytes, hex_color: str) -> int:
    """How many pixels of the PNG have exactly this colour."""
    width, height, bpp, pixels = decode_png(png)
    rgb = bytes.fromhex(hex_color.lstrip("#"))
    if bpp == 3:
        return sum(1 for i in range(0, len(pixels), 3) if pixels[i : i + 3] == rgb)
    return sum(1 for i in range(0, len(pixels), 4) if pixels[i : i + 3] == rgb and pixels[i + 3] == 255)


def test_png_decoder_reads_every_filter_type() -> None:
    # A 3x2 RGB image, rows encoded with filters 1 (sub) and 4 (Paeth) by hand.
    row0 = bytes([10, 20, 30, 40, 50, 60, 70, 80, 90])
    row1 = bytes([11, 21, 31, 41, 51, 61, 250, 5, 9])
    sub = bytes([(row0[i] - (row0[i - 3] if i >= 3 else 0)) & 0xFF for i in range(9)])

    def paeth(a: int, b: int, c: int) -> int:
        p = a + b - c
        pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
        return a if pa <= pb and pa <= pc else b if pb <= pc else c

    pae = bytes([(row1[i] - paeth(row1[i - 3] if i >= 3 else 0, row0[i], row0[i - 3] if i >= 3 else 0)) & 0xFF
                 for i in range(9)])
    raw = b"\x01" + sub + b"\x04" + pae

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 3, 2, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    assert decode_png(png) == (3, 2, 3, row0 + row1)
    assert count_color(png, "#0a141e") == 1


@pytest.fixture
def chromium(tmp_path: Path) -> Any:
    browser = Chromium(tmp_path)
    yield browser
    browser.close()


def test_page_renders_live_data_in_category_colours(broker: BrokerProcess, chromium: Chromium,
                                                    tmp_path: Path) -> None:
    topics = make_topics(broker)
    pipe = Pipeline(broker, topics)
    now = pipe.minute()
    # Cities with names and AQI values the static page cannot contain.
    pipe.city("Quorvale", now, 187)  # Unhealthy: a red tile
    pipe.city("Brindlemoor", now, 42)  # Good
    for i in range(10):
        pipe.city("Quorvale", now - (10 - i) * 60_000, 120 + 7 * i)
        pipe.city("Brindlemoor", now - (10 - i) * 60_000, 30 + i)
    pipe.sensor("quorvale-001", "Quorvale", now, 193, lat=12.5, lon=44.25)
    pipe.alert("Quorvale", now, 187)
    pipe.status(readings_end={"0": 0})
    pipe.flush()
    static_html = (Path(__file__).parents[2] / "samsa/pipeline/dashboard/static/index.html").read_text()
    assert "Quorvale" not in static_html and "187" not in static_html

    with Dashboard(broker.bootstrap, port=0, topics=topics) as dash:
        dash.wait_until(lambda s: len(s["cities"]) == 2 and s["sensors"] and s["alerts"], 15)
        page = chromium.open(dash.url)
        chromium.wait_for(page, "document.querySelectorAll('[data-testid=city-tile]').length === 2", 15)
        dom = chromium.evaluate(page, "document.documentElement.outerHTML")
        tile = chromium.evaluate(page, "[...document.querySelectorAll('[data-testid=city-tile]')]"
                                       ".map(t => [t.dataset.city, t.querySelector('[data-testid=city-aqi]')"
                                       ".textContent, getComputedStyle(t).backgroundColor])")
        assert ["Quorvale", "187", "rgb(255, 0, 0)"] in tile
        assert ["Brindlemoor", "42", "rgb(0, 228, 0)"] in tile
        for text in ("Quorvale", "Brindlemoor", "quorvale-001", ">193<", "Unhealthy", "Running"):
            assert text in dom, text
        assert chromium.evaluate(page, "document.querySelector('[data-testid=connection]').textContent") == "live"
        assert chromium.evaluate(page, "document.querySelectorAll('#chart path[data-city]').length") == 2

        shot = tmp_path / "dashboard.png"
        png = chromium.screenshot(page, shot)
        print(f"dashboard screenshot: {shot}")
        red = count_color(png, CATEGORY_COLORS["Unhealthy"])
        green = count_color(png, CATEGORY_COLORS["Good"])
        assert red > 10_000, f"only {red} pixels of Unhealthy red in {shot}"
        assert green > 10_000, f"only {green} pixels of Good green in {shot}"

        # A live update over /events: a newer window turns the first city Hazardous.
        pipe.city("Quorvale", now + 60_000, 333)
        pipe.flush()
        chromium.wait_for(page, "[...document.querySelectorAll('[data-testid=city-aqi]')]"
                                ".some(e => e.textContent === '333')", 15)
        hazardous = chromium.evaluate(page, "getComputedStyle(document.querySelector("
                                            "'[data-city=Quorvale]')).backgroundColor")
        assert hazardous == "rgb(126, 0, 35)"


def test_page_says_when_the_job_is_not_running(broker: BrokerProcess, chromium: Chromium) -> None:
    topics = make_topics(broker)
    pipe = Pipeline(broker, topics)
    pipe.status(readings_end={"0": 0}, ts=int(time.time() * 1000) - 120_000)
    pipe.flush()
    with Dashboard(broker.bootstrap, port=0, topics=topics) as dash:
        page = chromium.open(dash.url)
        # Until the reader has caught up with the status topic the page says "starting"; the
        # stale record then turns it to "not running".
        banner = chromium.wait_for(page, "(e => !e.hidden && e.textContent.includes('not running') && e.textContent)"
                                         "(document.getElementById('banner-job'))", 60)
        assert "Spark job not running" in banner
        assert chromium.evaluate(page, "document.getElementById('job-state').textContent") == "Spark job not running"



def test_page_says_starting_until_the_first_status_record(broker: BrokerProcess, chromium: Chromium) -> None:
    """As in the demo: the dashboard starts with the job, whose first windows and alerts come
    before its first status record, and the topics still hold an earlier run's status. The page
    says "starting" (never "not running") until a status of this run arrives, then "Running"."""
    topics = make_topics(broker)
    pipe = Pipeline(broker, topics)
    started = int(time.time() * 1000)
    pipe.status(readings_end={"0": 0}, ts=started - 300_000, batch_id=41)  # the earlier run's last
    pipe.flush()
    not_running = "document.body.textContent.includes('not running')"
    with Dashboard(broker.bootstrap, port=0, topics=topics, job_started_ms=started, job_start_timeout_s=None,
                   job_timeout_s=5.0) as dash:
        page = chromium.open(dash.url)
        banner = chromium.wait_for(page, "(e => !e.hidden && e.textContent)(document.getElementById('banner-job'))", 15)
        assert banner == "Spark job starting… (waiting for its first pipeline_status record)"
        assert chromium.evaluate(page, "document.getElementById('job-state').textContent") == "Starting…"
        assert not chromium.evaluate(page, not_running)

        now = pipe.minute()
        pipe.city("Quorvale", now, 187)  # the first micro-batch's windows and alert, its status not yet
        pipe.alert("Quorvale", now, 187)
        pipe.flush()
        chromium.wait_for(page, "document.querySelectorAll('[data-testid=city-tile]').length === 1", 15)
        chromium.wait_for(page, "document.getElementById('banner-job').textContent.includes('first windows')", 15)
        assert chromium.evaluate(page, "document.getElementById('job-state').textContent") == "Starting…"
        assert chromium.evaluate(page, "document.getElementById('banner-job').className") == "banner info"
        assert not chromium.evaluate(page, not_running)

        pipe.status(readings_end={"0": 0}, batch_id=0)  # the first batch of this run ends
        pipe.flush()
        chromium.wait_for(page, "document.getElementById('banner-job').hidden", 15)
        assert chromium.evaluate(page, "document.getElementById('job-state').textContent") == "Running"
        assert not chromium.evaluate(page, not_running)
