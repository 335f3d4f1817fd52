"""`samsa` command: dispatches to one module per tool, imported lazily so `--help` stays fast.

Each tool module exposes `run(argv: list[str]) -> int`. Errors a user can act on are raised as
`samsa.cli.common.CliError` and printed as one line with a non-zero exit, never a traceback.
"""

from __future__ import annotations

import importlib
import sys

TOOLS: dict[str, tuple[str, str]] = {
    "broker": ("samsa.cli.broker", "run a broker (samsa broker start CONFIG)"),
    "zookeeper": ("samsa.cli.zookeeper",
                  "run Debian's ZooKeeper server in the foreground (samsa zookeeper start ZOO_CFG)"),
    "topics": ("samsa.cli.topics", "create, list, describe, alter and delete topics"),
    "console-producer": ("samsa.cli.console_producer", "write lines from stdin to a topic"),
    "console-consumer": ("samsa.cli.console_consumer", "print records of a topic"),
    "consumer-groups": ("samsa.cli.consumer_groups", "list, describe, reset and delete consumer groups"),
    "configs": ("samsa.cli.configs", "describe and alter topic and broker configs"),
    "acls": ("samsa.cli.acls", "add, remove and list ACLs"),
    "transactions": ("samsa.cli.transactions",
                     "list and describe transactions and producers; find and abort hanging transactions"),
    "leader-election": ("samsa.cli.leader_election", "run preferred or unclean leader elections"),
    "reassign-partitions": ("samsa.cli.reassign_partitions",
                            "generate, execute, verify and cancel partition reassignments"),
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
    args = sys.argv[1:] if argv is None else argv
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
