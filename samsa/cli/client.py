"""Client plumbing shared by the Kafka-style tools (topics, configs, console producer/consumer, perf).

The tools run on confluent-kafka (librdkafka). This module keeps librdkafka quiet and turns its
failures into one-line `CliError`s:

* librdkafka's own log lines go to a silent `logging.Logger`; connection problems are collected
  by an `error_cb` (`ClientErrors`) and reported once, in a sentence, by `wait_for_cluster`.
* Java client property files (`--command-config`, `--producer.config`, ...) are read with
  `load_properties`; `to_librdkafka` maps the Java-only names our users will have in them.
* `result` waits on an admin future and converts `KafkaException` into `CliError`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import signal
import socket
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any, Protocol, TypeVar

from confluent_kafka import KafkaError, KafkaException

from samsa.cli.common import CliError, check_bootstrap, stdout_closed
from samsa.protocol.client_security import SECURITY_KEYS as _SECURITY_KEYS

# How long a tool waits for the cluster (first metadata, admin calls) before giving up.
DEFAULT_TIMEOUT_S = 10.0
# After librdkafka reports every bootstrap broker down, retry this long before failing fast.
_ALL_DOWN_GRACE_S = 1.0

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})

_QUIET_LOGGER = logging.getLogger("samsa.cli.librdkafka")
_QUIET_LOGGER.addHandler(logging.NullHandler())
_QUIET_LOGGER.propagate = False

# Java client settings that librdkafka spells differently; value converters where units differ.
_RENAMED: dict[str, tuple[str, Any]] = {
    "send.buffer.bytes": ("socket.send.buffer.bytes", str),
    "receive.buffer.bytes": ("socket.receive.buffer.bytes", str),
    "fetch.max.wait.ms": ("fetch.wait.max.ms", str),
    "buffer.memory": ("queue.buffering.max.kbytes", lambda v: str(max(1, int(v) // 1024))),
}
# Java client settings with no librdkafka counterpart (serializers are always bytes here).
_IGNORED = frozenset(
    {
        "key.serializer",
        "value.serializer",
        "key.deserializer",
        "value.deserializer",
        "max.block.ms",
        "default.api.timeout.ms",
        "interceptor.classes",
        "partitioner.class",
        "metric.reporters",
        "exclude.internal.topics",
        "allow.auto.create.topics",
    }
)

T = TypeVar("T")


def load_properties(path: str) -> dict[str, str]:
    """Read a Java `.properties` file (`k=v`, `k: v` or `k v`; `#`/`!` comments; `\\` continuation)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise CliError(f"cannot read properties file {path}: {e.strerror or e}") from None
    props: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        # An odd number of trailing backslashes continues the line.
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            logical += line[:-1]
            continue
        logical += line
        key, value = _split_property(logical)
        props[key] = value
        logical = ""
    if logical:
        key, value = _split_property(logical)
        props[key] = value
    return props


def _split_property(line: str) -> tuple[str, str]:
    i, n = 0, len(line)
    while i < n and line[i] not in "=: \t\f":
        i += 2 if line[i] == "\\" else 1
    key, rest = line[:i], line[i:]
    rest = rest.lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key), _unescape(rest)


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            nxt = s[i + 1]
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", s[i + 2 : i + 6]):
                out.append(chr(int(s[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def jaas_login(props: dict[str, str]) -> tuple[str, str] | None:
    """(username, password) from sasl.jaas.config or sasl.username/sasl.password (None: unset)."""
    from samsa.protocol.client_security import jaas_login as login

    try:
        return login(props)
    except ValueError as e:
        raise CliError(str(e)) from None


def _security_to_librdkafka(props: dict[str, str], out: dict[str, str]) -> None:
    from samsa.protocol.client_security import librdkafka_security

    try:
        out.update(librdkafka_security(props))
    except ValueError as e:
        raise CliError(str(e)) from None


def to_librdkafka(props: dict[str, str]) -> dict[str, str]:
    """Translate Java client property names to librdkafka's, dropping ones it has no use for."""
    out: dict[str, str] = {}
    _security_to_librdkafka(props, out)
    for key, value in props.items():
        if key in _IGNORED or key in _SECURITY_KEYS:
            continue
        if key in _RENAMED:
            name, convert = _RENAMED[key]
            try:
                out[name] = convert(value)
            except ValueError:
                raise CliError(f"invalid value for {key}: {value!r}") from None
            continue
        out[key] = value
    return out


class ClientErrors:
    """`error_cb` (and log sink) for a client: remembers why brokers could not be reached."""

    _count = 0

    def __init__(self) -> None:
        self.transport: str | None = None
        self.all_down_since: float | None = None
        self.fatal: KafkaError | None = None
        # How long to wait for the cluster: Kafka's default.api.timeout.ms when given, else 10 s.
        self.timeout = DEFAULT_TIMEOUT_S
        # librdkafka logs a broker's disconnects ("FAIL") without raising an error event when the
        # connection was up; a dedicated silent logger lets us quote them.
        ClientErrors._count += 1
        self.logger = logging.getLogger(f"{_QUIET_LOGGER.name}.{ClientErrors._count}")
        self.logger.propagate = False
        self.logger.setLevel(logging.DEBUG)
        self.logger.addHandler(_FailLogHandler(self))

    def __call__(self, err: KafkaError) -> None:
        code = err.code()
        if code in (KafkaError._TRANSPORT, KafkaError._RESOLVE, KafkaError._SSL, KafkaError._AUTHENTICATION):
            self.transport = _strip_broker_prefix(err.str())
        elif code == KafkaError._ALL_BROKERS_DOWN and self.all_down_since is None:
            self.all_down_since = time.monotonic()
        if err.fatal():
            self.fatal = err

    def broker_up(self) -> None:
        self.all_down_since = None


class _FailLogHandler(logging.Handler):
    def __init__(self, sink: ClientErrors) -> None:
        super().__init__()
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args
        # confluent-kafka logs as logger.log(level, "%s [%s] %s", facility, client name, message)
        if isinstance(args, tuple) and len(args) == 3 and args[0] == "FAIL":
            self.sink.transport = _strip_broker_prefix(str(args[2]))


def _strip_broker_prefix(message: str) -> str:
    # "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused (after 0ms ...)"
    message = re.sub(r"^\[thrd:[^\]]*\]: ", "", message)
    message = re.sub(r"^\S+/(?:bootstrap|\d+): ", "", message)
    return re.sub(r" \(after \d+ms in state \w+.*\)$", "", message)


def client_config(bootstrap: str | None, props: dict[str, str], errors: ClientErrors) -> dict[str, Any]:
    """librdkafka configuration: user properties, the bootstrap server, quiet logging, error capture."""
    conf: dict[str, Any] = dict(to_librdkafka(props))
    if "default.api.timeout.ms" in props:
        try:
            errors.timeout = int(props["default.api.timeout.ms"]) / 1000.0
        except ValueError:
            raise CliError(f"invalid value for default.api.timeout.ms: {props['default.api.timeout.ms']!r}") from None
    if bootstrap:
        conf["bootstrap.servers"] = bootstrap
    if not conf.get("bootstrap.servers"):
        raise CliError("no bootstrap server given (use --bootstrap-server)", exit_code=2)
    check_bootstrap(str(conf["bootstrap.servers"]))
    conf["error_cb"] = errors
    conf["logger"] = errors.logger
    return conf


def make_client(kind: Callable[[dict[str, Any]], T], conf: dict[str, Any]) -> T:
    """Construct a Producer/Consumer/AdminClient; bad configuration becomes a CliError."""
    try:
        return kind(conf)
    except (KafkaException, ValueError, TypeError) as e:
        raise CliError(f"invalid client configuration: {_exception_text(e)}") from None


class _MetadataSource(Protocol):
    def list_topics(self, topic: str | None = ..., timeout: float = ...) -> Any: ...

    def poll(self, timeout: float = ...) -> Any: ...


def wait_for_cluster(
    client: _MetadataSource,
    errors: ClientErrors,
    bootstrap: str,
    timeout: float | None = None,
    topic: str | None = None,
) -> Any:
    """Fetch cluster metadata, failing with one sentence if no broker answers within `timeout`
    (default: the client's `errors.timeout`)."""
    if timeout is None:
        timeout = errors.timeout
    deadline = time.monotonic() + timeout
    last: KafkaError | None = None
    while True:
        remaining = deadline - time.monotonic()
        try:
            md = client.list_topics(topic, timeout=max(0.05, min(0.5, remaining)))
            errors.broker_up()
            return md
        except KafkaException as e:
            last = e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None
        _serve_callbacks(client)
        if errors.fatal is not None:
            raise CliError(f"client error: {errors.fatal.str()}")
        now = time.monotonic()
        if errors.all_down_since is not None and now - errors.all_down_since >= _ALL_DOWN_GRACE_S:
            raise CliError(f"cannot connect to {bootstrap}: {errors.transport or 'all brokers are down'}")
        if now >= deadline:
            why = errors.transport or (last.str() if last is not None else "no response")
            raise CliError(f"timed out after {timeout:g} s waiting for {bootstrap} ({why})")


def _serve_callbacks(client: _MetadataSource) -> None:
    with contextlib.suppress(RuntimeError, KafkaException):
        client.poll(0)


def result(fut: Future[T], timeout: float = DEFAULT_TIMEOUT_S, what: str = "request") -> T:
    """Wait for an admin future; broker/client errors become CliError with the broker's message."""
    try:
        return fut.result(timeout=timeout + 2.0)
    except FutureTimeout:
        raise CliError(f"timed out after {timeout:g} s waiting for the {what}") from None
    except KafkaException as e:
        raise CliError(_exception_text(e)) from None


def kafka_error(e: BaseException) -> KafkaError | None:
    """The KafkaError inside a KafkaException, if any."""
    if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError):
        return e.args[0]
    return None


def error_message(err: KafkaError) -> str:
    """A KafkaError as text: the broker's own message when it sent one, else librdkafka's."""
    text = err.str()
    if err.code() == KafkaError._TIMED_OUT:
        return "timed out waiting for the broker"
    return text.removeprefix("Broker: ") if text.startswith("Broker: ") and not err.name().startswith("_") else text


def _exception_text(e: BaseException) -> str:
    err = kafka_error(e)
    if err is not None:
        return error_message(err)
    return str(e) or type(e).__name__


def one_line_errors(run: Callable[[list[str]], int]) -> Callable[[list[str]], int]:
    """Decorate a tool's `run`: any unexpected failure is reported as one line, not a traceback
    (set SAMSA_DEBUG=1 to see the traceback). A write to a closed stdout is not a failure: it goes
    up to `samsa.cli.main`, which ends the tool quietly."""

    @functools.wraps(run)
    def wrapper(argv: list[str]) -> int:
        try:
            return run(argv)
        except (CliError, SystemExit, KeyboardInterrupt):
            raise
        except BrokenPipeError:
            if stdout_closed():  # `samsa TOOL | head -1`: samsa.cli.main ends the tool quietly
                raise
            raise CliError("unexpected BrokenPipeError: a connection closed while writing to it "
                           "(set SAMSA_DEBUG=1 for details)") from None
        except KafkaException as e:
            raise CliError(_exception_text(e)) from None
        except Exception as e:  # noqa: BLE001 - the point is to never show a traceback
            if os.environ.get("SAMSA_DEBUG"):
                raise
            raise CliError(f"unexpected {type(e).__name__}: {e} (set SAMSA_DEBUG=1 for details)") from None

    return wrapper


def source_id(source: Any) -> int:
    """A config entry's source as Kafka's wire id: confluent-kafka hands over plain ints, not
    `ConfigSource` members."""
    return int(source.value) if hasattr(source, "value") else int(source)


def _exchange(sock: socket.socket, api_key: int, version: int, body: dict[str, Any], correlation_id: int) -> Any:
    from samsa.protocol.framing import FrameSplitter
    from samsa.protocol.messages import decode_response, encode_request

    sock.sendall(bytes(encode_request(api_key, version, correlation_id, "samsa-cli", body)))
    frames = FrameSplitter()
    while (frame := frames.next_frame()) is None:
        n = sock.recv_into(frames.buffer())
        if not n:
            raise ConnectionError("connection closed by the broker")
        frames.advance(n)
    _, msg = decode_response(api_key, version, frame)
    return msg


def raw_request(host: str, port: int, api_key: int, version: int, body: dict[str, Any], timeout: float,
                props: dict[str, str] | None = None) -> Any:
    """One request/response over a fresh connection, with Samsa's own codec: for the few things
    librdkafka cannot express (the empty broker-defaults config resource, client quotas).
    `props` are the tool's client properties: security.protocol SSL / SASL_PLAINTEXT / SASL_SSL
    with their ssl.* and sasl.* settings (Java's or librdkafka's names)."""
    from samsa.protocol.client_security import ClientSecurity
    from samsa.protocol.scram import SaslClientError

    try:
        security = ClientSecurity.from_properties(props or {})
    except ValueError as e:
        raise CliError(str(e)) from None
    try:
        with socket.create_connection((host, port), timeout=timeout) as plain:
            sock = security.tls_context().wrap_socket(plain, server_hostname=host) if security.tls else plain
            try:
                if security.sasl:
                    n = iter(range(1, 1000))
                    security.login(lambda k, v, b: _exchange(sock, k, v, b, next(n)))
                return _exchange(sock, api_key, version, body, 0)
            finally:
                if sock is not plain:
                    sock.close()
    except SaslClientError as e:
        raise CliError(str(e)) from None
    except (OSError, ValueError) as e:
        raise CliError(f"request to {host}:{port} failed: {e}") from None


class Stopped(KeyboardInterrupt):
    """SIGTERM, delivered like Ctrl-C so the tools wind down the same way (exit code 128 + 15)."""

    exit_code = 143


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Stopped()


def stop_on_sigterm() -> None:
    """Make SIGTERM raise `Stopped` (a KeyboardInterrupt), as Kafka's shutdown hooks run on it."""
    signal.signal(signal.SIGTERM, _on_sigterm)


def interrupted_exit_code(e: KeyboardInterrupt) -> int:
    return int(getattr(e, "exit_code", 130))


def topic_matcher(pattern: str) -> re.Pattern[str]:
    """Kafka's IncludeList: commas mean alternation, spaces and surrounding quotes are ignored."""
    regex = pattern.strip().replace(",", "|").replace(" ", "")
    regex = re.sub(r"^[\"']+", "", regex)
    regex = re.sub(r"[\"']+$", "", regex)
    try:
        return re.compile(regex)
    except re.error as e:
        raise CliError(f"invalid topic regular expression {pattern!r}: {e}", exit_code=2) from None
