"""`samsa zookeeper start ZOO_CFG`: run the real ZooKeeper server (Debian's package) in the foreground.

A thin launcher, the counterpart of `zkServer.sh start-foreground`: it checks the config enough
to turn the usual mistakes into one line (no java, no package, unreadable zoo.cfg, dataDir not
writable), then replaces itself (`os.execvp`) with

    java -Dzookeeper.root.logger=INFO,CONSOLE -cp <conf dir>:<zookeeper jars>
         org.apache.zookeeper.server.quorum.QuorumPeerMain ZOO_CFG

so SIGTERM/SIGINT go straight to the JVM and the exit status is ZooKeeper's (143 after SIGTERM).
Logs go to stdout; the launcher writes no file (ZooKeeper itself writes dataDir, as always).
Extra JVM flags come from `$JVMFLAGS`, as for zkServer.sh; `$JAVA_HOME/bin/java` or `java` on
PATH is used. Where Debian puts things: /usr/share/java/zookeeper.jar (its manifest lists the
dependencies), log4j 1.2 and the slf4j binding beside it, log4j.properties in
/etc/zookeeper/conf (read by zkServer.sh from /etc/zookeeper/conf/environment).
"""

from __future__ import annotations

import os
import shlex
import shutil
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


def build_parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="samsa zookeeper",
        description="Run Debian's ZooKeeper server in the foreground with a standard zoo.cfg "
        "(like zkServer.sh start-foreground). Stop it with SIGTERM or Ctrl-C.",
        epilog="Environment: JAVA_HOME (which java), JVMFLAGS (extra JVM options, e.g. -Xmx512m).",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    start = sub.add_parser("start", help="run the server in the foreground",
                           description="Run ZooKeeper in the foreground.")
    start.add_argument("config", metavar="ZOO_CFG", help="a standard zoo.cfg (dataDir, clientPort, ...)")
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


def _check_writable_dir(key: str, value: str, cfg: Path) -> None:
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


def run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.command != "start":
        build_parser().print_help()
        return 2
    config = Path(args.config).absolute()
    check_config(config)
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
