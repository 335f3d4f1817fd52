"""`samsa dashboard`: serve the realtime pipeline's live web dashboard until Ctrl-C.

The dashboard (`samsa.pipeline.dashboard`) follows the pipeline's topics on the broker and serves
the page, /api/state, /events (server-sent events) and /healthz; its broker console tab (and
/api/console) shows the cluster's brokers, topics and consumer groups, polled every
`--console-interval` seconds while someone looks. The broker may be down when it starts: the page
then says so and the dashboard keeps retrying.
"""

from __future__ import annotations

import sys
import threading

from samsa.cli import client as cl
from samsa.cli.common import ArgumentParser, CliError, check_bootstrap
from samsa.pipeline.dashboard import Dashboard, PipelineTopics

_DEFAULTS = PipelineTopics()


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="samsa dashboard", description="Serve the realtime pipeline's live web dashboard.")
    p.add_argument("--bootstrap-server", metavar="SERVER", required=True, help="REQUIRED: The server(s) to connect to.")
    p.add_argument("--http-host", metavar="HOST", default="127.0.0.1", help="Address to serve on (default 127.0.0.1).")
    p.add_argument(
        "--http-port", metavar="PORT", type=int, default=8050, help="Port to serve on, 0: any free one (default 8050)."
    )
    p.add_argument(
        "--job-timeout",
        metavar="SECONDS",
        type=float,
        default=30.0,
        help="The Spark job counts as not running when its last pipeline_status is older than this (default 30).",
    )
    p.add_argument(
        "--job-start-timeout",
        metavar="SECONDS",
        type=float,
        default=120.0,
        help="Until its first pipeline_status record, the Spark job counts as starting for this long after the "
        "dashboard starts, then as not running (default 120; a job whose windows arrive counts as starting).",
    )
    p.add_argument(
        "--history-minutes",
        metavar="MINUTES",
        type=float,
        default=60.0,
        help="Minutes of 1-minute city windows the chart shows (default 60).",
    )
    p.add_argument(
        "--console-interval",
        metavar="SECONDS",
        type=float,
        default=3.0,
        help="How often the broker console polls the cluster while a page shows it (default 3; 0: no console).",
    )
    for role, flag in (
        ("readings", "--readings-topic"),
        ("aggregates", "--aggregates-topic"),
        ("alerts", "--alerts-topic"),
        ("status", "--status-topic"),
        ("dlq", "--dlq-topic"),
        ("raw_http", "--raw-topic"),
    ):
        default = getattr(_DEFAULTS, role)
        p.add_argument(flag, dest=f"topic_{role}", metavar="TOPIC", default=default, help=f"(default {default})")
    p.add_argument("--command-config", metavar="FILE",
                   help="Kafka client properties for a secured cluster: security.protocol, sasl.*, ssl.*")
    return p


@cl.one_line_errors
def run(argv: list[str]) -> int:
    a = build_parser().parse_args(argv)
    check_bootstrap(a.bootstrap_server)
    if not 0 <= a.http_port <= 65535:
        raise CliError(f"--http-port must be between 0 and 65535, got {a.http_port}", exit_code=2)
    if a.job_timeout <= 0 or a.job_start_timeout <= 0 or a.history_minutes <= 0:
        raise CliError("--job-timeout, --job-start-timeout and --history-minutes must be positive", exit_code=2)
    if a.console_interval < 0:
        raise CliError("--console-interval must be 0 (no console) or positive", exit_code=2)
    topics = PipelineTopics(**{role: getattr(a, f"topic_{role}") for role in _DEFAULTS.as_dict()})
    dashboard = Dashboard(
        a.bootstrap_server,
        host=a.http_host,
        port=a.http_port,
        topics=topics,
        job_timeout_s=a.job_timeout,
        job_start_timeout_s=a.job_start_timeout,
        series_minutes=a.history_minutes,
        console_interval_s=a.console_interval or None,
        consumer_config=cl.to_librdkafka(cl.load_properties(a.command_config)) if a.command_config else None,
    )
    try:
        dashboard.start()
    except OSError as e:
        dashboard.stop()
        raise CliError(str(e.strerror or e)) from None
    cl.stop_on_sigterm()
    print(f"Dashboard at {dashboard.url} (reading {a.bootstrap_server}); Ctrl-C to stop", flush=True)
    try:
        threading.Event().wait()  # until Ctrl-C or SIGTERM
    except KeyboardInterrupt:
        pass
    finally:
        dashboard.stop()
    print("Dashboard stopped", file=sys.stderr, flush=True)
    return 0
