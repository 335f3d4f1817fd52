"""`samsa` command: dispatches to one module per tool, imported lazily so `--help` stays fast.

Each tool module exposes `run(argv: list[str]) -> int`. Errors a user can act on are raised as
`samsa.cli.common.CliError` and printed as one line with a non-zero exit, never a traceback.

A tool whose stdout is closed under it (`samsa topics --describe | head -1`) stops quietly: no
traceback, no error line, exit status 0 (`CLOSED_STDOUT_EXIT`), as Kafka's `kafka-*.sh` tools
end when their reader goes away. kafka-console-consumer.sh's own two stderr lines ("Unable to
write to standard out, closing consumer.", "Processed a total of N messages") are kept, as
Kafka's tool prints them.
"""

from __future__ import annotations

import importlib
import sys

# The exit status of a tool whose reader closed its stdout: 0, as Kafka's tools (not 141, 128 +
# SIGPIPE, as `seq` or `cat` killed by the signal), so that `set -o pipefail` scripts with a
# `| head` go on as they do with Kafka's.
CLOSED_STDOUT_EXIT = 0

TOOLS: dict[str, tuple[str, str]] = {
    "broker": ("samsa.cli.broker", "run a broker (samsa broker start CONFIG)"),
    "zookeeper": ("samsa.cli.zookeeper",
                  "run Debian's ZooKeeper server in the foreground (samsa zookeeper start [ZOO_CFG] [--port P])"),
    "cluster": ("samsa.cli.cluster", "run ZooKeeper and N brokers on this machine (samsa cluster start 3)"),
    "topics": ("samsa.cli.topics", "create, list, describe, alter and delete topics"),
    "console-producer": ("samsa.cli.console_producer", "write lines from stdin to a topic"),
    "console-consumer": ("samsa.cli.console_consumer", "print records of a topic"),
    "consumer-groups": ("samsa.cli.consumer_groups", "list, describe, reset and delete consumer groups"),
    "configs": ("samsa.cli.configs", "describe and alter topic and broker configs"),
    "delete-records": ("samsa.cli.delete_records", "delete records below given offsets (kafka-delete-records.sh)"),
    "dump-log": ("samsa.cli.dump_log", "print the contents of log segment and index files (kafka-dump-log.sh)"),
    "get-offsets": ("samsa.cli.get_offsets", "print partitions' offsets by time (kafka-get-offsets.sh)"),
    "acls": ("samsa.cli.acls", "add, remove and list ACLs"),
    "transactions": ("samsa.cli.transactions",
                     "list and describe transactions and producers; find and abort hanging transactions"),
    "leader-election": ("samsa.cli.leader_election", "run preferred or unclean leader elections"),
    "reassign-partitions": ("samsa.cli.reassign_partitions",
                            "generate, execute, verify and cancel partition reassignments"),
    "log-dirs": ("samsa.cli.log_dirs", "describe the brokers' log dirs, and the log cleaner's state"),
    "perf": ("samsa.cli.perf", "producer and consumer performance tests"),
    "dashboard": ("samsa.cli.dashboard", "serve the realtime pipeline's live web dashboard"),
    "ingest": ("samsa.cli.ingest", "feed the pipeline: simulated sensors, the pollution API, log files"),
    "demo": ("samsa.cli.demo", "run the whole pipeline: broker, sensors, Spark job, dashboard"),
    "pipeline": ("samsa.cli.pipeline", "the data pipeline's Spark job (run) and SQL over its results (query)"),
}


def _usage() -> str:
    width = max(len(n) for n in TOOLS)
    lines = ["usage: samsa TOOL [ARGS ...]", "", "tools:"]
    lines += [f"  {name.ljust(width)}  {desc}" for name, (_, desc) in TOOLS.items()]
    lines += ["", "Run `samsa TOOL --help` for a tool's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from samsa.cli.common import discard_stdout, stdout_closed

    try:
        try:
            code = _run(sys.argv[1:] if argv is None else argv)
        except SystemExit:  # argparse's --help and errors
            sys.stdout.flush()
            raise
        sys.stdout.flush()  # here, not at exit, so that a closed pipe is seen (and forgiven) below
        return code
    except BrokenPipeError:
        if not stdout_closed():
            raise
        # `samsa TOOL ... | head -1`: whoever read our output has had enough. Stop without a word,
        # as Kafka's tools do (Java's System.out swallows the error).
        discard_stdout()
        return CLOSED_STDOUT_EXIT


def _run(args: list[str]) -> int:
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    if args[0] in ("-V", "--version"):
        from samsa import __version__

        print(f"samsa {__version__}")
        return 0
    name = args[0]
    if name not in TOOLS:
        print(f"samsa: unknown tool {name!r}; run `samsa --help` for the list", file=sys.stderr)
        return 2
    from samsa.cli.common import CliError

    module = importlib.import_module(TOOLS[name][0])
    try:
        return int(module.run(args[1:]) or 0)
    except CliError as e:
        print(f"samsa {name}: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
