"""The API poller's decisions without a network: URLs, keys, backoff, what is published, what is logged."""

from __future__ import annotations

import logging
import random
import threading

import pytest

from samsa.pipeline.ingest.poll_http import (
    DEFAULT_URL,
    Backoff,
    FetchError,
    HttpPoller,
    build_url,
    location_key,
    redact,
    template_fields,
)
from tests.pipeline.ingest_fakes import FakeSender

TOKEN = "s3cr3t/tok+en"


@pytest.mark.parametrize(
    "lat,lon,key",
    [(48.8566, 2.3522, "48.8566,2.3522"), (48.0, -2.0, "48,-2"), (-33.87, 151.21, "-33.87,151.21")],
)
def test_location_key(lat: float, lon: float, key: str) -> None:
    assert location_key(lat, lon) == key


def test_build_url_quotes_the_token() -> None:
    assert build_url(DEFAULT_URL, 48.85, 2.35, TOKEN) == (
        "https://api.plume.io/1.0/pollution/forecast?token=s3cr3t%2Ftok%2Ben&lat=48.85&lon=2.35"
    )
    assert template_fields(DEFAULT_URL) == {"token", "lat", "lon"}
    assert template_fields("http://x/{lat}/{lon}") == {"lat", "lon"}


@pytest.mark.parametrize(
    "template", ["http://x/{city}", "http://x/{0}", "http://x/{lat:.2f}", "http://x/{", "http://x/{}"]
)
def test_bad_templates(template: str) -> None:
    with pytest.raises(ValueError):
        template_fields(template)


def test_redact_hides_the_token_raw_and_quoted() -> None:
    url = build_url(DEFAULT_URL, 1, 2, TOKEN)
    assert TOKEN not in redact(url, TOKEN) and "s3cr3t" not in redact(url, TOKEN)
    assert redact(f"bad token {TOKEN}", TOKEN) == "bad token ***"


@pytest.mark.parametrize(
    "initial,cap,ceilings",
    [(1.0, 60.0, [1, 2, 4, 8, 16, 32, 60, 60]), (0.1, 0.3, [0.1, 0.2, 0.3, 0.3]), (5.0, 1.0, [5, 5])],
)
def test_backoff_doubles_with_jitter_up_to_the_cap(initial: float, cap: float, ceilings: list[float]) -> None:
    b = Backoff(initial, cap, random.Random(1))
    for ceiling in ceilings:
        d = b.next_delay()
        assert ceiling / 2 <= d <= ceiling
    b.reset()
    assert b.next_delay() <= initial


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def poller(script: list[object], sender: FakeSender | None = None, **kw: object) -> tuple[HttpPoller, FakeSender]:
    """A poller whose fetches return `script`'s items in turn ((status, body) or an exception)."""
    sender = sender or FakeSender()
    items = iter(script)
    urls: list[str] = []

    def fetch(url: str, timeout: float) -> tuple[int, bytes]:
        urls.append(url)
        item = next(items)
        if isinstance(item, Exception):
            raise item
        assert isinstance(item, tuple)
        return item

    p = HttpPoller(sender, build_url(DEFAULT_URL, 1, 2, TOKEN), "1,2", fetch=fetch, token=TOKEN,
                   rng=random.Random(0), **kw)  # type: ignore[arg-type]
    return p, sender


def test_poll_once_publishes_2xx_bodies_as_received_and_backs_off_on_failures(
    caplog: pytest.LogCaptureFixture,
) -> None:
    p, sender = poller(
        [(200, b'{"a": 1}'), (503, b"busy"), FetchError("timed out after 10 s"), (500, b""), (200, b"raw \x00 bytes")],
        backoff_initial_s=1.0,
    )
    with caplog.at_level(logging.INFO, "samsa.ingest"):
        results = [p.poll_once() for _ in range(5)]
    assert sender.sent == [("plume_pollution", b'{"a": 1}', "1,2"), ("plume_pollution", b"raw \x00 bytes", "1,2")]
    assert all(sender.resend_flags), "API responses are resent when their delivery fails"
    assert results[0] is None and results[4] is None
    delays = results[1:4]
    assert 0.5 <= delays[0] <= 1 and 1 <= delays[1] <= 2 and 2 <= delays[2] <= 4  # type: ignore[operator]
    assert (p.requests, p.failures, p.backoff.failures) == (5, 3, 0)
    assert "HTTP 503 from" in caplog.text and "(busy); next try in" in caplog.text
    assert "timed out after 10 s; next try in" in caplog.text
    assert "the API answers again (after 3 failed requests)" in caplog.text
    assert TOKEN not in caplog.text and "s3cr3t" not in caplog.text


@pytest.mark.parametrize("status", [401, 403])
def test_a_rejected_token_is_logged_clearly_and_polling_goes_on(status: int, caplog: pytest.LogCaptureFixture) -> None:
    p, sender = poller([(status, b'{"error": "invalid token s3cr3t/tok+en"}'), (200, b"{}")], token_env="MYTOKEN")
    with caplog.at_level(logging.INFO, "samsa.ingest"):
        delay = p.poll_once()
        assert delay is not None
        assert p.poll_once() is None
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert f"HTTP {status}" in errors[0].getMessage() and "rejected the token; check $MYTOKEN" in errors[0].getMessage()
    assert "s3cr3t" not in caplog.text
    assert len(sender.sent) == 1


def test_run_stops_after_count_acknowledged_responses_and_logs_their_offsets(caplog: pytest.LogCaptureFixture) -> None:
    p, sender = poller([(200, b"1"), (200, b"2"), (200, b"3"), (200, b"never")], count=3, interval_s=0.0)
    with caplog.at_level(logging.INFO, "samsa.ingest"):
        p.run(threading.Event())
    assert sender.values == [b"1", b"2", b"3"] and p.acked == 3
    assert "response 3 delivered to plume_pollution [0] @ 2" in caplog.text


def test_run_waits_the_interval_after_success_and_the_backoff_after_failure() -> None:
    clock = Clock()
    fetched_at: list[float] = []
    script = iter([(200, b"a"), (500, b""), (500, b""), (200, b"b"), (200, b"c")])
    sender = FakeSender()
    stop = threading.Event()

    def fetch(url: str, timeout: float) -> tuple[int, bytes]:
        fetched_at.append(clock.now)
        clock.now += 0.25  # each request takes 250 ms
        return next(script)

    def poll(timeout: float = 0.0) -> None:
        clock.now += timeout  # waiting advances the fake clock
        sender.ack_all()

    sender.poll = poll  # type: ignore[method-assign]
    p = HttpPoller(sender, "http://x/", "k", interval_s=10.0, backoff_initial_s=2.0, count=3, fetch=fetch,
                   clock=clock, rng=random.Random(3))
    p.run(stop)
    gaps = [b - a for a, b in zip(fetched_at, fetched_at[1:])]
    assert gaps[0] == pytest.approx(10.0)  # interval measured from the start of the request
    assert 0.25 + 1.0 <= gaps[1] <= 0.25 + 2.0 + 1e-9  # first backoff: [1, 2] s after the failure
    assert 0.25 + 2.0 <= gaps[2] <= 0.25 + 4.0 + 1e-9  # second: [2, 4] s
    assert gaps[3] == pytest.approx(10.0)  # back to the interval
    assert sender.values == [b"a", b"b", b"c"]
