"""SASL/PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 with real clients: librdkafka (confluent-kafka),
kafka-python, aiokafka, kafkajs and kcat each log in with each mechanism on a SASL_PLAINTEXT and
a SASL_SSL listener (a certificate made by the test), produce and read back, and are refused
with a wrong password and as an unknown user. (PLAIN's users are the listeners' JAAS entries.)

One broker for the module (embedded store): a PLAINTEXT listener for administration beside
the two SASL ones; alice is made through AlterUserScramCredentials by confluent-kafka's admin
client, which salts the password itself."""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as ATopicPartition
from aiokafka.helpers import create_ssl_context
from confluent_kafka import KafkaError, Producer
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition
from kafka.net.selector import NetworkSelector

from tests.broker.test_sasl import consume, produce
from tests.broker.test_scram import (
    KAFKA_MESSAGE,
    MECHANISMS,
    PROTOCOLS,
    ScramBroker,
    scram_broker_process,
    upsert,
    wait_login,
)
from tests.compat.test_kafkajs import run_kafkajs
from tests.pki import make_pki

N = 20
ALL_MECHANISMS = [*MECHANISMS, "PLAIN"]


@pytest.fixture(scope="module")
def scram(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScramBroker]:
    pki = make_pki(tmp_path_factory.mktemp("pki"))
    b, ports = scram_broker_process(tmp_path_factory.mktemp("scram"), pki)
    plain = ('org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";')
    with open(b.config_path, "a") as f:  # (a later line wins in a properties file)
        f.write(f"sasl.enabled.mechanisms={','.join(ALL_MECHANISMS)}\n"
                + "".join(f"listener.name.{p.lower()}.plain.sasl.jaas.config={plain}\n" for p in PROTOCOLS))
    b.start()
    try:
        upsert(b.bootstrap, "alice", "alice-secret", {"SCRAM-SHA-256": 8192, "SCRAM-SHA-512": 4096})
        for m in MECHANISMS:
            wait_login(f"127.0.0.1:{ports['SASL_PLAINTEXT']}", m, "alice", "alice-secret")
        yield ScramBroker(b, ports, pki)
        text = b.log_text()
        assert "Traceback" not in text
        assert "alice-secret" not in text and "wrong-secret" not in text  # no password in the log
    finally:
        b.close()


# -- each client: a round trip, and a refusal ------------------------------------------------------

def rd_conf(s: ScramBroker, protocol: str, mechanism: str, user: str, password: str) -> dict[str, Any]:
    conf = {"bootstrap.servers": s.bootstrap(protocol), "security.protocol": protocol, "sasl.mechanisms": mechanism,
            "sasl.username": user, "sasl.password": password}
    return {**conf, "ssl.ca.location": str(s.pki.ca)} if protocol == "SASL_SSL" else conf


def confluent_roundtrip(s: ScramBroker, protocol: str, mechanism: str, topic: str) -> list[bytes]:
    conf = rd_conf(s, protocol, mechanism, "alice", "alice-secret")
    assert produce(conf, topic, [b"v%d" % i for i in range(N)]) == []
    return consume(conf, topic, N)


def confluent_refused(s: ScramBroker, protocol: str, mechanism: str, user: str, password: str) -> str:
    errors: list[KafkaError] = []
    p = Producer({**rd_conf(s, protocol, mechanism, user, password), "error_cb": errors.append})
    deadline = time.monotonic() + 20
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) and time.monotonic() < deadline:
        p.poll(0.1)
    return " ".join(e.str() for e in errors if e.code() == KafkaError._AUTHENTICATION)


def kp_conf(s: ScramBroker, protocol: str, mechanism: str, user: str, password: str) -> dict[str, Any]:
    conf = {"bootstrap_servers": s.bootstrap(protocol), "security_protocol": protocol, "sasl_mechanism": mechanism,
            "sasl_plain_username": user, "sasl_plain_password": password}
    return {**conf, "ssl_cafile": str(s.pki.ca), "ssl_check_hostname": True} if protocol == "SASL_SSL" else conf


def kafka_python_roundtrip(s: ScramBroker, protocol: str, mechanism: str, topic: str) -> list[bytes]:
    conf = kp_conf(s, protocol, mechanism, "alice", "alice-secret")
    p = KafkaProducer(**conf)
    try:
        for i in range(N):
            p.send(topic, b"v%d" % i, partition=0).get(20)
    finally:
        p.close()
    k = KafkaConsumer(**conf, group_id=None, enable_auto_commit=False)
    got: list[bytes] = []
    try:
        tp = KTopicPartition(topic, 0)
        k.assign([tp])
        k.seek(tp, 0)
        deadline = time.monotonic() + 30
        while len(got) < N and time.monotonic() < deadline:
            got += [m.value for m in k.poll(timeout_ms=500).get(tp, [])]
    finally:
        k.close()
    return got


def kafka_python_refused(s: ScramBroker, protocol: str, mechanism: str, user: str, password: str) -> str:
    """kafka-python 3.0 reads the broker's SASL_AUTHENTICATION_FAILED answer and the close that
    follows it in one go and reports only the disconnection (its _sock_recv drops data read
    before an EOF), so its refusal is a bootstrap that never completes. A producer whose
    constructor failed so leaves its I/O loop open: closed here, or its sockets' ResourceWarnings
    fail some later test."""
    try:
        KafkaProducer(**kp_conf(s, protocol, mechanism, user, password), bootstrap_timeout_ms=3000).close()
        return ""
    except Exception as e:  # noqa: BLE001 - the refusal we are looking for
        return f"{type(e).__name__}: {e}"
    finally:
        for loop in [o for o in gc.get_objects() if isinstance(o, NetworkSelector)]:
            loop.close()


def aio_conf(s: ScramBroker, protocol: str, mechanism: str, user: str, password: str) -> dict[str, Any]:
    conf = {"bootstrap_servers": s.bootstrap(protocol), "security_protocol": protocol, "sasl_mechanism": mechanism,
            "sasl_plain_username": user, "sasl_plain_password": password}
    return {**conf, "ssl_context": create_ssl_context(cafile=str(s.pki.ca))} if protocol == "SASL_SSL" else conf


def aiokafka_roundtrip(s: ScramBroker, protocol: str, mechanism: str, topic: str) -> list[bytes]:
    conf = aio_conf(s, protocol, mechanism, "alice", "alice-secret")

    async def run() -> list[bytes]:
        p = AIOKafkaProducer(**conf)
        await p.start()
        try:
            for i in range(N):
                await p.send_and_wait(topic, b"v%d" % i, partition=0)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(**conf, enable_auto_commit=False)
        await c.start()
        got: list[bytes] = []
        try:
            tp = ATopicPartition(topic, 0)
            c.assign([tp])
            c.seek(tp, 0)
            while len(got) < N:
                batch = await asyncio.wait_for(c.getmany(tp, timeout_ms=500), 30)
                got += [m.value for m in batch.get(tp, [])]
        finally:
            await c.stop()
        return got

    return asyncio.run(run())


def aiokafka_refused(s: ScramBroker, protocol: str, mechanism: str, user: str, password: str) -> str:
    async def run() -> str:
        p = AIOKafkaProducer(**aio_conf(s, protocol, mechanism, user, password), request_timeout_ms=10000)
        try:
            await p.start()
        except Exception as e:  # noqa: BLE001 - the refusal we are looking for
            return f"{type(e).__name__}: {e}"
        finally:
            await p.stop()
        return ""

    return asyncio.run(run())


def kcat_args(s: ScramBroker, protocol: str, mechanism: str, user: str, password: str) -> list[str]:
    args = ["kcat", "-b", s.bootstrap(protocol), "-X", f"security.protocol={protocol}", "-X",
            f"sasl.mechanisms={mechanism}", "-X", f"sasl.username={user}", "-X", f"sasl.password={password}"]
    return args + ["-X", f"ssl.ca.location={s.pki.ca}"] if protocol == "SASL_SSL" else args


def kcat_roundtrip(s: ScramBroker, protocol: str, mechanism: str, topic: str) -> list[bytes]:
    args = kcat_args(s, protocol, mechanism, "alice", "alice-secret")
    r = subprocess.run([*args, "-P", "-t", topic, "-p", "0"], input="".join(f"v{i}\n" for i in range(N)),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([*args, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-c", str(N), "-e"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [v.encode() for v in r.stdout.split()]


def kcat_refused(s: ScramBroker, protocol: str, mechanism: str, user: str, password: str) -> str:
    r = subprocess.run([*kcat_args(s, protocol, mechanism, user, password), "-P", "-t", "never"], input="x\n",
                       capture_output=True, text=True, timeout=60)
    return r.stderr if r.returncode != 0 else ""


def js_spec(s: ScramBroker, protocol: str, mechanism: str, user: str, password: str, topic: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"bootstrap": s.bootstrap(protocol), "topic": topic, "codec": "none", "count": N,
                            "baseTs": int(time.time() * 1000), "queryTimestamps": [],
                            "sasl": {"mechanism": mechanism.lower(), "username": user, "password": password}}
    return {**spec, "ssl": {"ca": str(s.pki.ca)}} if protocol == "SASL_SSL" else spec


def kafkajs_roundtrip(s: ScramBroker, protocol: str, mechanism: str, topic: str, runner: list[str]) -> list[bytes]:
    out = run_kafkajs(runner, js_spec(s, protocol, mechanism, "alice", "alice-secret", topic))
    return [r["value"].encode() for r in out["records"]]


def kafkajs_refused(s: ScramBroker, protocol: str, mechanism: str, user: str, password: str,
                    runner: list[str]) -> str:
    spec = js_spec(s, protocol, mechanism, user, password, "never")
    proc = subprocess.run(runner + [json.dumps(spec)], capture_output=True, text=True, timeout=60)
    return proc.stdout + proc.stderr if proc.returncode != 0 else ""


CLIENTS = ["confluent", "kafka-python", "aiokafka", "kafkajs", "kcat"]


def refusal(mechanism: str) -> str:
    """What the broker answers a failed login with (Kafka's words for SCRAM)."""
    return "Invalid username or password" if mechanism == "PLAIN" else KAFKA_MESSAGE.format(mechanism)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("mechanism", ALL_MECHANISMS)
@pytest.mark.parametrize("client", CLIENTS)
def test_clients_log_in_with_sasl_and_are_refused_otherwise(scram: ScramBroker, request: pytest.FixtureRequest,
                                                             client: str, mechanism: str, protocol: str) -> None:
    topic = f"{client}-{mechanism}-{protocol}".lower()
    if client == "kafkajs":
        runner = request.getfixturevalue("kafkajs_runner")
        got = kafkajs_roundtrip(scram, protocol, mechanism, topic, runner)
        assert len(got) == N
        for user, password in (("alice", "wrong-secret"), ("mallory", "alice-secret")):
            why = kafkajs_refused(scram, protocol, mechanism, user, password, runner)
            assert "SASL" in why and refusal(mechanism) in why, why
        return
    roundtrip, refused = {
        "confluent": (confluent_roundtrip, confluent_refused),
        "kafka-python": (kafka_python_roundtrip, kafka_python_refused),
        "aiokafka": (aiokafka_roundtrip, aiokafka_refused),
        "kcat": (kcat_roundtrip, kcat_refused),
    }[client]
    assert roundtrip(scram, protocol, mechanism, topic) == [b"v%d" % i for i in range(N)]
    for user, password in (("alice", "wrong-secret"), ("mallory", "alice-secret")):
        why = refused(scram, protocol, mechanism, user, password)
        assert why, f"{client} was not refused as {user}"
        if client in ("confluent", "kcat"):  # (the others show their own exception text)
            assert refusal(mechanism) in why, why
