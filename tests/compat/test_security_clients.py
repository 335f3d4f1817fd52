"""kafkajs and aiokafka against SASL/PLAIN and TLS listeners (librdkafka, kafka-python and kcat
are in tests/broker/test_sasl.py and test_tls.py): authenticated clients produce and read
back, wrong credentials are refused."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.helpers import create_ssl_context

from tests.broker.test_sasl import sasl_broker
from tests.compat.helpers import base_timestamp_ms
from tests.compat.test_kafkajs import run_kafkajs
from tests.pki import make_pki


def test_kafkajs_over_sasl_plain_and_refused_with_a_wrong_password(tmp_path: Path, kafkajs_runner: list[str]) -> None:
    b = sasl_broker(tmp_path).start()
    try:
        out = run_kafkajs(kafkajs_runner, {
            "bootstrap": b.bootstrap, "topic": "js", "codec": "none", "count": 10, "baseTs": base_timestamp_ms(),
            "queryTimestamps": [], "sasl": {"mechanism": "plain", "username": "alice", "password": "alice-secret"}})
        assert len(out["records"]) == 10
        bad = {"bootstrap": b.bootstrap, "topic": "js2", "codec": "none", "count": 1, "baseTs": base_timestamp_ms(),
               "queryTimestamps": [], "sasl": {"mechanism": "plain", "username": "alice", "password": "nope"}}
        proc = subprocess.run(kafkajs_runner + [json.dumps(bad)], capture_output=True, text=True, timeout=60)
        assert proc.returncode != 0 and "SASL" in proc.stdout + proc.stderr
    finally:
        b.close()


def test_kafkajs_over_sasl_ssl(tmp_path: Path, kafkajs_runner: list[str]) -> None:
    pki = make_pki(tmp_path / "pki")
    b = sasl_broker(tmp_path, "SASL_SSL", **{"ssl.keystore.type": "PEM",
                                             "ssl.keystore.location": str(pki.keystore("server"))}).start()
    try:
        out = run_kafkajs(kafkajs_runner, {
            "bootstrap": b.bootstrap, "topic": "jss", "codec": "gzip", "count": 5, "baseTs": base_timestamp_ms(),
            "queryTimestamps": [], "sasl": {"mechanism": "plain", "username": "alice", "password": "alice-secret"},
            "ssl": {"ca": str(pki.ca)}})
        assert len(out["records"]) == 5
    finally:
        b.close()


def test_aiokafka_over_sasl_ssl(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    b = sasl_broker(tmp_path, "SASL_SSL", **{"ssl.keystore.type": "PEM",
                                             "ssl.keystore.location": str(pki.keystore("server"))}).start()

    async def run() -> list[bytes]:
        common: dict[str, Any] = {"bootstrap_servers": b.bootstrap, "security_protocol": "SASL_SSL",
                                  "sasl_mechanism": "PLAIN", "sasl_plain_username": "alice",
                                  "sasl_plain_password": "alice-secret",
                                  "ssl_context": create_ssl_context(cafile=str(pki.ca))}
        p = AIOKafkaProducer(**common)
        await p.start()
        try:
            for i in range(5):
                await p.send_and_wait("aio", b"a%d" % i, partition=0)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(**common, enable_auto_commit=False)
        await c.start()
        got: list[bytes] = []
        try:
            tp = TopicPartition("aio", 0)
            c.assign([tp])
            c.seek(tp, 0)
            while len(got) < 5:
                batch = await asyncio.wait_for(c.getmany(tp, timeout_ms=500), 30)
                got += [m.value for m in batch.get(tp, [])]
        finally:
            await c.stop()
        return got

    try:
        assert asyncio.run(run()) == [b"a%d" % i for i in range(5)]
    finally:
        b.close()
