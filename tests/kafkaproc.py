"""Apache Kafka itself, as a subprocess: the reference the differential tests and bench/vs_kafka.py
hold Samsa against.

- Kafka 4.4 in KRaft combined mode (one JVM: broker and controller, node id 1), from Maven
  Central's jars (`scripts/kafka-jars.sh tools`), formatted with `kafka-storage format
  --standalone`;
- or, given `zookeeper`, a Kafka 3.9 broker of a ZooKeeper cluster (`kafka-jars.sh kafka39`),
  the last line that runs on ZooKeeper.

Started as `kafka-server-start.sh` would (G1, 20 ms pause goal; the heap is the caller's
choice, Kafka's script gives 1 GiB). Its log goes to `<workdir>/server.log`.
"""

from __future__ import annotations

import base64
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

from tests.brokerproc import free_port

REPO = Path(__file__).resolve().parents[1]
LOG4J2 = """\
status = error
rootLogger.level = {level}
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d %p %c{{1}}: %m%n
"""
LOG4J1 = """\
log4j.rootLogger={level_upper}, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={path}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=%d %p %c{{1}}: %m%n
"""


class JarsMissing(Exception):
    pass


def kafka_classpath(jar_set: str = "tools") -> str:
    """The classpath of a jar set, fetched with Maven the first time (JarsMissing if it cannot be)."""
    out = subprocess.run(["bash", str(REPO / "scripts/kafka-jars.sh"), "--print-classpath", jar_set],
                         capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise JarsMissing((out.stderr.strip().splitlines() or ["kafka-jars.sh failed"])[-1])
    return out.stdout.strip()


class ApacheKafka:
    def __init__(self, workdir: Path, classpath: str, heap: str = "1G", overrides: dict[str, str] | None = None,
                 log_level: str = "warn", zookeeper: str | None = None, broker_id: int = 1) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.port, controller = free_port(), free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.log_path = workdir / "server.log"
        common = {"log.dirs": str(workdir / "data"), "num.partitions": "1", "offsets.topic.replication.factor": "1",
                  "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
                  "group.initial.rebalance.delay.ms": "0"}
        if zookeeper is None:
            props = {
                "process.roles": "broker,controller", "node.id": str(broker_id),
                "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller}",
                "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{controller}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT", **common}
        else:
            props = {"broker.id": str(broker_id), "zookeeper.connect": zookeeper,
                     "listeners": f"PLAINTEXT://127.0.0.1:{self.port}", **common}
        props.update(overrides or {})
        self.config = workdir / "server.properties"
        self.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (workdir / "log4j2.properties").write_text(LOG4J2.format(level=log_level, path=self.log_path))
        (workdir / "log4j.properties").write_text(LOG4J1.format(level_upper=log_level.upper(), path=self.log_path))
        self.java = ["java", f"-Xmx{heap}", f"-Xms{heap}", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                     "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                     f"-Dlog4j2.configurationFile=file:{workdir / 'log4j2.properties'}",
                     f"-Dlog4j.configuration=file:{workdir / 'log4j.properties'}", "-cp", classpath]
        self.proc: subprocess.Popen[bytes] | None = None
        if zookeeper is not None:
            return
        # (Kafka's Uuid.randomUuid never starts with '-': the tool's parser would take it for an option)
        cluster_id = "-"
        while cluster_id.startswith("-"):
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        fmt = subprocess.run(["java", "-cp", classpath, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c",
                              str(self.config), "--standalone"], capture_output=True, text=True, timeout=300)
        if fmt.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed: {fmt.stdout[-800:]}{fmt.stderr[-800:]}")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 180.0) -> ApacheKafka:
        """Start, and return once the PLAINTEXT port accepts connections."""
        out = open(self.workdir / "kafka.out", "ab")
        self.proc = subprocess.Popen([*self.java, "kafka.Kafka", str(self.config)], stdout=out,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        out.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Kafka exited with {self.proc.returncode}: see {self.workdir / 'kafka.out'}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.02)  # polling for the port: there is no event to await across processes
        self.close()
        raise TimeoutError(f"Kafka did not listen on {self.port} within {timeout} s")

    def stop(self, timeout: float = 120.0) -> None:
        """SIGTERM (Kafka's controlled shutdown), then SIGKILL if it does not end in time."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.close()

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
