"""`samsa broker start CONFIG [--override key=value ...]`: run one broker in the foreground."""

from __future__ import annotations

import logging
import sys

from samsa.cli.common import ArgumentParser, CliError, parse_properties


def setup_logging(level: str = "INFO") -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)",
        stream=sys.stdout,
    )


def run(argv: list[str]) -> int:
    parser = ArgumentParser(prog="samsa broker", description="Run a Samsa broker.")
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="start a broker in the foreground; SIGTERM stops it cleanly")
    start.add_argument("config", help="server.properties file with Kafka's broker keys")
    start.add_argument("--override", action="append", metavar="KEY=VALUE", default=[],
                       help="set a config key, beating the file (repeatable)")
    start.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    start.add_argument("--request-log", action="store_true",
                       help="log every request as it arrives: API, version, client (Kafka's kafka.request.logger)")
    args = parser.parse_args(argv)

    from samsa.config import BrokerConfig, ConfigError

    try:
        config = BrokerConfig.from_file(args.config, parse_properties(args.override, "--override"))
    except ConfigError as e:
        raise CliError(str(e)) from None
    except OSError as e:
        raise CliError(f"cannot read config {args.config}: {e.strerror}") from None
    setup_logging(args.log_level)
    if args.request_log:
        logging.getLogger("samsa.request.logger").setLevel(logging.DEBUG)
    log = logging.getLogger("samsa.broker")
    for key in config.unknown_keys():
        log.warning("unknown config key %s is ignored", key)
    inert = config.without_effect()
    if inert:
        log.warning("Accepted, has no effect in Samsa: %s", ", ".join(inert))
    from samsa.protocol import record_walk

    if not record_walk.NATIVE:
        log.warning("The compiled record walker (samsa/protocol/_recwalk.c) is not built: Produce validation "
                    "walks records in Python, about 200x slower per record. Install a C compiler and run "
                    "scripts/install-deps.sh (or pip install -e .) again.")

    from samsa.metadata.store import StoreError
    from samsa.server.broker import run_broker

    try:
        return run_broker(config)
    except (OSError, StoreError, ConfigError) as e:
        raise CliError(f"broker failed to start: {e}") from None
