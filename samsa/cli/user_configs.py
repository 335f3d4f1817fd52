"""`samsa configs --entity-type users`: users' SCRAM credentials, as Kafka's kafka-configs does
them, through the brokers or straight in ZooKeeper.

    --alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=...]'
    --alter --delete-config SCRAM-SHA-512
    --describe

With --bootstrap-server: AlterUserScramCredentials / DescribeUserScramCredentials (the client
library salts and hashes the password; the broker stores the credential and every broker
follows). Output: `Completed updating config for user alice.` and
`SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192, ...`.

With --zookeeper HOST:PORT[/chroot]: the tool computes the credential (PBKDF2, Kafka's
credential string) and writes /config/users/<user> plus a change notification itself, so that
the first user exists before any broker runs, as Kafka's ZooKeeper-era tool allows. Output:
`Completed updating config for entity: user-principal 'alice'.` and
`Configs for user-principal 'alice' are SCRAM-SHA-256=salt=...,stored_key=...,...`.

Iterations default to 4096 and may not be under the mechanism's minimum (4096).
"""

from __future__ import annotations

import asyncio
import logging
import re
from concurrent.futures import Future
from typing import Any

from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from samsa.cli import client as cl
from samsa.cli.common import CliError
from samsa.metadata import scram, zkdata
from samsa.metadata.store import MetadataStore

MECHANISMS = scram.MECHANISMS  # the config names that are SCRAM credentials
_VALUE = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.DOTALL)
_ZK_TIMEOUT_MS = 30000


def _entity(user: str) -> str:
    return f"user-principal '{user}'"


def parse_credential(mechanism: str, value: str) -> tuple[int, str]:
    """`iterations=8192,password=secret` (brackets already removed) -> (iterations, password)."""
    m = _VALUE.fullmatch(value)
    if m is None:
        raise CliError(f"Invalid credential property {mechanism}={value.split('password=')[0]}... "
                       "(expected [iterations=<n>,]password=<password>)")
    iterations = int(m.group(1)) if m.group(1) and m.group(1) != "-1" else scram.DEFAULT_ITERATIONS
    minimum = scram.MECHANISMS[mechanism].min_iterations
    if iterations < minimum:
        raise CliError(f"Iterations {iterations} is less than the minimum {minimum} required for {mechanism}")
    if not m.group(2):
        raise CliError(f"{mechanism}: the password must not be empty")
    return iterations, m.group(2)


def _split(to_set: dict[str, str], to_delete: list[str], how: str) -> dict[str, tuple[int, str]]:
    """The SCRAM credentials to set; anything else is refused (Samsa's users have no quotas yet)."""
    other = [k for k in [*to_set, *to_delete] if k not in scram.MECHANISMS]
    if other:
        raise CliError(f"Only SCRAM credential configs ({', '.join(scram.MECHANISMS)}) can be changed for users "
                       f"{how}. Unexpected config names: {', '.join(other)}")
    return {k: parse_credential(k, v) for k, v in to_set.items()}


def run(a: Any, name: str | None, to_set: dict[str, str], to_delete: list[str]) -> int:
    if name == "":
        raise CliError("The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials")
    if a.zookeeper:
        if a.alter:
            assert name is not None
            creds = _split(to_set, to_delete, "using --zookeeper")
            # PBKDF2 here, before any I/O (seconds for many iterations: it is the point)
            made = {k: scram.credential_to_string(scram.new_credential(scram.MECHANISMS[k], pw, it))
                    for k, (it, pw) in creds.items()}
            asyncio.run(_with_zookeeper(a.zookeeper, lambda store: _zk_alter(store, name, made, to_delete)))
            print(f"Completed updating config for entity: {_entity(name)}.")
        else:
            asyncio.run(_with_zookeeper(a.zookeeper, lambda store: _zk_describe(store, name)))
        return 0
    props = cl.load_properties(a.command_config) if a.command_config else {}
    errors = cl.ClientErrors()
    admin = cl.make_client(AdminClient, cl.client_config(a.bootstrap_server, props, errors))
    cl.wait_for_cluster(admin, errors, a.bootstrap_server)
    if a.alter:
        assert name is not None
        _alter(admin, name, _split(to_set, to_delete, "using --bootstrap-server"), to_delete, errors.timeout)
        print(f"Completed updating config for user {name}.")
    else:
        _describe(admin, name, errors.timeout)
    return 0


def _alter(admin: AdminClient, user: str, creds: dict[str, tuple[int, str]], to_delete: list[str],
           timeout: float) -> None:
    changes: list[Any] = [UserScramCredentialDeletion(user, ScramMechanism[k.replace("-", "_")]) for k in to_delete]
    changes += [UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism[k.replace("-", "_")], it),
                                             pw.encode("utf-8")) for k, (it, pw) in creds.items()]
    futures = admin.alter_user_scram_credentials(changes, request_timeout=timeout)
    for fut in futures.values():
        cl.result(fut, timeout, what="SCRAM credential update")


def _describe(admin: AdminClient, user: str | None, timeout: float) -> None:
    what = "SCRAM credential description"
    found: dict[str, Any] = {}  # user -> its description, or the error that stood for it
    if user is None:
        every = admin.describe_user_scram_credentials(request_timeout=timeout)
        assert isinstance(every, Future)
        found = dict(sorted(cl.result(every, timeout, what=what).items()))
    else:
        each = admin.describe_user_scram_credentials([user], request_timeout=timeout)
        assert isinstance(each, dict)
        for name, fut in each.items():
            try:
                found[name] = cl.result(fut, timeout, what=what)
            except CliError as e:
                found[name] = e
    lines = []
    for name, d in found.items():
        if isinstance(d, CliError):
            lines.append(f"Error retrieving SCRAM credential configs for {_entity(name)}: {d}")
            continue
        text = ", ".join(f"{i.mechanism.name.replace('_', '-')}=iterations={i.iterations}"
                         for i in d.scram_credential_infos)
        lines.append(f"SCRAM credential configs for {_entity(name)} are {text}")
    if lines:
        print("\n".join(lines))


async def _with_zookeeper(connect: str, work: Any) -> None:
    from samsa.metadata.zookeeper import ZooKeeperStore

    logging.getLogger("kazoo").setLevel(logging.CRITICAL + 1)  # (its retries are not the user's business)
    try:
        store = await ZooKeeperStore.connect(connect, session_timeout_ms=_ZK_TIMEOUT_MS,
                                             connection_timeout_ms=_ZK_TIMEOUT_MS)
    except Exception as e:  # noqa: BLE001 - one line for any failure to reach ZooKeeper
        raise CliError(f"cannot connect to ZooKeeper at {connect}: {e or type(e).__name__}") from None
    try:
        await work(store)
    finally:
        await store.close()


async def _zk_alter(store: MetadataStore, user: str, made: dict[str, str], to_delete: list[str]) -> None:
    from samsa.server.entity_configs import alter_entity_config

    def change(config: dict[str, str]) -> dict[str, str]:
        missing = [k for k in to_delete if k not in config]
        if missing:
            raise CliError(f"Invalid config(s): {','.join(missing)}")
        for k in to_delete:
            del config[k]
        config.update(made)
        return config

    await alter_entity_config(store, scram.user_entity(user), change)


async def _zk_describe(store: MetadataStore, user: str | None) -> None:
    if user is not None:
        names = [zkdata.sanitize(user)]
    else:
        names = [n for n in await store.children(zkdata.USER_CONFIGS) if n != zkdata.DEFAULT_ENTITY]
    for n in sorted(names):
        node = await store.get(f"{zkdata.USER_CONFIGS}/{n}")
        config = zkdata.decode_config(node[0]) if node is not None and node[0] else {}
        if config or user is not None:  # (describing all users: not those with no config of their own)
            shown = ",".join(f"{k}={v}" for k, v in config.items())
            print(f"Configs for {_entity(zkdata.desanitize(n))} are {shown}")
