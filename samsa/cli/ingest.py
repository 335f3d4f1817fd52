"""`samsa ingest`: the pipeline's acquisition side — simulated sensors, the pollution API, log files.

    samsa ingest simulate [--rate 1000] [--duration S] ...    sensor readings → sensor_readings
    samsa ingest http [--lat 48.8566 --lon 2.3522] ...        API responses   → plume_pollution
    samsa ingest file PATH [PATH ...] --topic T               log lines       → T

The source runs in a worker thread (`samsa.pipeline.ingest`); the main thread prints status and
turns Ctrl-C or SIGTERM into a clean stop: the source stops, the producer is flushed, the file
registry is saved, and the exit code is 0. A second Ctrl-C abandons the flush.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from samsa.cli import client as cl
from samsa.cli.common import ArgumentParser, CliError, check_bootstrap, parse_properties
from samsa.pipeline.contract import RAW_HTTP, READINGS
from samsa.pipeline.ingest.producer import DEFAULT_BOOTSTRAP, IngestError, IngestProducer

DEFAULT_LAT, DEFAULT_LON = 48.8566, 2.3522  # Paris


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="samsa ingest", description="Feed the realtime pipeline's topics from a data source.")
    common = ArgumentParser(add_help=False)
    common.add_argument(
        "--bootstrap-server", metavar="SERVER", default=DEFAULT_BOOTSTRAP,
        help=f"The server(s) to connect to (default {DEFAULT_BOOTSTRAP}).",
    )
    common.add_argument(
        "--producer-property", action="append", metavar="KEY=VALUE",
        help="A librdkafka producer property (repeatable), e.g. linger.ms=50.",
    )
    common.add_argument(
        "--producer.config", "--command-config", dest="producer_config", metavar="FILE",
        help="Producer properties file, e.g. for a secured cluster (--producer-property wins).",
    )
    common.add_argument(
        "--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="Log level on stderr (default INFO; DEBUG logs every delivery's partition and offset).",
    )
    sub = p.add_subparsers(dest="source", metavar="SOURCE", required=True)

    s = sub.add_parser(
        "simulate", parents=[common], help="a simulated fleet of air-quality sensors",
        description="Simulated air-quality sensors in several cities: JSON readings keyed by sensor id.",
    )
    s.add_argument("--topic", default=READINGS, help=f"Topic to write to (default {READINGS}).")
    s.add_argument("--rate", type=float, default=1000.0, help="Readings per second (default 1000).")
    s.add_argument("--sensors", type=int, default=50, help="Number of sensors (default 50).")
    s.add_argument(
        "--cities", metavar="LIST",
        help="Comma-separated built-in city names, or NAME:LAT:LON:UTC_OFFSET:PM25[:TEMPERATURE] "
        "(default: Reykjavik, Sydney, New York, Paris, Mexico City, Beijing, Cairo, Delhi).",
    )
    s.add_argument("--duration", type=float, metavar="SECONDS", help="Stop after this long (default: until Ctrl-C).")
    s.add_argument("--seed", type=int, help="Random seed, for a reproducible fleet and readings.")
    s.add_argument(
        "--late-ratio", type=float, default=0.02,
        help="Share of readings whose event time is 5-90 s in the past (default 0.02).",
    )
    s.add_argument(
        "--bad-ratio", type=float, default=0.005,
        help="Share of faulty readings: malformed JSON, missing field, negative value, future time (default 0.005).",
    )
    s.add_argument(
        "--episodes-per-hour", type=float, default=3.0,
        help="Pollution episodes (PM x3-8 for 2-6 minutes) per city and hour (default 3).",
    )
    s.add_argument(
        "--status-interval", type=float, default=5.0, metavar="SECONDS",
        help="Print a status line this often (default 5).",
    )

    h = sub.add_parser(
        "http", parents=[common], help="poll the pollution API (Plume) and publish its responses",
        description="Poll an HTTP API and publish each raw response body, keyed \"lat,lon\".",
    )
    h.add_argument("--topic", default=RAW_HTTP, help=f"Topic to write to (default {RAW_HTTP}).")
    h.add_argument(
        "--url", default=None, metavar="TEMPLATE",
        help="URL template with {token}, {lat} and {lon} "
        "(default https://api.plume.io/1.0/pollution/forecast?token={token}&lat={lat}&lon={lon}).",
    )
    h.add_argument("--lat", type=float, default=DEFAULT_LAT, help=f"Latitude (default {DEFAULT_LAT}, Paris).")
    h.add_argument("--lon", type=float, default=DEFAULT_LON, help=f"Longitude (default {DEFAULT_LON}, Paris).")
    h.add_argument(
        "--token-env", default="PLUMETOKEN", metavar="NAME",
        help="Environment variable holding the API token (default PLUMETOKEN).",
    )
    h.add_argument("--interval-ms", type=int, default=60_000, help="Time between requests (default 60000).")
    h.add_argument("--timeout-ms", type=int, default=10_000, help="Request timeout (default 10000).")
    h.add_argument(
        "--backoff-initial-ms", type=int, default=1000,
        help="Pause after a first failed request; doubles per failure, with jitter (default 1000).",
    )
    h.add_argument("--backoff-max-ms", type=int, default=60_000, help="Longest pause between failures (default 60000).")
    h.add_argument("--count", type=int, metavar="N", help="Stop after N responses are published and acknowledged.")

    f = sub.add_parser(
        "file", parents=[common], help="tail log files, one record per line (like Filebeat)",
        description="Tail files into a topic, one record per line (value: the line without its newline; "
        "key: the file's absolute path, or none with --key none). Follows rotation and truncation; "
        "remembers acknowledged positions in a registry file across restarts.",
    )
    f.add_argument("paths", nargs="+", metavar="PATH", help="Files to tail.")
    f.add_argument("--topic", required=True, help="Topic to write to.")
    f.add_argument("--key", choices=("path", "none"), default="path", help="Record key (default path).")
    f.add_argument("--from-end", action="store_true", help="Start files the registry does not know at their end.")
    f.add_argument(
        "--registry", default=None, metavar="FILE",
        help="Where read positions are kept (default ./.samsa-ingest-registry.json).",
    )
    f.add_argument("--poll-interval-ms", type=int, default=250, help="How often files are checked (default 250).")
    f.add_argument(
        "--close-inactive-ms", type=int, default=5000,
        help="Close a rotated-away file after this long without growth (default 5000).",
    )
    f.add_argument(
        "--max-line-bytes", type=int, default=512 * 1024,
        help="Longer lines are sent in pieces of this size (default 524288).",
    )
    return p


@cl.one_line_errors
def run(argv: list[str]) -> int:
    a = build_parser().parse_args(argv)
    check_bootstrap(a.bootstrap_server)
    source: Callable[[Any], int] = {"simulate": _simulate, "http": _http, "file": _file}[a.source]
    return source(a)


# -- the sources ---------------------------------------------------------------------------------


def _simulate(a: Any) -> int:
    from samsa.pipeline.ingest.simulate import DEFAULT_CITIES, Simulator, parse_cities

    if a.rate <= 0:
        raise CliError("--rate must be positive", exit_code=2)
    if a.sensors < 1:
        raise CliError("--sensors must be at least 1", exit_code=2)
    if a.duration is not None and a.duration <= 0:
        raise CliError("--duration must be positive", exit_code=2)
    for name in ("late_ratio", "bad_ratio"):
        if not 0 <= getattr(a, name) <= 1:
            raise CliError(f"--{name.replace('_', '-')} must be between 0 and 1", exit_code=2)
    if a.episodes_per_hour < 0:
        raise CliError("--episodes-per-hour cannot be negative", exit_code=2)
    try:
        cities = parse_cities(a.cities) if a.cities else DEFAULT_CITIES
    except ValueError as e:
        raise CliError(str(e), exit_code=2) from None
    _configure_logging(a.log_level)
    producer = _producer(a)
    sim = Simulator(
        a.bootstrap_server, topic=a.topic, rate=a.rate, sensors=a.sensors, cities=cities, seed=a.seed,
        late_ratio=a.late_ratio, bad_ratio=a.bad_ratio, episodes_per_hour=a.episodes_per_hour,
        duration=a.duration, producer=producer,
    )
    last = [0.0, 0]  # elapsed, acked at the previous status line

    def status() -> None:
        st = sim.stats()
        dt = st["elapsed_s"] - last[0]
        rate = (st["acked"] - last[1]) / dt if dt > 0 else 0.0
        last[:] = [st["elapsed_s"], st["acked"]]
        print(
            f"simulate: {st['elapsed_s']:.0f} s, {rate:.0f} readings/s, generated {st['generated']}, "
            f"acked {st['acked']}, failed {st['failed']}, queued {st['queued']}",
            flush=True,
        )

    _run_source(sim.run, status, a.status_interval)
    st = sim.stats()
    skipped = f", skipped {st['skipped']} (falling behind)" if st["skipped"] else ""
    print(
        f"simulate: done after {st['elapsed_s']:.1f} s: generated {st['generated']}, acked {st['acked']} "
        f"({st['rate']:.0f}/s), failed {st['failed']}{skipped}",
        flush=True,
    )
    return 0


def _http(a: Any) -> int:
    from samsa.pipeline.ingest.poll_http import DEFAULT_URL, HttpPoller, build_url, location_key, template_fields

    template = a.url or DEFAULT_URL
    try:
        fields = template_fields(template)
    except ValueError as e:
        raise CliError(str(e), exit_code=2) from None
    if not (-90 <= a.lat <= 90 and -180 <= a.lon <= 180):
        raise CliError("--lat must be within [-90, 90] and --lon within [-180, 180]", exit_code=2)
    for name in ("interval_ms", "timeout_ms", "backoff_initial_ms", "backoff_max_ms"):
        if getattr(a, name) <= 0:
            raise CliError(f"--{name.replace('_', '-')} must be positive", exit_code=2)
    if a.count is not None and a.count < 1:
        raise CliError("--count must be at least 1", exit_code=2)
    token = os.environ.get(a.token_env) or None
    if "token" in fields and token is None:
        raise CliError(
            f"the API token is missing: set the environment variable {a.token_env} "
            f"(export {a.token_env}=YOUR_TOKEN), or run `samsa ingest simulate` for simulated data"
        )
    _configure_logging(a.log_level)
    producer = _producer(a)
    poller = HttpPoller(
        producer, build_url(template, a.lat, a.lon, token), location_key(a.lat, a.lon), topic=a.topic,
        interval_s=a.interval_ms / 1000, timeout_s=a.timeout_ms / 1000, backoff_initial_s=a.backoff_initial_ms / 1000,
        backoff_max_s=a.backoff_max_ms / 1000, count=a.count, token=token, token_env=a.token_env,
    )
    _run_source(poller.run)
    print(
        f"http: {poller.acked} responses published to {a.topic}, {poller.requests} requests, "
        f"{poller.failures} failed",
        flush=True,
    )
    return 0


def _file(a: Any) -> int:
    from samsa.pipeline.ingest.filetail import DEFAULT_REGISTRY, FileTailer

    for name in ("poll_interval_ms", "close_inactive_ms", "max_line_bytes"):
        if getattr(a, name) <= 0:
            raise CliError(f"--{name.replace('_', '-')} must be positive", exit_code=2)
    registry = a.registry or os.path.join(os.getcwd(), DEFAULT_REGISTRY)
    _configure_logging(a.log_level)
    producer = _producer(a)
    try:
        tailer = FileTailer(
            producer, a.paths, topic=a.topic, registry_path=registry, from_end=a.from_end,
            key_by_path=a.key == "path", poll_interval_s=a.poll_interval_ms / 1000,
            close_inactive_s=a.close_inactive_ms / 1000, max_line_bytes=a.max_line_bytes,
        )
    except ValueError as e:
        raise CliError(str(e)) from None
    _run_source(tailer.run)
    print(f"file: {tailer.lines_acked} lines published to {a.topic}; positions saved in {registry}", flush=True)
    return 0


# -- plumbing ------------------------------------------------------------------------------------


def _configure_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("samsa.ingest").setLevel(getattr(logging, level))


def _producer(a: Any) -> IngestProducer:
    props = parse_properties(a.producer_property, "--producer-property")
    if a.producer_config:
        props = {**cl.to_librdkafka(cl.load_properties(a.producer_config)), **props}
    try:
        producer = IngestProducer(a.bootstrap_server, props)
        producer.check_connection()
    except IngestError as e:
        raise CliError(str(e)) from None
    return producer


def _run_source(
    target: Callable[[threading.Event], None],
    tick: Callable[[], None] | None = None,
    tick_s: float = 5.0,
) -> None:
    """Run `target(stop)` in a worker thread until it returns; Ctrl-C/SIGTERM set `stop`."""
    stop = threading.Event()
    finished = threading.Event()  # not Thread.join: an interrupted join may return early later
    failure: list[BaseException] = []

    def body() -> None:
        try:
            target(stop)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            failure.append(e)
        finally:
            finished.set()

    worker = threading.Thread(target=body, name="samsa-ingest", daemon=True)
    cl.stop_on_sigterm()
    worker.start()
    next_tick = time.monotonic() + tick_s
    try:
        while not finished.wait(max(0.0, min(0.5, next_tick - time.monotonic()))):
            if tick is not None and time.monotonic() >= next_tick:
                next_tick += tick_s
                tick()
    except KeyboardInterrupt:
        logging.getLogger("samsa.ingest").info("stopping: flushing the producer")
        stop.set()
        finished.wait()  # a second Ctrl-C ends the process without waiting
    if failure:
        e = failure[0]
        if isinstance(e, IngestError):
            raise CliError(str(e)) from None
        raise e
