"""The pollution API poller: GET a URL every interval, publish each raw response body to a topic.

How it works: one request at a time on the source's thread (stdlib urllib, with a timeout). A 2xx
body is published as received, keyed "lat,lon", with `resend=True` so a delivery that finally
fails is produced again. Anything else — connection refused, timeout, 5xx, 429, a rejected token —
is logged as one line and the next request waits an exponentially growing, jittered pause
(`Backoff`), capped; the first success returns to the normal interval. The poller never stops on
an API error: only `stop`, or `count` acknowledged responses, end it.

The token never appears in a log line (`redact`).
"""

from __future__ import annotations

import http.client
import logging
import random
import string
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable

from confluent_kafka import Message

from samsa.pipeline.contract import RAW_HTTP
from samsa.pipeline.ingest.producer import Sender

log = logging.getLogger("samsa.ingest.http")

DEFAULT_URL = "https://api.plume.io/1.0/pollution/forecast?token={token}&lat={lat}&lon={lon}"
DEFAULT_TOKEN_ENV = "PLUMETOKEN"
URL_FIELDS = frozenset({"token", "lat", "lon"})
USER_AGENT = "samsa-ingest/0.1"


class FetchError(Exception):
    """The request got no HTTP response (connection refused, timeout, broken response)."""


Fetch = Callable[[str, float], tuple[int, bytes]]


def template_fields(template: str) -> set[str]:
    """The `{names}` a URL template uses; raises ValueError for malformed or positional ones."""
    names = set()
    for _, name, spec, conv in string.Formatter().parse(template):
        if name is None:
            continue
        if not name or name.isdigit() or spec or conv:
            raise ValueError(f"URL template placeholders are {{token}}, {{lat}} and {{lon}}, got {{{name}}}")
        names.add(name)
    unknown = names - URL_FIELDS
    if unknown:
        raise ValueError(f"unknown URL template placeholder {{{sorted(unknown)[0]}}}: use {{token}}, {{lat}}, {{lon}}")
    return names


def format_coordinate(x: float) -> str:
    """48.85 -> "48.85", 2.0 -> "2": the shortest text of the number."""
    text = repr(float(x))
    return text[:-2] if text.endswith(".0") else text


def location_key(lat: float, lon: float) -> str:
    return f"{format_coordinate(lat)},{format_coordinate(lon)}"


def build_url(template: str, lat: float, lon: float, token: str | None) -> str:
    template_fields(template)
    quote = urllib.parse.quote
    return template.format(token=quote(token or "", safe=""), lat=format_coordinate(lat), lon=format_coordinate(lon))


def redact(text: str, token: str | None) -> str:
    if not token:
        return text
    return text.replace(urllib.parse.quote(token, safe=""), "***").replace(token, "***")


def urllib_fetch(url: str, timeout: float) -> tuple[int, bytes]:
    """GET `url`: (status, body) for any HTTP response, FetchError when there is none."""
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return int(response.status), response.read()
    except urllib.error.HTTPError as e:
        try:
            body = e.read()
        except (OSError, http.client.HTTPException):
            body = b""
        finally:
            e.close()
        return e.code, body
    except urllib.error.URLError as e:
        reason = e.reason
        if isinstance(reason, TimeoutError):
            raise FetchError(f"timed out after {timeout:g} s") from None
        raise FetchError(str(reason)) from None
    except TimeoutError:
        raise FetchError(f"timed out after {timeout:g} s") from None
    except (OSError, http.client.HTTPException) as e:
        raise FetchError(str(e) or type(e).__name__) from None


class Backoff:
    """Pause after the n-th consecutive failure: a uniform draw from [½, 1] × initial × 2^(n-1),
    capped at `max_s` ("equal jitter": retries spread out yet keep growing)."""

    def __init__(self, initial_s: float, max_s: float, rng: random.Random | None = None) -> None:
        self.initial_s = initial_s
        self.max_s = max(max_s, initial_s)
        self.failures = 0
        self._rng = rng or random.Random()

    def next_delay(self) -> float:
        self.failures += 1
        ceiling = min(self.max_s, self.initial_s * 2 ** min(self.failures - 1, 60))
        return float(ceiling * self._rng.uniform(0.5, 1.0))

    def reset(self) -> None:
        self.failures = 0


class HttpPoller:
    """Polls `url` every `interval_s` and publishes each 2xx body to `topic` keyed `key`.

    `count`: stop once that many responses are acknowledged. `fetch(url, timeout)` and `clock`
    (monotonic seconds) are injectable; `token` is only used to keep it out of the logs.
    """

    def __init__(
        self,
        producer: Sender,
        url: str,
        key: str,
        *,
        topic: str = RAW_HTTP,
        interval_s: float = 60.0,
        timeout_s: float = 10.0,
        backoff_initial_s: float = 1.0,
        backoff_max_s: float = 60.0,
        count: int | None = None,
        token: str | None = None,
        token_env: str = DEFAULT_TOKEN_ENV,
        fetch: Fetch = urllib_fetch,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self.producer = producer
        self.url = url
        self.key = key
        self.topic = topic
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.backoff = Backoff(backoff_initial_s, backoff_max_s, rng)
        self.count = count
        self._token = token
        self._token_env = token_env
        self._fetch = fetch
        self._clock = clock
        self.requests = 0
        self.failures = 0
        self.sent = 0
        self.acked = 0

    @property
    def display_url(self) -> str:
        return redact(self.url, self._token)

    def run(self, stop: threading.Event, flush_timeout: float = 30.0) -> None:
        log.info("polling %s every %g s into %s (key %s)", self.display_url, self.interval_s, self.topic, self.key)
        next_at = self._clock()
        try:
            while not stop.is_set() and (self.count is None or self.sent < self.count):
                self._sleep_until(next_at, stop)
                if stop.is_set():
                    break
                started = self._clock()
                delay = self.poll_once()
                next_at = started + self.interval_s if delay is None else self._clock() + delay
            while self.count is not None and self.acked < self.count and not stop.is_set():
                self.producer.poll(0.1)  # the last responses: wait for their acknowledgements
        finally:
            left = self.producer.flush(flush_timeout)
            if left:
                log.warning("%d responses were still unacknowledged after %.0f s", left, flush_timeout)

    def _sleep_until(self, when: float, stop: threading.Event) -> None:
        # Serve delivery reports while waiting; check `stop` at least every 0.1 s.
        while not stop.is_set():
            remaining = when - self._clock()
            if remaining <= 0:
                return
            self.producer.poll(min(remaining, 0.1))

    def poll_once(self) -> float | None:
        """One request. Returns None after a published response, else the pause before the next."""
        self.requests += 1
        try:
            status, body = self._fetch(self.url, self.timeout_s)
        except FetchError as e:
            return self._failed(f"request to {self.display_url} failed: {redact(str(e), self._token)}")
        if 200 <= status < 300:
            self.producer.send(self.topic, body, self.key, on_ack=self._on_ack, resend=True)
            self.sent += 1
            if self.backoff.failures:
                log.info("the API answers again (after %d failed requests)", self.backoff.failures)
            self.backoff.reset()
            log.debug("HTTP %d, %d bytes published", status, len(body))
            return None
        if status in (401, 403):
            return self._failed(
                f"HTTP {status} from {self.display_url}: the API rejected the token; check ${self._token_env}",
                level=logging.ERROR,
            )
        snippet = body[:120].decode("utf-8", errors="replace").replace("\n", " ").strip()
        detail = f" ({redact(snippet, self._token)})" if snippet else ""
        level = logging.ERROR if 400 <= status < 500 and status not in (408, 429) else logging.WARNING
        return self._failed(f"HTTP {status} from {self.display_url}{detail}", level=level)

    def _failed(self, reason: str, level: int = logging.WARNING) -> float:
        self.failures += 1
        delay = self.backoff.next_delay()
        log.log(level, "%s; next try in %.1f s", reason, delay)
        return delay

    def _on_ack(self, msg: Message) -> None:
        self.acked += 1
        log.info("response %d delivered to %s [%d] @ %d", self.acked, msg.topic(), msg.partition(), msg.offset())
