"""`samsa acls` end to end against a real SASL broker with the ACL authorizer: kafka-acls.sh's
flags and output, the --producer/--consumer conveniences, --remove with and without --force,
--list by principal, and one-line errors with a non-zero exit for mistakes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer

from tests.broker.test_acls import acl_broker, conf
from tests.brokerproc import BrokerProcess
from tests.cli.helpers import ok, one_line_error, samsa


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str, str]]:
    root = tmp_path_factory.mktemp("acls-cli")
    b = acl_broker(root).start()
    admin = root / "admin.properties"
    admin.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=admin\n"
                     "sasl.password=admin-secret\n")
    bob = root / "bob.properties"
    bob.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=bob\n"
                   "sasl.password=bob-secret\n")
    try:
        yield b, str(admin), str(bob)
    finally:
        b.close()


def acls(b: BrokerProcess, config: str, *args: str, input: str | None = None) -> tuple[int, str, str]:
    p = samsa("acls", "--bootstrap-server", b.bootstrap, "--command-config", config, *args, input=input)
    return p.returncode, p.stdout, p.stderr


def test_add_list_remove_like_kafka_acls(broker: tuple[BrokerProcess, str, str]) -> None:
    b, admin, _ = broker
    rc, out, err = acls(b, admin, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                        "--operation", "Describe", "--topic", "cli-t")
    assert rc == 0, err
    assert out.startswith("Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=cli-t, "
                          "patternType=LITERAL)`: \n \t(principal=User:alice, host=*, operation=READ, "
                          "permissionType=ALLOW)\n\t(principal=User:alice, host=*, operation=DESCRIBE, "
                          "permissionType=ALLOW) \n")
    rc, out, err = acls(b, admin, "--list", "--topic", "cli-t")
    assert rc == 0, err
    assert "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=cli-t, patternType=LITERAL)`:" in out
    assert out.count("principal=User:alice") == 2
    ok_ = acls(b, admin, "--add", "--deny-principal", "User:bob", "--deny-host", "10.1.1.1", "--topic", "cli-",
               "--resource-pattern-type", "prefixed")
    assert ok_[0] == 0, ok_[2]
    rc, out, _ = acls(b, admin, "--list", "--principal", "User:bob")
    assert out.startswith("ACLs for principal `User:bob`\n")
    assert "(principal=User:bob, host=10.1.1.1, operation=ALL, permissionType=DENY)" in out
    assert "User:alice" not in out
    # --remove of one entry asks first; "n" keeps it
    rc, out, _ = acls(b, admin, "--remove", "--allow-principal", "User:alice", "--operation", "Read", "--topic",
                      "cli-t", input="n\n")
    assert rc == 0 and "Are you sure you want to remove ACLs:" in out
    assert acls(b, admin, "--list", "--topic", "cli-t")[1].count("principal=User:alice") == 2
    assert acls(b, admin, "--remove", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "cli-t",
                "--force")[0] == 0
    listed = acls(b, admin, "--list", "--topic", "cli-t")[1]
    assert "operation=READ" not in listed and "operation=DESCRIBE" in listed
    assert acls(b, admin, "--remove", "--topic", "cli-t", "--force")[0] == 0  # every ACL of the resource
    assert acls(b, admin, "--list", "--topic", "cli-t")[1] == ""


def test_producer_and_consumer_conveniences(broker: tuple[BrokerProcess, str, str]) -> None:
    b, admin, _ = broker
    ok(samsa("acls", "--bootstrap-server", b.bootstrap, "--command-config", admin, "--add", "--allow-principal",
             "User:alice", "--producer", "--topic", "conv-t", "--idempotent"))
    ok(samsa("acls", "--bootstrap-server", b.bootstrap, "--command-config", admin, "--add", "--allow-principal",
             "User:alice", "--consumer", "--topic", "conv-t", "--group", "conv-g"))
    out = acls(b, admin, "--list")[1]
    for resource, ops in [("resourceType=TOPIC, name=conv-t", {"WRITE", "DESCRIBE", "CREATE", "READ"}),
                          ("resourceType=CLUSTER, name=kafka-cluster", {"IDEMPOTENT_WRITE"}),
                          ("resourceType=GROUP, name=conv-g", {"READ"})]:
        block = out.split(resource, 1)[1].split("\n\n", 1)[0]
        assert {op for op in ops if f"operation={op}," in block} == ops, (resource, block)
    errors: list[KafkaError | None] = []
    p = Producer(conf(b, "alice", **{"enable.idempotence": True, "message.timeout.ms": 10000}))
    p.produce("conv-t", b"x", on_delivery=lambda err, msg: errors.append(err))
    p.flush(20)
    assert errors == [None]  # the ACLs the tool added let alice create the topic and produce idempotently


def test_mistakes_are_one_line_errors(broker: tuple[BrokerProcess, str, str], tmp_path: Path) -> None:
    b, admin, bob = broker
    base = ["acls", "--bootstrap-server", b.bootstrap, "--command-config", admin]
    assert "not of the form Type:name" in one_line_error(samsa(*base, "--add", "--allow-principal", "alice",
                                                                "--topic", "t"))
    assert "unknown operation 'Raed'" in one_line_error(samsa(*base, "--add", "--allow-principal", "User:alice",
                                                               "--operation", "Raed", "--topic", "t"))
    assert "exactly one action" in one_line_error(samsa(*base, "--topic", "t"), codes=(2,))
    assert "not valid when adding acls" in one_line_error(
        samsa(*base, "--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"),
        codes=(2,))
    assert "only supports operations" in one_line_error(
        samsa(*base, "--add", "--allow-principal", "User:a", "--group", "g", "--operation", "Write"), codes=(2,))
    assert "--allow-principal, --deny-principal" in one_line_error(samsa(*base, "--add", "--topic", "t"), codes=(2,))
    # bob may not alter the cluster's ACLs: the broker's refusal, in one line
    line = one_line_error(samsa("acls", "--bootstrap-server", b.bootstrap, "--command-config", bob, "--add",
                                "--allow-principal", "User:bob", "--topic", "t"))
    assert "ALTER on the cluster is needed to create ACLs" in line
    assert acls(b, admin, "--list", "--topic", "t")[1] == ""  # nothing stored
