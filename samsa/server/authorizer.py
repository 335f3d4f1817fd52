"""The ACL authorizer: Kafka's AclAuthorizer, its ACLs kept where and as Kafka keeps them.

Enabled by `authorizer.class.name` (Kafka's `kafka.security.authorizer.AclAuthorizer`, or
`samsa.server.authorizer.AclAuthorizer`); `super.users` and `allow.everyone.if.no.acl.found`
as in Kafka. Decisions are `acls.AclIndex`'s (pure, cached); this module adds the store:

* at start-up every ACL is read (`/kafka-acl/<Type>/<name>` for literal patterns,
  `/kafka-acl-extended/prefixed/<Type>/<name>` for prefixed ones; zkdata.py has the JSON);
* a change (CreateAcls, DeleteAcls) rewrites the pattern's node by compare-and-set -- retried
  when another broker changed it meanwhile, the node deleted (at the version read) when no ACL
  is left -- then adds a sequential notification (`/kafka-acl-changes/acl_changes_<seq>`,
  `/kafka-acl-extended-changes/...`) naming the pattern;
* every broker (the writer too) follows the notifications (entity_configs.ChangeNotifications,
  Kafka's ZkNodeChangeNotificationListener) and re-reads the pattern they name, so an ACL set
  on one broker applies on all of them within a watch's round trip.

Decisions are logged on `samsa.authorizer` (Kafka's `kafka.authorizer.logger`): denials at
INFO, at most one line per principal, operation and resource every 10 s (with the count of
the others); allows at DEBUG.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from types import ModuleType

from samsa.metadata import zkdata
from samsa.metadata.store import BadVersion, MetadataStore, NodeExists, NoNode, StoreError
from samsa.ratelimit import RateLimitedLog
from samsa.server.acls import (
    AclIndex,
    Binding,
    BindingFilter,
    Entry,
    Op,
    Pattern,
    PatternType,
    ResourceType,
    check_principal,
    parse_op,
    parse_pattern_type,
    parse_permission,
    parse_resource_type,
    pascal,
)
from samsa.server.entity_configs import ChangeNotifications

log = logging.getLogger("samsa.acls")
decisions_log = logging.getLogger("samsa.authorizer")

ACL_AUTHORIZER_NAMES = ("kafka.security.authorizer.AclAuthorizer", "samsa.server.authorizer.AclAuthorizer")
DENIAL_LOG_INTERVAL_S = 10.0
MAX_UPDATE_ATTEMPTS = 20


class AuthorizerConfigError(ValueError):
    pass


def authorizer_settings(class_name: str | None, super_users: str | None) -> list[str] | None:
    """The super users when `authorizer.class.name` names the ACL authorizer, None when it is
    unset; AuthorizerConfigError for any other class or a malformed principal."""
    name = (class_name or "").strip()
    if not name:
        return None
    if name not in ACL_AUTHORIZER_NAMES:
        raise AuthorizerConfigError(
            f"authorizer.class.name: {name} is not supported; Samsa's ACL authorizer is "
            f"{' or '.join(ACL_AUTHORIZER_NAMES)} (Kafka's ZooKeeper-based AclAuthorizer)")
    users = [u.strip() for u in (super_users or "").split(";") if u.strip()]
    for u in users:
        try:
            check_principal(u)
        except ValueError as e:
            raise AuthorizerConfigError(f"super.users: {e}") from None
    return users


def api_names(modules: Iterable[ModuleType]) -> dict[int, str]:
    """Api key -> Kafka's name of the API ("CreateTopics"), from the handler modules' names."""
    return {m.API_KEY: pascal(m.__name__.rsplit(".", 1)[-1].upper()) for m in modules}


def _entry_of(principal: str, permission: str, operation: str, host: str) -> Entry:
    return Entry(check_principal(principal), host, parse_op(operation), parse_permission(permission))


def _stored(entries: Iterable[Entry]) -> bytes:
    rows = sorted((e.principal, pascal(e.permission.name), pascal(e.operation.name), e.host) for e in entries)
    return zkdata.encode_acls(rows)


class Authorizer:
    """This broker's ACLs and decisions (see the module doc)."""

    def __init__(self, store: MetadataStore, super_users: Iterable[str] = (), allow_if_no_acl: bool = False,
                 api_names: dict[int, str] | None = None) -> None:
        self.store = store
        self.index = AclIndex(super_users, allow_if_no_acl)
        self.api_names = api_names or {}
        self._denials = RateLimitedLog(decisions_log, DENIAL_LOG_INTERVAL_S)
        self._write_lock = asyncio.Lock()
        self._listeners = [
            ChangeNotifications(store, zkdata.LITERAL_ACL_CHANGES, zkdata.ACL_CHANGE_PREFIX,
                                lambda data: self._on_change(data, literal=True), name="ACL changes"),
            ChangeNotifications(store, zkdata.EXTENDED_ACL_CHANGES, zkdata.ACL_CHANGE_PREFIX,
                                lambda data: self._on_change(data, literal=False), name="extended ACL changes"),
        ]

    # -- decisions ----------------------------------------------------------------------------

    def authorize(self, principal: str, host: str, op: Op, rtype: ResourceType, name: str, api_key: int = -1,
                  log_denied: bool = True) -> bool:
        allowed = self.index.authorize(principal, host, op, rtype, name)
        if allowed:
            if decisions_log.isEnabledFor(logging.DEBUG):
                decisions_log.debug(self._message(principal, "Allowed", op, host, rtype, name, api_key))
        elif log_denied:
            self._denials.info(f"{principal}\0{op}\0{rtype}\0{name}", "%s",
                               self._message(principal, "Denied", op, host, rtype, name, api_key))
        return allowed

    def authorize_any(self, principal: str, host: str, op: Op, rtype: ResourceType, api_key: int = -1) -> bool:
        allowed = self.index.authorize_any(principal, host, op, rtype)
        if not allowed:
            self._denials.info(f"{principal}\0{op}\0{rtype}\0", "%s",
                               self._message(principal, "Denied", op, host, rtype, "ANY", api_key))
        return allowed

    def _message(self, principal: str, verdict: str, op: Op, host: str, rtype: ResourceType, name: str,
                 api_key: int) -> str:
        api = self.api_names.get(api_key, str(api_key))
        return (f"Principal = {principal} is {verdict} Operation = {pascal(op.name)} from host = {host} on resource "
                f"= {pascal(rtype.name)}:LITERAL:{name} for request = {api}")

    # -- start, stop, follow ------------------------------------------------------------------

    async def start(self) -> None:
        """Read every ACL, then follow the change notifications."""
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            root = zkdata.acl_root(pattern_type.name)
            patterns: list[Pattern] = []
            for type_name in await self.store.children(root):
                try:
                    rtype = parse_resource_type(type_name)
                except ValueError:
                    log.warning("Ignoring ACLs of unknown resource type %s (%s/%s)", type_name, root, type_name)
                    continue
                for name in await self.store.children(f"{root}/{type_name}"):
                    patterns.append(Pattern(rtype, name, pattern_type))
            nodes = await self.store.get_many([self._path(p) for p in patterns])
            for p, node in zip(patterns, nodes):
                self._apply(p, node[0] if node is not None else b"")
        for listener in self._listeners:
            await listener.start()
        log.info("ACL authorizer started with %d ACLs on %d resource patterns", len(self.index),
                 len(self.index.acls))

    async def stop(self) -> None:
        for listener in self._listeners:
            await listener.stop()

    async def drained(self) -> None:
        for listener in self._listeners:
            await listener.drained()

    @staticmethod
    def _path(p: Pattern) -> str:
        return zkdata.acl_path(p.pattern_type.name, p.resource_type.name, p.name)

    def _apply(self, p: Pattern, data: bytes) -> None:
        try:
            entries = [_entry_of(*row) for row in zkdata.decode_acls(data)]
        except (ValueError, KeyError, TypeError) as e:
            log.warning("Ignoring the ACLs of %s: %s", self._path(p), e)
            return
        if self.index.set(p, entries):
            log.debug("ACLs of %s: %s", p, ", ".join(map(str, entries)) or "none")

    async def _on_change(self, data: bytes, literal: bool) -> None:
        pattern_type, type_name, name = zkdata.decode_acl_change(data, literal)
        p = Pattern(parse_resource_type(type_name), name, parse_pattern_type(pattern_type))
        node = await self.store.get(self._path(p))
        self._apply(p, node[0] if node is not None else b"")
        log.info("Processed ACL change notification for %s: %d ACLs", p, len(self.index.acls.get(p, ())))

    # -- changes (CreateAcls, DeleteAcls) ------------------------------------------------------

    async def create(self, bindings: list[Binding]) -> list[BaseException | None]:
        """Add each binding to its pattern's node; an error (or None) per binding."""
        by_pattern: dict[Pattern, list[int]] = {}
        for i, (p, _) in enumerate(bindings):
            by_pattern.setdefault(p, []).append(i)
        out: list[BaseException | None] = [None] * len(bindings)
        async with self._write_lock:
            for p, indexes in by_pattern.items():
                new = {bindings[i][1] for i in indexes}
                try:
                    await self._update(p, lambda current, new=new: current | new)
                except (StoreError, ValueError) as e:
                    for i in indexes:
                        out[i] = e
        return out

    async def delete(self, filters: list[BindingFilter]) -> list[list[tuple[Binding, BaseException | None]]]:
        """Remove every ACL a filter matches; per filter, the bindings removed (each with its
        error, None when removed). As Kafka's, a MATCH filter sees the ACLs this broker knows."""
        results: list[list[tuple[Binding, BaseException | None]]] = [[] for _ in filters]
        async with self._write_lock:
            candidates = set(self.index.acls)
            for f in filters:  # a filter naming exactly one pattern reaches it even if not cached yet
                if f.name is not None and f.resource_type != ResourceType.ANY and \
                        f.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED, PatternType.ANY):
                    kinds = ((PatternType.LITERAL, PatternType.PREFIXED) if f.pattern_type == PatternType.ANY
                             else (f.pattern_type,))
                    candidates.update(Pattern(f.resource_type, f.name, k) for k in kinds)
            for p in sorted(candidates, key=lambda p: (p.resource_type, p.pattern_type, p.name)):
                matching = [(i, f) for i, f in enumerate(filters) if f.matches_pattern(p)]
                if not matching:
                    continue
                removed: dict[Entry, int] = {}

                def drop(current: frozenset[Entry], matching: list[tuple[int, BindingFilter]] = matching,
                         removed: dict[Entry, int] = removed) -> frozenset[Entry]:
                    removed.clear()
                    for e in current:
                        for i, f in matching:
                            if f.matches_entry(e):
                                removed.setdefault(e, i)
                    return current - removed.keys()

                error: BaseException | None = None
                try:
                    await self._update(p, drop)
                except (StoreError, ValueError) as failure:
                    error = failure
                for entry, i in removed.items():
                    results[i].append(((p, entry), error))
        return results

    def describe(self, f: BindingFilter) -> list[Binding]:
        return self.index.matching(f)

    async def _update(self, p: Pattern, change: object) -> None:
        """Kafka's updateResourceAcls: read the pattern's node, apply `change` (current set ->
        new set), write it back at the version read (create it, or delete it when empty);
        retried from a fresh read when another writer got there first; then notify."""
        path = self._path(p)
        assert callable(change)
        for _ in range(MAX_UPDATE_ATTEMPTS):
            node = await self.store.get(path)
            current = frozenset(_entry_of(*row) for row in zkdata.decode_acls(node[0])) if node is not None \
                else frozenset()
            new = frozenset(change(current))
            if new == current:
                self.index.set(p, new)
                return
            try:
                if node is None:
                    await self.store.create(path, _stored(new))
                elif new:
                    await self.store.set(path, _stored(new), node[1])
                else:
                    await self.store.delete(path, version=node[1])
            except (BadVersion, NodeExists, NoNode):
                continue
            self.index.set(p, new)
            await self.store.create_sequential(
                f"{zkdata.acl_change_root(p.pattern_type.name)}/{zkdata.ACL_CHANGE_PREFIX}",
                zkdata.acl_change(p.pattern_type.name, p.resource_type.name, p.name))
            log.info("Updated ACLs for %s: %d entries", p, len(new))
            return
        raise StoreError(f"{path} kept changing under {MAX_UPDATE_ATTEMPTS} attempts to change it")


__all__ = ["ACL_AUTHORIZER_NAMES", "Authorizer", "AuthorizerConfigError", "api_names", "authorizer_settings"]
