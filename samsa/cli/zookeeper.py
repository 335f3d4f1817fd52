"""`samsa zookeeper start [ZOO_CFG] [--port P] [--data-dir D]`: run the real ZooKeeper server
(Debian's package) in the foreground.

A thin launcher, the counterpart of `zkServer.sh start-foreground`: it checks the config enough
to turn the usual mistakes into one line (no java, no package, unreadable zoo.cfg, dataDir not
writable, clientPort taken: the address is named), then replaces itself (`os.execvp`) with

    java -Dzookeeper.root.logger=INFO,CONSOLE -cp <conf dir>:<zookeeper jars>
         org.apache.zookeeper.server.quorum.QuorumPeerMain ZOO_CFG

so SIGTERM/SIGINT go straight to the JVM and the exit status is ZooKeeper's (143 after SIGTERM).
Logs go to stdout. Given a zoo.cfg alone, the launcher writes no file (ZooKeeper itself writes
dataDir, as always). `--port`, `--host` and `--data-dir` set clientPort, clientPortAddress and
dataDir over the file's (or, without a file, over a one-server config: the one below,
`STANDALONE`); ZooKeeper then reads the result, written as `<dataDir>/zoo.cfg`.
Extra JVM flags come from `$JVMFLAGS`, as for zkServer.sh; `$JAVA_HOME/bin/java` or `java` on
PATH is used. Where Debian puts things: /usr/share/java/zookeeper.jar (its manifest lists the
dependencies), log4j 1.2 and the slf4j binding beside it, log4j.properties in
/etc/zookeeper/conf (read by zkServer.sh from /etc/zookeeper/conf/environment).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import socket
import sys
from pathlib import Path

from samsa.cli.common import ArgumentParser, CliError

MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
JAVA_DIR = Path("/usr/share/java")
ZK_JAR = "zookeeper.jar"
# zookeeper.jar's manifest names slf4j-api but no binding; these make it log (as zkServer.sh does).
LOG_JARS = ("slf4j-log4j12.jar", "log4j-1.2.jar")
CONF_DIRS = (Path("/etc/zookeeper/conf"), Path("/etc/zookeeper/conf_example"))
INSTALL_HINT = "install it with `apt-get install zookeeper`"
DEFAULT_PORT = 2181
# A one-server ZooKeeper for a cluster on one machine (`samsa zookeeper start --data-dir D`):
# ZooKeeper's sample config, on the loopback, its admin web server off, and the two four-letter
# words a script may ask to see whether it serves.
STANDALONE = {
    "tickTime": "2000",
    "clientPort": str(DEFAULT_PORT),
    "clientPortAddress": "127.0.0.1",
    "admin.enableServer": "false",
    "4lw.commands.whitelist": "ruok,srvr",
}


def build_parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="samsa zookeeper",
        description="Run Debian's ZooKeeper server in the foreground with a standard zoo.cfg "
        "(like zkServer.sh start-foreground). Stop it with SIGTERM or Ctrl-C.",
        epilog="Environment: JAVA_HOME (which java), JVMFLAGS (extra JVM options, e.g. -Xmx512m).",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    start = sub.add_parser("start", help="run the server in the foreground",
                           description="Run ZooKeeper in the foreground, from a zoo.cfg, from options, or "
                           "both (the options win).",
                           epilog="e.g. samsa zookeeper start --data-dir data/zookeeper --port 2181")
    start.add_argument("config", metavar="ZOO_CFG", nargs="?",
                       help="a standard zoo.cfg (dataDir, clientPort, ...); without it, a one-server config on "
                       "127.0.0.1 and --data-dir")
    start.add_argument("--port", type=int, metavar="PORT",
                       help=f"the client port (clientPort; default: the file's, else {DEFAULT_PORT})")
    start.add_argument("--host", metavar="ADDRESS",
                       help="the address to listen on (clientPortAddress; default: the file's, else 127.0.0.1)")
    start.add_argument("--data-dir", metavar="DIR",
                       help="where ZooKeeper keeps its data (dataDir; default: the file's; required without one)")
    start.add_argument(
        "--print-cmd", action="store_true", help="print the java command line instead of running it"
    )
    return p


def read_zoo_cfg(path: Path) -> dict[str, str]:
    """The keys of a zoo.cfg (a Java properties file: `key=value`, `#` comments)."""
    if not path.exists():
        raise CliError(f"config file {path} does not exist")
    if path.is_dir():
        raise CliError(f"config file {path} is a directory")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise CliError(f"config file {path} is unreadable: {getattr(e, 'strerror', None) or e}") from None
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            key, _, value = line.partition(" ")
        out[key.strip()] = value.strip()
    return out


def _check_writable_dir(key: str, value: str, cfg: Path | str) -> None:
    d = Path(value)
    if not d.is_absolute():
        d = Path.cwd() / d
    probe = d
    while not probe.exists():  # ZooKeeper creates a missing dataDir; its nearest ancestor must allow it
        probe = probe.parent
    if not probe.is_dir():
        raise CliError(f"{key} {d} in {cfg} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise CliError(f"{key} {d} in {cfg} is not writable")


def check_config(path: Path) -> dict[str, str]:
    props = read_zoo_cfg(path)
    if not props.get("dataDir"):
        raise CliError(f"config file {path} has no dataDir")
    _check_writable_dir("dataDir", props["dataDir"], path)
    if props.get("dataLogDir"):
        _check_writable_dir("dataLogDir", props["dataLogDir"], path)
    port = props.get("clientPort")
    if port is not None and not (port.isdigit() and 0 < int(port) < 65536):
        raise CliError(f"clientPort {port!r} in {path} is not a port number")
    return props


def find_java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home, "bin", "java"), os.X_OK):
        return str(Path(home, "bin", "java"))
    java = shutil.which("java")
    if java is None:
        raise CliError("no java found (set JAVA_HOME or put java on PATH; "
                       "Debian: apt-get install default-jre-headless)")
    return java


def classpath(java_dir: Path | None = None) -> str:
    java_dir = JAVA_DIR if java_dir is None else java_dir
    jar = java_dir / ZK_JAR
    if not jar.exists():
        raise CliError(f"ZooKeeper is not installed ({jar} is missing); {INSTALL_HINT}")
    parts = [str(d) for d in CONF_DIRS if (d / "log4j.properties").exists()][:1]
    parts.append(str(jar))
    parts += [str(java_dir / j) for j in LOG_JARS if (java_dir / j).exists()]
    return ":".join(parts)


def command(config: Path) -> list[str]:
    flags = shlex.split(os.environ.get("JVMFLAGS", ""))
    return [
        find_java(),
        "-Dzookeeper.root.logger=INFO,CONSOLE",
        *flags,
        "-cp",
        classpath(),
        MAIN_CLASS,
        str(config),
    ]


def check_port(props: dict[str, str], where: str) -> None:
    """A clientPort something else listens on, named, before the JVM starts (ZooKeeper's own
    BindException says neither which address nor what to do)."""
    host = props.get("clientPortAddress") or "0.0.0.0"
    port = int(props.get("clientPort") or DEFAULT_PORT)
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as ZooKeeper binds
        try:
            s.bind((host, port))
        except OSError as e:
            raise CliError(f"ZooKeeper cannot listen on {host}:{port} ({where}): {e.strerror}; stop what "
                           "listens there or choose another port (--port)") from None


def effective_config(args: argparse.Namespace) -> tuple[Path, dict[str, str], str]:
    """The zoo.cfg ZooKeeper is to read, its keys, and where its clientPort came from: the file
    as it is, or (with --port/--host/--data-dir) the file's keys or STANDALONE's with the
    options over them, written as <dataDir>/zoo.cfg."""
    if args.port is not None and not 0 < args.port < 65536:
        raise CliError(f"--port must be between 1 and 65535, got {args.port}", exit_code=2)
    overrides = {k: v for k, v in (("clientPort", None if args.port is None else str(args.port)),
                                   ("clientPortAddress", args.host),
                                   ("dataDir", None if args.data_dir is None else str(Path(args.data_dir).absolute())))
                 if v is not None}
    if args.config is None and args.data_dir is None:
        raise CliError("give a zoo.cfg or --data-dir DIR (e.g. samsa zookeeper start --data-dir data/zookeeper)",
                       exit_code=2)
    config = None if args.config is None else Path(args.config).absolute()
    if config is not None and not overrides:
        return config, check_config(config), f"clientPort in {config}"
    props = dict(STANDALONE) if config is None else read_zoo_cfg(config)
    props.update(overrides)
    if not props.get("dataDir"):
        raise CliError(f"config file {config} has no dataDir: give --data-dir")
    data_dir = Path(props["dataDir"])
    out = (data_dir if data_dir.is_absolute() else Path.cwd() / data_dir) / "zoo.cfg"
    if config is not None and out == config:
        raise CliError(f"{config} is where the options' config would be written: pass another --data-dir")
    where = "--port" if args.port is not None else "clientPort in " + str(config) if config else "the default"
    _check_writable_dir("dataDir", props["dataDir"], "--data-dir" if args.data_dir is not None else str(config))
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("# written by samsa zookeeper start from "
                       + (f"{config} and " if config else "") + "its options\n"
                       + "".join(f"{k}={v}\n" for k, v in props.items()))
    except OSError as e:
        raise CliError(f"cannot write {out}: {e.strerror or e}") from None
    return out, check_config(out), where


def run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.command != "start":
        build_parser().print_help()
        return 2
    config, props, where = effective_config(args)
    if not args.print_cmd:
        check_port(props, where)
    cmd = command(config)
    if args.print_cmd:
        print(shlex.join(cmd))
        return 0
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvp(cmd[0], cmd)
    except OSError as e:
        raise CliError(f"cannot run {cmd[0]}: {e.strerror}") from None
    return 1  # not reached


def main(argv: list[str] | None = None) -> int:
    try:
        return run(sys.argv[1:] if argv is None else argv)
    except CliError as e:
        print(f"samsa zookeeper: error: {e}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":
    sys.exit(main())
