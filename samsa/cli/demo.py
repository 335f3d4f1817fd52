"""`samsa demo`: the whole realtime pipeline on this machine, in one command.

    simulated sensors ─► Samsa broker ─► Spark job (samsa source) ─► parquet + topics ─► dashboard

It starts an embedded broker (a `samsa broker` process with its data under --data-dir), the
sensor simulator, the Spark Structured Streaming job and the web dashboard; prints where the
dashboard is and a status line; and on Ctrl-C, SIGTERM or after --duration stops them all in
order and exits 0. The results stay in --data-dir: `samsa pipeline query --data-dir D "SQL"`.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from samsa.cli.common import ArgumentParser, CliError, check_bootstrap
from samsa.pipeline import contract

HTTP_PORT, BROKER_PORT = 8050, 9092  # the defaults, as in README and run.sh
# How long the demo's broker keeps the readings and results (log.retention.ms): a day.
RETENTION_MS = 86_400_000
PARTITIONS = {contract.READINGS: 2, contract.DLQ: 1, contract.AGGREGATES: 2, contract.ALERTS: 1, contract.STATUS: 1,
              contract.RAW_HTTP: 1}


def say(message: str) -> None:
    print(f"==> {message}", flush=True)


def command_name() -> str:
    """How the user ran samsa (`.venv/bin/samsa` from run.sh), to print commands they can paste."""
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else "samsa"
    if os.path.basename(argv0) != "samsa" or shutil.which("samsa") == os.path.abspath(argv0):
        return "samsa"
    relative = os.path.relpath(argv0)
    return argv0 if relative.startswith("..") else relative


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could listen on host:port now. Bound with SO_REUSEADDR, as the broker and
    the dashboard bind: a connection of an earlier run lingering in TIME_WAIT (a browser was
    attached) does not make the port taken."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def choose_port(requested: int | None, default: int, what: str, flag: str) -> int:
    """The port `what` listens on. One the user asked for (`requested`) is used or refused, never
    swapped for another; the default falls back to a free port when taken, and says so."""
    if requested is not None:
        if not port_free(requested):
            raise CliError(f"the {what} cannot listen on 127.0.0.1:{requested} ({flag}): the port is in use; "
                           f"stop what listens there or pass another {flag}")
        return requested
    if port_free(default):
        return default
    port = free_port()
    say(f"port {default} (the {what}'s default) is in use: the {what} takes port {port} instead "
        f"({flag} chooses one)")
    return port


class EmbeddedBroker:
    """A `samsa broker` child process on 127.0.0.1 with its log under the data dir."""

    def __init__(self, data_dir: Path, port: int) -> None:
        self.data_dir = data_dir
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir / "broker.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def properties(self) -> dict[str, str]:
        """The broker's config: Kafka's broker keys (a topic-level key such as retention.ms
        would be logged as unknown and ignored)."""
        return {"broker.id": "0", "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                "log.dirs": str(self.data_dir / "broker-data"), "num.partitions": "2",
                "offsets.topic.num.partitions": "4", "auto.create.topics.enable": "true",
                "log.retention.ms": str(RETENTION_MS)}

    def start(self, timeout: float = 30.0) -> None:
        config = self.data_dir / "broker.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "samsa", "broker", "start", str(config)],
                                     stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise CliError(f"the broker exited with code {self.proc.returncode}: {self.last_error()} "
                               f"(its log: {self.log_path})")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        raise CliError(f"the broker did not listen on {self.bootstrap} within {timeout:.0f} s; see {self.log_path}")

    def last_error(self) -> str:
        """The broker's own one-line error (`samsa broker: error: ...`), else its last log line."""
        try:
            lines = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "no log"
        errors = [line.removeprefix("samsa broker: error: ") for line in lines if line.startswith("samsa broker:")]
        return errors[-1] if errors else (lines[-1] if lines else "no log")

    def stop(self, timeout: float = 30.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def create_topics(bootstrap: str, client: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({**(client or {}), "bootstrap.servers": bootstrap, "log_level": 3})
    futures = admin.create_topics([NewTopic(t, n, 1) for t, n in PARTITIONS.items()], operation_timeout=10)
    for topic, fut in futures.items():
        try:
            fut.result(15)
        except Exception as e:
            if "already exists" not in str(e).lower():
                raise CliError(f"cannot create topic {topic}: {e}") from None


def run(argv: list[str]) -> int:
    ap = ArgumentParser(prog="samsa demo", description=__doc__.split("\n\n")[0],
                        epilog="Results stay in --data-dir; query them with `samsa pipeline query`.")
    ap.add_argument("--duration", type=float, default=None, help="stop after this many seconds (default: Ctrl-C)")
    ap.add_argument("--data-dir", default="samsa-demo",
                    help="broker data, parquet and checkpoints (default: ./samsa-demo)")
    ap.add_argument("--http-port", type=int, default=None,
                    help=f"the dashboard's port; if taken, the demo stops (default: {HTTP_PORT}, or a free port if "
                         "that one is taken)")
    ap.add_argument("--rate", type=float, default=2000, help="simulated sensor readings per second (default: 2000)")
    ap.add_argument("--sensors", type=int, default=50, help="simulated sensors (default: 50)")
    ap.add_argument("--broker-port", type=int, default=None,
                    help=f"the embedded broker's port; if taken, the demo stops (default: {BROKER_PORT}, or a free "
                         "port if that one is taken)")
    ap.add_argument("--trigger", default="2 seconds", help="Spark micro-batch interval (default: 2 seconds)")
    ap.add_argument("--bootstrap-server", metavar="SERVER",
                    help="run against this cluster instead of starting a broker (its topics are created if missing)")
    ap.add_argument("--command-config", metavar="FILE",
                    help="Kafka client properties for a secured cluster: security.protocol, sasl.*, ssl.*")
    ap.add_argument("--connector", default="samsa", choices=("samsa", "kafka"),
                    help="how Spark reads the readings: samsa, Samsa's jar-less data source (default), or kafka, "
                         "Spark's own Kafka connector (`bash scripts/kafka-jars.sh spark-kafka` fetches its jars)")
    ap.add_argument("--connector-jars", metavar="PATH", default=None,
                    help="with --connector kafka: a directory of the connector's jars or a comma-separated list of "
                         "jar files (default: $SAMSA_SPARK_KAFKA_JARS, else build/jars/spark-kafka)")
    args = ap.parse_args(argv)
    if args.bootstrap_server:
        check_bootstrap(args.bootstrap_server)
    from samsa.pipeline.job import ConnectorJarsMissing, JobConfig, client_properties, session_jars

    try:
        args.client_props = client_properties(args.command_config)
    except ValueError as e:
        raise CliError(f"--command-config: {e}") from None
    if args.client_props and not args.bootstrap_server:
        raise CliError("--command-config is for an existing cluster: give its --bootstrap-server too")
    if args.rate <= 0 or args.sensors <= 0:
        raise CliError("--rate and --sensors must be positive")
    if args.duration is not None and args.duration <= 0:
        raise CliError("--duration must be positive")
    for flag, port in (("--http-port", args.http_port), ("--broker-port", args.broker_port)):
        if port is not None and not 0 < port < 65536:
            raise CliError(f"{flag} must be between 1 and 65535, got {port}", exit_code=2)
    if args.bootstrap_server and args.broker_port is not None:
        raise CliError("--broker-port is for the demo's own broker: leave it out with --bootstrap-server", exit_code=2)
    # Ports before anything starts: one asked for is used or refused, a default may move (and says so).
    args.http_port = choose_port(args.http_port, HTTP_PORT, "dashboard", "--http-port")
    if not args.bootstrap_server:
        args.broker_port = choose_port(args.broker_port, BROKER_PORT, "broker", "--broker-port")
    try:  # before anything starts: a missing connector is one line, not a half-started demo
        args.jars = session_jars(JobConfig(connector=args.connector, connector_jars=args.connector_jars))
    except ConnectorJarsMissing as e:
        raise CliError(str(e)) from None
    data = Path(args.data_dir).resolve()
    data.mkdir(parents=True, exist_ok=True)
    return Demo(args, data).run()


class Demo:
    def __init__(self, args: Any, data: Path) -> None:
        self.args = args
        self.data = data
        self.stop_event = threading.Event()
        self.parts: list[tuple[str, Any]] = []  # (name, stop callable), stopped in reverse order

    def run(self) -> int:
        signal.signal(signal.SIGTERM, lambda *_: self.stop_event.set())
        try:
            self._start()
            self._watch()
        except KeyboardInterrupt:
            pass
        finally:
            print(flush=True)
            self._stop_all()
        say(f"stopped; results kept in {self.data}")
        print(f"    try: {command_name()} pipeline query --data-dir {self.data} "
              "\"SELECT city, max(aqi) AS worst_aqi FROM windows WHERE kind = 'city_1m' "
              "GROUP BY city ORDER BY 2 DESC\"")
        return 0

    def _start(self) -> None:
        from samsa.protocol.client_security import librdkafka_config

        props: dict[str, str] = self.args.client_props
        client = librdkafka_config(props)
        if self.args.bootstrap_server:
            self.bootstrap = self.args.bootstrap_server
            say(f"using the cluster at {self.bootstrap}" + (f" ({props['security.protocol']})"
                                                             if "security.protocol" in props else ""))
        else:
            broker = EmbeddedBroker(self.data, self.args.broker_port)
            say(f"starting the Samsa broker on {broker.bootstrap} (log: {broker.log_path})")
            broker.start()
            self.parts.append(("broker", broker.stop))
            self.bootstrap = broker.bootstrap
        create_topics(self.bootstrap, client)

        from samsa.pipeline.dashboard import Dashboard

        # The job starts now and the demo watches it (it stops if the job fails): "starting" until
        # its first status record, however long Spark takes; older records are an earlier run's.
        dashboard = Dashboard(self.bootstrap, host="127.0.0.1", port=self.args.http_port, consumer_config=client,
                              job_started_ms=time.time_ns() // 1_000_000, job_start_timeout_s=None)
        try:
            dashboard.start()
        except OSError as e:  # taken since choose_port() looked
            raise CliError(f"{e.strerror or e}: pass another --http-port") from None
        self.dashboard = dashboard
        self.parts.append(("dashboard", dashboard.stop))
        say(f"dashboard: {dashboard.url}")

        spark_log = self.data / "spark.log"
        say(f"starting Spark (local[2]) and the pipeline job ({self.args.connector} connector; "
            f"Spark's log: {spark_log})")
        from samsa.pipeline.job import JobConfig, PipelineJob, spark_session

        self.spark = spark_session(None, app="samsa-demo", log_file=spark_log, jars=self.args.jars)
        self.parts.append(("spark", self.spark.stop))
        # a micro-batch holds at most ~5 s of readings, so a slow start never makes one huge batch
        cap = max(10_000, int(self.args.rate * 5))
        self.job = PipelineJob(self.spark, JobConfig(bootstrap=self.bootstrap, data_dir=self.data,
                                                     trigger=self.args.trigger, max_offsets_per_trigger=cap,
                                                     client_props=props, connector=self.args.connector,
                                                     connector_jars=self.args.connector_jars)).start()
        self.parts.append(("pipeline job", self.job.stop))

        from samsa.pipeline.ingest.producer import IngestProducer
        from samsa.pipeline.ingest.simulate import Simulator

        self.simulator = Simulator(self.bootstrap, topic=contract.READINGS, rate=self.args.rate,
                                   sensors=self.args.sensors, producer=IngestProducer(self.bootstrap, client))
        sim_stop = threading.Event()
        sim_done = threading.Event()

        def simulate() -> None:
            try:
                self.simulator.run(sim_stop)
            finally:
                sim_done.set()

        threading.Thread(target=simulate, name="simulator", daemon=True).start()
        def stop_simulator() -> None:
            sim_stop.set()
            sim_done.wait(30)

        self.parts.append(("simulator", stop_simulator))
        say(f"simulating {self.args.sensors} sensors at {self.args.rate:,.0f} readings/s into {contract.READINGS}")
        say(f"running: open {self.dashboard.url} (the first windows appear within a few triggers) "
            "— Ctrl-C stops everything")

    def _watch(self) -> None:
        deadline = None if self.args.duration is None else time.monotonic() + self.args.duration
        last_sent, last_t = int(self.simulator.stats()["acked"]), time.monotonic()
        while not self.stop_event.wait(2.0):
            problem = self.job.failed()
            if problem:
                raise CliError(problem)
            now = time.monotonic()
            stats = self.simulator.stats()
            sent = int(stats["acked"])
            rate = (sent - last_sent) / (now - last_t)
            last_sent, last_t = sent, now
            snap = self.dashboard.snapshot()  # what the dashboard shows, computed once
            behind = snap["health"]["lag"]
            lag = f"{behind:,}" if behind is not None else "starting" if snap["job"]["state"] == "starting" else "—"
            print(f"\ringest {rate:8,.0f} ev/s | job lag {lag:>9} | windows {self.job.writer.windows_written:,} | "
                  f"alerts {self.job.writer.alerts_sent:,} | {self.dashboard.url}  ", end="", flush=True)
            if deadline is not None and now >= deadline:
                break

    def _stop_all(self) -> None:
        for name, stop in reversed(self.parts):
            try:
                stop()
            except Exception as e:  # keep stopping the rest
                print(f"stopping the {name}: {e}", file=sys.stderr)
        self.parts.clear()
