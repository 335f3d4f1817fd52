"""`Dashboard`: the reader thread and the HTTP server together, for `samsa dashboard` and for
programs (the demo, tests) that embed it.

    with Dashboard("127.0.0.1:9092", port=0) as dash:   # start() on enter, stop() on exit
        print(dash.url)
        dash.wait_until(lambda snap: snap["cities"], timeout=30)
        dash.wait_console(lambda view: view["state"] == "ok", timeout=30)   # the broker console
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from samsa.pipeline.dashboard import console
from samsa.pipeline.dashboard.console_poller import ConsolePoller
from samsa.pipeline.dashboard.live import LiveState, Published
from samsa.pipeline.dashboard.reader import PipelineReader
from samsa.pipeline.dashboard.state import PipelineState, PipelineTopics
from samsa.pipeline.dashboard.web import DashboardServer


class Dashboard:
    def __init__(
        self,
        bootstrap: str,
        host: str = "127.0.0.1",
        port: int = 8050,
        topics: PipelineTopics | Mapping[str, str] | None = None,
        *,
        job_timeout_s: float = 30.0,
        job_start_timeout_s: float | None = 120.0,
        job_started_ms: int | None = None,
        series_minutes: float = 60.0,
        tick_s: float = 1.0,
        min_event_interval_s: float = 1.0,
        keepalive_s: float = 15.0,
        consumer_config: dict[str, Any] | None = None,
        console_interval_s: float | None = 3.0,
        console_request_timeout_s: float = 5.0,
    ) -> None:
        """`topics`: the topic of each role (fields of `PipelineTopics`; missing ones keep the
        contract's names). `job_timeout_s`: the Spark job counts as running while its last
        pipeline_status is younger than this. Until its first one it counts as starting, for
        `job_start_timeout_s` (None: as long as it takes) from `job_started_ms` if the caller has
        just started the job (the demo: older status records are then an earlier run's), else
        from now. `series_minutes`: how much of the city_1m history
        the chart keeps. `console_interval_s`: how often the broker console polls the cluster
        while someone watches it (None: no console). `consumer_config`: extra librdkafka settings
        (security) for the reader's consumers and the console's admin client."""
        if topics is None or isinstance(topics, PipelineTopics):
            self.topics = topics or PipelineTopics()
        else:
            self.topics = PipelineTopics(**dict(topics))
        self.bootstrap = bootstrap
        self.host = host
        self.port = port
        self._min_event_interval_s = min_event_interval_s
        self._keepalive_s = keepalive_s
        self.live = LiveState(PipelineState(self.topics, job_timeout_s=job_timeout_s,
                                            job_start_timeout_s=job_start_timeout_s, job_started_ms=job_started_ms,
                                            series_minutes=series_minutes))
        self._reader = PipelineReader(
            bootstrap,
            self.topics,
            self.live,
            history_minutes=series_minutes + 5,
            tick_s=tick_s,
            consumer_config=consumer_config,
        )
        self.console: ConsolePoller | None = None
        if console_interval_s is not None:
            self.console = ConsolePoller(bootstrap, Published(console.starting_view(console_interval_s)),
                                         interval_s=console_interval_s,
                                         request_timeout_s=console_request_timeout_s,
                                         client_config=consumer_config)
        self._server: DashboardServer | None = None
        self._serving: threading.Thread | None = None
        self._stopped = False

    def start(self) -> Dashboard:
        """Listen, start reading; returns once listening. An OSError whose `strerror` names the
        address if it cannot listen (the port is taken, say)."""
        if self._server is not None or self._stopped:
            raise RuntimeError("a Dashboard starts once")
        try:
            server = DashboardServer(
                (self.host, self.port),
                self.live,
                min_interval_s=self._min_event_interval_s,
                keepalive_s=self._keepalive_s,
                console=self.console,
            )
        except OSError as e:
            where = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
            raise OSError(e.errno, f"the dashboard cannot listen on {where}: {e.strerror or e}") from None
        self._server = server
        self.port = int(server.server_address[1])
        self._serving = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="dashboard-http", daemon=True
        )
        self._serving.start()
        self._reader.start()
        if self.console is not None:
            self.console.start()
        return self

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def snapshot(self) -> dict[str, Any]:
        """The state as served at /api/state."""
        return self.live.snapshot()

    def wait_until(self, predicate: Callable[[dict[str, Any]], bool], timeout: float) -> dict[str, Any]:
        """The first snapshot satisfying `predicate` (TimeoutError after `timeout` s)."""
        return self.live.wait_until(predicate, timeout)

    def console_view(self) -> dict[str, Any]:
        """The broker console's view as served at /api/console (as last published)."""
        if self.console is None:
            raise RuntimeError("this dashboard has no console (console_interval_s=None)")
        return self.console.published.snapshot()

    def wait_console(self, predicate: Callable[[dict[str, Any]], bool], timeout: float) -> dict[str, Any]:
        """The first console view satisfying `predicate`; the console polls meanwhile."""
        if self.console is None:
            raise RuntimeError("this dashboard has no console (console_interval_s=None)")
        return self.console.published.wait_until(predicate, timeout)

    def stop(self) -> None:
        """Stop serving and reading; every thread is joined when this returns."""
        if self._stopped:
            return
        self._stopped = True
        server = self._server
        if server is not None:
            server.stopping.set()
        self.live.close()
        if self.console is not None:
            self.console.published.close()
        if server is not None and self._serving is not None:
            server.shutdown()
            self._serving.join()
            server.server_close()  # joins the handler threads
        self._reader.stop()
        if self.console is not None:
            self.console.stop()

    def __enter__(self) -> Dashboard:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
