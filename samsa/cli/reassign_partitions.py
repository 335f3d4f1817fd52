"""`samsa reassign-partitions`: kafka-reassign-partitions.sh — move partition replicas.

Actions (exactly one):

* ``--generate --topics-to-move-json-file F --broker-list 0,1,2`` prints the current
  assignment of those topics and a proposal spreading them over the listed brokers
  (Kafka's replica assignment, rack aware unless ``--disable-rack-aware``).
* ``--execute --reassignment-json-file F [--throttle B/s] [--replica-alter-log-dirs-throttle B/s]
  [--additional]`` prints the current assignment (to roll back with), optionally throttles the
  moving replicas, submits the reassignment to the controller, then asks each broker to move
  the replicas the file's ``log_dirs`` send to a log dir (AlterReplicaLogDirs; a replica not
  on its broker yet is asked again until ``--timeout``).
* ``--verify --reassignment-json-file F`` reports each partition's state, and each move between
  log dirs (DescribeLogDirs); once every one is complete it removes the throttles (unless
  ``--preserve-throttles``).
* ``--cancel --reassignment-json-file F`` cancels those partitions' ongoing reassignments.
* ``--list`` lists the ongoing reassignments.

File parsing, proposals, throttle lists and output text live in `samsa.cli.reassign_plan`;
this module gathers the cluster's state and sends the requests. Reassignments go to the
controller over `samsa.cli.controller_client` (librdkafka has no reassignment API); configs
(throttles) and metadata go through librdkafka's admin client.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource

from samsa.cli import client as cl
from samsa.cli import reassign_plan as plan
from samsa.cli.common import ArgumentParser, CliError
from samsa.cli.controller_client import ControllerClient
from samsa.protocol.errors import ErrorCode

_ACTIONS = ("generate", "execute", "verify", "cancel", "list")
ALTER_REPLICA_LOG_DIRS = 34
DESCRIBE_LOG_DIRS = 35

# Options each action accepts (beyond --bootstrap-server and --command-config), as Kafka's tool.
_PERMITTED: dict[str, tuple[str, ...]] = {
    "generate": ("topics_to_move_json_file", "broker_list", "disable_rack_aware"),
    "execute": ("reassignment_json_file", "throttle", "replica_alter_log_dirs_throttle", "timeout", "additional",
                "disallow_replication_factor_change"),
    "verify": ("reassignment_json_file", "preserve_throttles"),
    "cancel": ("reassignment_json_file", "preserve_throttles", "timeout"),
    "list": (),
}
_REQUIRED: dict[str, tuple[str, ...]] = {
    "generate": ("topics_to_move_json_file", "broker_list"),
    "execute": ("reassignment_json_file",),
    "verify": ("reassignment_json_file",),
    "cancel": ("reassignment_json_file",),
    "list": (),
}
_OPTIONS = sorted({o for opts in _PERMITTED.values() for o in opts})

CANNOT_EXECUTE = (
    "Cannot execute because there is an existing partition assignment. Use --additional to "
    "override this and create a new partition assignment in addition to the existing one. The "
    "--additional flag can also be used to change the throttle by resubmitting the current reassignment."
)


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def build_parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="samsa reassign-partitions",
        description="Move partitions between brokers (like kafka-reassign-partitions.sh).",
    )
    p.add_argument("--bootstrap-server", metavar="SERVER", help="REQUIRED: The Kafka server to connect to.")
    p.add_argument(
        "--command-config", metavar="FILE", help="Property file containing configs to be passed to Admin Client."
    )
    p.add_argument("--generate", action="store_true", help="Propose a reassignment of the topics to move.")
    p.add_argument("--execute", action="store_true", help="Start the reassignment in --reassignment-json-file.")
    p.add_argument("--verify", action="store_true",
                   help="Report the state of the reassignment in --reassignment-json-file; clears the throttles "
                   "once it is complete.")
    p.add_argument("--cancel", action="store_true", help="Cancel the ongoing reassignments of the file's partitions.")
    p.add_argument("--list", action="store_true", help="List the partition reassignments in progress.")
    p.add_argument("--reassignment-json-file", metavar="FILE",
                   help='The reassignment: {"version":1,"partitions":[{"topic":"foo","partition":0,'
                   '"replicas":[1,2],"log_dirs":["any","any"]}]}')
    p.add_argument("--topics-to-move-json-file", metavar="FILE",
                   help='The topics to move (--generate): {"topics":[{"topic":"foo"}],"version":1}')
    p.add_argument("--broker-list", metavar="IDS", help='The brokers to move the topics to (--generate): "0,1,2".')
    p.add_argument("--disable-rack-aware", action="store_true", help="Propose assignments ignoring broker racks.")
    p.add_argument("--throttle", type=int, metavar="BYTES_PER_SEC",
                   help="Limit replication between brokers to this many bytes/sec while the partitions move "
                   "(--execute). Run --verify until the move completes to remove the limit.")
    p.add_argument("--replica-alter-log-dirs-throttle", type=int, metavar="BYTES_PER_SEC",
                   help="Limit the moves of replicas between the log dirs of a broker (\"log_dirs\" in the file) to "
                   "this many bytes/sec on each moving broker (--execute). Run --verify until the moves complete "
                   "to remove the limit.")
    p.add_argument("--timeout", type=int, metavar="MS", default=None,
                   help="How long to wait for the controller to accept the request, in ms (default 10000).")
    p.add_argument("--additional", action="store_true",
                   help="Execute even though other reassignments are in progress (also: resubmit to change the "
                   "throttle).")
    p.add_argument("--preserve-throttles", action="store_true",
                   help="Do not remove the throttles when the reassignment is complete or cancelled.")
    p.add_argument("--disallow-replication-factor-change", action="store_true",
                   help="Refuse targets that would change a partition's replication factor (--execute).")
    return p


def check_args(p: ArgumentParser, a: argparse.Namespace) -> str:
    """Kafka's option checks: one action, its required options, nothing it does not use."""
    actions = [name for name in _ACTIONS if getattr(a, name)]
    if len(actions) != 1:
        p.error("Command must include exactly one action: --generate, --execute, --verify, --cancel, --list")
    action = actions[0]
    if not a.bootstrap_server:
        p.error("--bootstrap-server must be specified")
    missing = [_flag(o) for o in _REQUIRED[action] if not getattr(a, o)]
    if missing:
        p.error(f"--{action} needs {' and '.join(missing)}")
    for option in _OPTIONS:
        value = getattr(a, option)
        if option not in _PERMITTED[action] and value is not None and value is not False:
            p.error(f'Option "{_flag(option)}" can\'t be used with action "--{action}"')
    if a.throttle is not None and a.throttle < 0:
        p.error("--throttle must be a non-negative number of bytes per second")
    if a.replica_alter_log_dirs_throttle is not None and a.replica_alter_log_dirs_throttle < 0:
        p.error("--replica-alter-log-dirs-throttle must be a non-negative number of bytes per second")
    if a.timeout is not None and a.timeout <= 0:
        p.error("--timeout must be a positive number of milliseconds")
    return action


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise CliError(f"cannot read {path}: {e.strerror or e}") from None


@cl.one_line_errors
def run(argv: list[str]) -> int:
    p = build_parser()
    if not argv:
        p.print_help()
        return 1
    a = p.parse_args(argv)
    action = check_args(p, a)
    # Parse the files before connecting: a mistake in them needs no cluster to report.
    reassignment = topics = brokers = None
    if action == "generate":
        topics = plan.parse_topics_to_move(_read(a.topics_to_move_json_file), a.topics_to_move_json_file)
        brokers = plan.parse_broker_list(a.broker_list)
    elif action in ("execute", "verify", "cancel"):
        reassignment = plan.parse_reassignment(_read(a.reassignment_json_file), a.reassignment_json_file)
    props = cl.load_properties(a.command_config) if a.command_config else {}
    errors = cl.ClientErrors()
    admin = cl.make_client(AdminClient, cl.client_config(a.bootstrap_server, props, errors))
    md = cl.wait_for_cluster(admin, errors, a.bootstrap_server)
    timeout = a.timeout / 1000.0 if a.timeout is not None else errors.timeout
    tool = _Reassigner(admin, md, ControllerClient(admin, props, timeout), errors.timeout, props, timeout)
    if action == "generate":
        assert topics is not None and brokers is not None
        tool.generate(topics, brokers, rack_aware=not a.disable_rack_aware)
    elif action == "execute":
        assert reassignment is not None
        tool.execute(reassignment, a.throttle, a.replica_alter_log_dirs_throttle, a.additional,
                     not a.disallow_replication_factor_change)
    elif action == "verify":
        assert reassignment is not None
        tool.verify(reassignment, a.preserve_throttles)
    elif action == "cancel":
        assert reassignment is not None
        tool.cancel(reassignment, a.preserve_throttles)
    else:
        print("\n".join(plan.format_ongoing(tool.controller.list_reassignments())))
    sys.stdout.flush()
    return 0


class _Reassigner:
    def __init__(self, admin: AdminClient, md: Any, controller: ControllerClient, timeout: float,
                 props: dict[str, str] | None = None, move_timeout: float | None = None) -> None:
        self.admin = admin
        self.md = md
        self.controller = controller
        self.timeout = timeout
        self.props = props or {}
        self.move_timeout = move_timeout if move_timeout is not None else timeout  # (--timeout)

    # --- cluster state ----------------------------------------------------------------------
    def topic_assignment(self, topics: list[str]) -> plan.Assignment:
        out: plan.Assignment = {}
        for name in topics:
            tm = self.md.topics.get(name)
            if tm is None or tm.error is not None and not tm.partitions:
                raise CliError(f"Topic '{name}' does not exist")
            for pid, pm in tm.partitions.items():
                out[(name, pid)] = list(pm.replicas)
        return out

    def current_assignment(self, partitions: list[plan.TopicPartition]) -> plan.Assignment:
        out: plan.Assignment = {}
        for t, p in partitions:
            tm = self.md.topics.get(t)
            pm = tm.partitions.get(p) if tm is not None else None
            if pm is None:
                raise CliError(f"Unable to find partition: {plan.tp_str((t, p))}")
            out[(t, p)] = list(pm.replicas)
        return out

    def cluster_brokers(self) -> list[plan.Broker]:
        try:
            desc = self.admin.describe_cluster(request_timeout=self.timeout)
            nodes = cl.result(desc, self.timeout, what="cluster description").nodes
            return [plan.Broker(n.id, n.rack or None) for n in nodes]
        except CliError:
            # Metadata has no racks, but it names the brokers.
            return [plan.Broker(b) for b in self.md.brokers]

    # --- generate ---------------------------------------------------------------------------
    def generate(self, topics: list[str], broker_list: list[int], rack_aware: bool) -> None:
        current = self.topic_assignment(topics)
        usable = plan.usable_brokers(self.cluster_brokers(), broker_list, rack_aware)
        proposed = plan.propose(current, usable)
        print(plan.generate_output(current, proposed))

    # --- execute ----------------------------------------------------------------------------
    def execute(self, r: plan.Reassignment, throttle: int | None, log_dir_throttle: int | None, additional: bool,
                allow_rf_change: bool) -> None:
        ongoing = self.controller.list_reassignments()
        if ongoing and not additional:
            raise CliError(CANNOT_EXECUTE)
        live = set(self.md.brokers)
        unknown = sorted({b for replicas in r.targets.values() for b in replicas} - live)
        if unknown:
            raise CliError("Unknown broker id(s): " + ", ".join(map(str, unknown)))
        current = self.current_assignment(list(r.targets))
        print(plan.rollback_output(current))
        dir_moves = plan.replica_log_dirs(r)
        if throttle is not None or log_dir_throttle is not None:
            print("Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
                  "throttle is removed.")
        if throttle is not None:
            moves = plan.move_map(ongoing, r.targets, current)
            self.set_topic_throttles(moves)
            self.set_broker_throttles(plan.reassigning_brokers(moves), throttle)
            print(f"The inter-broker throttle limit was set to {throttle} B/s")
        if log_dir_throttle is not None:
            self.set_log_dir_throttles(sorted({b for _, _, b in dir_moves}), log_dir_throttle)
            print(f"The replica-alter-dir throttle limit was set to {log_dir_throttle} B/s")
        sys.stdout.flush()
        failed = self.controller.alter_reassignments(dict(r.targets), allow_rf_change)
        if failed:
            for tp in plan.sort_partitions(failed):
                print(f"Error reassigning partition {plan.tp_str(tp)}: {failed[tp][1]}")
            raise CliError(f"{len(failed)} of {len(r.targets)} partition reassignment(s) failed")
        n = len(r.targets)
        print(f"Successfully started partition reassignment{'' if n == 1 else 's'} for "
              f"{plan.partition_list(r.targets)}")
        if dir_moves:
            self.execute_moves(dir_moves)

    def execute_moves(self, moves: dict[plan.Replica, str]) -> None:
        """AlterReplicaLogDirs to each broker of `moves`, again every 100 ms for the replicas
        not on their broker yet (REPLICA_NOT_AVAILABLE: a reassignment is bringing them), until
        --timeout (Kafka's executeMoves)."""
        pending = dict(moves)
        deadline = time.monotonic() + self.move_timeout
        while True:
            started = []
            for broker, body in plan.alter_log_dirs_requests(pending).items():
                resp = self._broker_request(broker, ALTER_REPLICA_LOG_DIRS, 2, body)
                for res in resp.results:
                    for part in res.partitions:
                        replica = (res.topic_name, part.partition_index, broker)
                        code = ErrorCode(part.error_code)
                        if code == ErrorCode.NONE:
                            started.append(replica)
                        elif code != ErrorCode.REPLICA_NOT_AVAILABLE:
                            raise CliError(f"Failed to alter dir for {plan.replica_str(replica)}: {code.name}")
            for replica in plan.sort_replicas(started):
                print(f"Successfully started moving log directory to {pending.pop(replica)} for replica "
                      f"{replica[0]}-{replica[1]} with broker {replica[2]} ")
            if not pending:
                return
            if time.monotonic() >= deadline:
                n = len(pending)
                raise CliError(f"Timed out before log directory move{'' if n == 1 else 's'} could be started for: "
                               + ",".join(plan.replica_str(rep) for rep in plan.sort_replicas(pending)))
            time.sleep(0.1)

    def _broker_request(self, broker: int, api_key: int, version: int, body: dict[str, Any]) -> Any:
        b = self.md.brokers.get(broker)
        if b is None:
            raise CliError(f"Unknown broker id: {broker}")
        return cl.raw_request(b.host, b.port, api_key, version, body, self.timeout, self.props)

    # --- verify -----------------------------------------------------------------------------
    def verify(self, r: plan.Reassignment, preserve_throttles: bool) -> None:
        ongoing = self.controller.list_reassignments(list(r.targets))
        current = self.current_assignment([tp for tp in r.targets if tp not in ongoing])
        states = plan.verify_states(r.targets, ongoing, current)
        print("Status of partition reassignment:")
        print("\n".join(plan.format_states(states)))
        done = all(s.done for s in states.values())
        dir_moves = plan.replica_log_dirs(r)
        if dir_moves:
            described = {}
            for broker in sorted({b for _, _, b in dir_moves}):
                if broker in self.md.brokers:
                    resp = self._broker_request(broker, DESCRIBE_LOG_DIRS, 4, {"topics": None})
                    if resp.error_code:
                        raise CliError(f"broker {broker} refused DescribeLogDirs: {ErrorCode(resp.error_code).name}")
                    described[broker] = resp
            moving = plan.move_states(dir_moves, described)
            print("\n".join(plan.format_move_states(moving)))
            done = done and all(m.done for m in moving.values())
        if done and not preserve_throttles:
            self.clear_throttles(r.topics)

    # --- cancel -----------------------------------------------------------------------------
    def cancel(self, r: plan.Reassignment, preserve_throttles: bool) -> None:
        ongoing = self.controller.list_reassignments(list(r.targets))
        moving = [tp for tp, (_, adding, removing) in ongoing.items() if adding or removing]
        if moving:
            failed = self.controller.alter_reassignments({tp: None for tp in moving})
            if failed:
                for tp in plan.sort_partitions(failed):
                    print(f"Error cancelling the reassignment of partition {plan.tp_str(tp)}: {failed[tp][1]}")
                raise CliError(f"{len(failed)} of {len(moving)} partition reassignment(s) could not be cancelled")
            print(f"Successfully cancelled partition reassignment{'' if len(moving) == 1 else 's'} for: "
                  f"{plan.partition_list(moving)}")
        else:
            print("None of the specified partition reassignments are active.")
        if not preserve_throttles:
            self.clear_throttles(r.topics)

    # --- throttles --------------------------------------------------------------------------
    def _alter(self, resources: list[ConfigResource], what: str) -> None:
        if not resources:
            return
        futures = self.admin.incremental_alter_configs(resources, request_timeout=self.timeout)
        for res, fut in futures.items():
            try:
                cl.result(fut, self.timeout, what=what)
            except CliError as e:
                kind = "topic" if res.restype == ConfigResource.Type.TOPIC else "broker"
                raise CliError(f"{what} failed for {kind} {res.name}: {e}") from None

    def set_topic_throttles(self, moves: dict[plan.TopicPartition, plan.PartitionMove]) -> None:
        leaders, followers = plan.leader_throttles(moves), plan.follower_throttles(moves)
        resources = []
        for topic in sorted(set(leaders) | set(followers)):
            res = ConfigResource(ConfigResource.Type.TOPIC, topic)
            res.incremental_configs = [
                ConfigEntry(plan.LEADER_THROTTLED_REPLICAS, leaders.get(topic, ""),
                            incremental_operation=AlterConfigOpType.SET),
                ConfigEntry(plan.FOLLOWER_THROTTLED_REPLICAS, followers.get(topic, ""),
                            incremental_operation=AlterConfigOpType.SET),
            ]
            resources.append(res)
        self._alter(resources, "setting the topic throttles")

    def set_log_dir_throttles(self, brokers: list[int], rate: int) -> None:
        for b in brokers:
            res = ConfigResource(ConfigResource.Type.BROKER, str(b))
            res.incremental_configs = [ConfigEntry(plan.LOG_DIR_THROTTLE, str(rate),
                                                   incremental_operation=AlterConfigOpType.SET)]
            self._alter([res], "setting the log dir throttle")

    def set_broker_throttles(self, brokers: list[int], rate: int) -> None:
        for b in brokers:  # one broker per request: each broker alters its own config
            res = ConfigResource(ConfigResource.Type.BROKER, str(b))
            res.incremental_configs = [
                ConfigEntry(name, str(rate), incremental_operation=AlterConfigOpType.SET)
                for name in (plan.LEADER_THROTTLED_RATE, plan.FOLLOWER_THROTTLED_RATE)
            ]
            self._alter([res], "setting the broker throttles")

    def _dynamic(self, res: ConfigResource, names: tuple[str, ...], source: ConfigSource) -> list[str]:
        """Which of ``names`` are set on ``res`` at its own level (only those are deleted: a
        broker refuses to delete a setting it does not know)."""
        fut = self.admin.describe_configs([res], request_timeout=self.timeout)[res]
        entries = cl.result(fut, self.timeout, what="config description")
        return [n for n in names if n in entries and cl.source_id(entries[n].source) == source.value]

    def _clear(self, resources: list[ConfigResource], names: tuple[str, ...], source: ConfigSource) -> list[str]:
        """Delete the throttle settings present on each resource; returns the failures (one
        unreachable broker does not keep the others' throttles in place)."""
        failures = []
        for res in resources:
            kind = "topic" if res.restype == ConfigResource.Type.TOPIC else "broker"
            try:
                present = self._dynamic(res, names, source)
                if present:
                    res.incremental_configs = [ConfigEntry(n, None, incremental_operation=AlterConfigOpType.DELETE)
                                               for n in present]
                    fut = self.admin.incremental_alter_configs([res], request_timeout=self.timeout)
                    cl.result(next(iter(fut.values())), self.timeout, what="config update")
            except CliError as e:
                failures.append(f"{kind} {res.name} ({e})")
        return failures

    def clear_throttles(self, topics: list[str]) -> None:
        brokers = sorted(self.md.brokers)
        print(f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} "
              f"{','.join(map(str, brokers))}", flush=True)
        failures = self._clear([ConfigResource(ConfigResource.Type.BROKER, str(b)) for b in brokers],
                               plan.BROKER_THROTTLE_CONFIGS, ConfigSource.DYNAMIC_BROKER_CONFIG)
        existing = [t for t in topics if t in self.md.topics]
        if existing:
            print(f"Clearing topic-level throttles on topic{'' if len(existing) == 1 else 's'} "
                  f"{','.join(existing)}", flush=True)
            failures += self._clear([ConfigResource(ConfigResource.Type.TOPIC, t) for t in existing],
                                    plan.TOPIC_THROTTLE_CONFIGS, ConfigSource.DYNAMIC_TOPIC_CONFIG)
        if failures:
            raise CliError("could not clear the throttles on " + "; ".join(failures))
