"""Where the fault tests' processes run, and how one broker is cut off from ZooKeeper only.

Two placements, one interface (`place(i)` for the brokers, `zk_host`/`zk_wrap` for ZooKeeper,
`isolate(i)`/`heal(i)`):

- `NetnsFabric`: ZooKeeper and each broker in a network namespace of their own, each joined by
  a veth pair to one bridge, which lives in a namespace of its own too ("net"); the host
  namespace (the test itself: its clients, its kazoo) joins that bridge by one more veth pair,
  its only interface of the fabric, on the subnet 10.213.X.0/24:

      host sf<pid><k> 10.213.X.1 ══ veth ══ ns net: bridge br0 ─┬─ veth ── ns zk  10.213.X.2   ZooKeeper
                                                                ├─ veth ── ns b0  10.213.X.10  broker 0
                                                                └─ veth ── ns b1  10.213.X.11  broker 1 ...

  Everyone reaches everyone over the bridge (layer 2: no IP forwarding, and the host's own
  firewall or bridge-netfilter settings do not apply in the bridge's namespace). `isolate(i)`
  adds two /32 routes: in broker i's namespace, ZooKeeper's address through an `ifb` device,
  and in ZooKeeper's namespace, broker i's address through another. An ifb device discards every packet routed to it (it only forwards what tc
  redirected to it), so both directions go silent as in a real partition: connect() hangs,
  established connections stall (and resume if healed in time), nobody gets an error. Nothing
  else changes: broker i still reaches the clients and the other brokers, and ZooKeeper
  everyone else. `heal(i)` deletes the two routes.

- `Loopback`: everything on 127.0.0.1, started directly; needs no privilege and cannot isolate
  (`isolation_unavailable` says why, for a skip).

Why routes and an ifb device rather than a firewall rule: this machine (and CI, the same image)
has no iptables or nft binaries, its kernel has no tc drop action (act_gact), no netem and no
dummy interfaces; iproute2, namespaces, veth, bridge and ifb are there. A route is also the
narrowest possible cut (one address in one namespace) and needs no port matching. With the
`nftables` package installed, an `nft` drop rule in the broker's namespace would do the same.

Everything is named after the test process's pid (`samsa-faults-<pid><k>-*` namespaces, the
host's link `sf<pid><k>`) and removed by `close()`, also at interpreter exit; a later fabric
removes the leftovers of dead test processes (only those with no process inside: it never kills
anything it did not start).
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from tests.zk.conftest import launcher_cmd

NS_PREFIX = "samsa-faults-"
LINK_PREFIX = "sf"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if check and r.returncode != 0:
        raise OSError(f"`ip {' '.join(args)}` failed: {r.stderr.strip() or r.stdout.strip()}")
    return r


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Loopback:
    """Everything on 127.0.0.1; no isolation."""

    zk_host = "127.0.0.1"

    def __init__(self, reason: str) -> None:
        self.isolation_unavailable: str | None = reason
        self.zk_wrap: list[str] = []

    def place(self, i: int) -> tuple[str, list[str]]:
        return "127.0.0.1", []

    def describe(self) -> str:
        return f"loopback (no isolation: {self.isolation_unavailable})"

    def isolate(self, i: int) -> None:
        raise RuntimeError(f"cannot isolate a broker from ZooKeeper here: {self.isolation_unavailable}")

    def heal(self, i: int) -> None:
        pass

    def close(self) -> None:
        pass


class NetnsFabric:
    """ZooKeeper and `n` brokers in network namespaces of their own (see the module docstring)."""

    _made = 0

    def __init__(self, n: int) -> None:
        self.isolation_unavailable: str | None = None
        self.n = n
        pid = os.getpid()
        tag = f"{pid}{chr(ord('a') + NetnsFabric._made % 26)}"
        NetnsFabric._made += 1
        self.ns_base = f"{NS_PREFIX}{tag}-"
        self.host_link = f"{LINK_PREFIX}{tag}"  # the host's end; at most 2 + 7 + 1 characters (IFNAMSIZ 16)
        self.namespaces: list[str] = []
        self.links: list[str] = []
        self.isolated: set[int] = set()
        self._closed = False
        _remove_leftovers()
        atexit.register(self.close)
        try:
            self.subnet = _free_subnet()
            self._build()
        except BaseException:
            self.close()
            raise

    # --- addresses ------------------------------------------------------------------------------
    def _addr(self, last: int) -> str:
        return f"{self.subnet}.{last}"

    @property
    def host_addr(self) -> str:
        return self._addr(1)

    @property
    def zk_host(self) -> str:
        return self._addr(2)

    def broker_addr(self, i: int) -> str:
        return self._addr(10 + i)

    def ns(self, role: str) -> str:
        return self.ns_base + role

    @staticmethod
    def _wrap(ns: str) -> list[str]:
        # nsenter (without --fork) execs the command, so the child's pid is the broker's or
        # ZooKeeper's own: kill -9 and SIGSTOP reach it directly.
        if shutil.which("nsenter"):
            return ["nsenter", f"--net=/run/netns/{ns}", "--"]
        return ["ip", "netns", "exec", ns]

    @property
    def zk_wrap(self) -> list[str]:
        return self._wrap(self.ns("zk"))

    def place(self, i: int) -> tuple[str, list[str]]:
        return self.broker_addr(i), self._wrap(self.ns(f"b{i}"))

    def describe(self) -> str:
        return (f"network namespaces {self.ns_base}{{net,zk,b0..b{self.n - 1}}}, the host on {self.host_link} "
                f"({self.subnet}.0/24; ZooKeeper {self.zk_host}, brokers {self.broker_addr(0)}..)")

    # --- building and removing ------------------------------------------------------------------
    def _build(self) -> None:
        net = self.ns("net")
        _ip("netns", "add", net)
        self.namespaces.append(net)
        _ip("-n", net, "link", "add", "br0", "type", "bridge")
        _ip("-n", net, "link", "set", "br0", "up")
        _ip("link", "add", self.host_link, "type", "veth", "peer", "name", "host", "netns", net)
        self.links.append(self.host_link)
        _ip("-n", net, "link", "set", "host", "master", "br0")
        _ip("-n", net, "link", "set", "host", "up")
        _ip("addr", "add", f"{self.host_addr}/24", "dev", self.host_link)
        _ip("link", "set", self.host_link, "up")
        for role, last in [("zk", 2), *((f"b{i}", 10 + i) for i in range(self.n))]:
            ns = self.ns(role)
            _ip("netns", "add", ns)
            self.namespaces.append(ns)
            _ip("-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", role, "netns", net)
            _ip("-n", net, "link", "set", role, "master", "br0")
            _ip("-n", net, "link", "set", role, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "addr", "add", f"{self._addr(last)}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            # The sink isolated traffic is routed into (see the module docstring).
            _ip("-n", ns, "link", "add", "cut", "type", "ifb")
            _ip("-n", ns, "link", "set", "cut", "up")
        self._wait_reachable()

    def _wait_reachable(self, timeout: float = 10.0) -> None:
        """Until the host reaches each namespace (the bridge ports may take a moment to forward):
        a connect() to a closed port answers with a refusal once the path works."""
        deadline = time.monotonic() + timeout
        for addr in [self.zk_host, *(self.broker_addr(i) for i in range(self.n))]:
            while True:
                try:
                    with socket.create_connection((addr, 9), timeout=0.5):
                        break
                except ConnectionRefusedError:
                    break
                except OSError as e:
                    if time.monotonic() > deadline:
                        raise OSError(f"{addr} unreachable from the host over {self.host_link}: {e}") from e
                    time.sleep(0.05)  # polling the kernel: no event to await

    def close(self) -> None:
        """Remove the namespaces and links (idempotent). Processes still inside are the
        harness's own (it started them there): they are killed by pid first."""
        if self._closed:
            return
        self._closed = True
        for ns in self.namespaces:
            for pid in _ns_pids(ns):
                try:
                    os.kill(pid, signal.SIGCONT)
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            _ip("netns", "del", ns, check=False)
        for link in reversed(self.links):
            _ip("link", "del", link, check=False)
        self.namespaces.clear()
        self.links.clear()

    # --- the fault ------------------------------------------------------------------------------
    def isolate(self, i: int) -> None:
        """Cut broker i off from ZooKeeper, both ways; nothing else."""
        _ip("-n", self.ns(f"b{i}"), "route", "replace", f"{self.zk_host}/32", "dev", "cut")
        _ip("-n", self.ns("zk"), "route", "replace", f"{self.broker_addr(i)}/32", "dev", "cut")
        self.isolated.add(i)

    def heal(self, i: int) -> None:
        _ip("-n", self.ns(f"b{i}"), "route", "del", f"{self.zk_host}/32", "dev", "cut", check=False)
        _ip("-n", self.ns("zk"), "route", "del", f"{self.broker_addr(i)}/32", "dev", "cut", check=False)
        self.isolated.discard(i)


def _ns_pids(ns: str) -> list[int]:
    r = _ip("netns", "pids", ns, check=False)
    return [int(x) for x in r.stdout.split()] if r.returncode == 0 else []


def _free_subnet() -> str:
    """A 10.213.X prefix no interface or route of the host uses."""
    used = _ip("-o", "-4", "addr", "show").stdout + _ip("-4", "route", "show").stdout
    start = os.getpid() % 250
    for k in range(250):
        x = (start + k) % 250 + 1
        if f"10.213.{x}." not in used:
            return f"10.213.{x}"
    raise OSError("no free 10.213.X.0/24 subnet")


def _remove_leftovers() -> None:
    """Namespaces and links of fabrics whose test process died without closing them (kill -9 of
    pytest). A group that still has a process inside is left alone, and said so."""
    listed = _ip("netns", "list", check=False).stdout.split("\n")
    groups: dict[str, list[str]] = {}
    for line in listed:
        m = re.match(rf"({re.escape(NS_PREFIX)}(\d+)[a-z])-\S+", line.strip())
        if m and not _pid_alive(int(m.group(2))):
            groups.setdefault(m.group(1), []).append(m.group(0))
    for base, names in groups.items():
        busy = {ns: _ns_pids(ns) for ns in names}
        if any(busy.values()):
            print(f"fabric: leftover namespaces {names} still hold processes {busy}; not removed")
            continue
        for ns in names:
            _ip("netns", "del", ns, check=False)
        host_link = LINK_PREFIX + base[len(NS_PREFIX):]
        if _ip("link", "show", host_link, check=False).returncode == 0:
            _ip("link", "del", host_link, check=False)


def make_fabric(n: int) -> NetnsFabric | Loopback:
    """Namespaces if this process may make them, else loopback with the reason why not
    (`SAMSA_FAULTS_LOOPBACK=1` asks for loopback)."""
    if os.environ.get("SAMSA_FAULTS_LOOPBACK") == "1":
        return Loopback("SAMSA_FAULTS_LOOPBACK=1 asked for loopback")
    if os.geteuid() != 0:
        return Loopback("needs root (CAP_NET_ADMIN) to make network namespaces; running as uid "
                        f"{os.geteuid()}")
    if shutil.which("ip") is None:
        return Loopback("the `ip` command (iproute2) is not installed")
    try:
        return NetnsFabric(n)
    except OSError as e:
        return Loopback(f"could not build the network namespaces: {e}")


# --- ZooKeeper, placed in the fabric ---------------------------------------------------------


def zk_serving(host: str, port: int, timeout: float = 0.5) -> bool:
    """`srvr` answers with the server's mode once it serves sessions (see tests/zk/conftest.py)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(b"srvr")
            reply = b""
            while chunk := s.recv(4096):
                reply += chunk
            return b"Mode:" in reply
    except OSError:
        return False


class ZooKeeperProcess:
    """A real ZooKeeper of the fault run's own (a fault kills it), where the fabric puts it."""

    def __init__(self, workdir: Path, host: str, wrap: Sequence[str] = ()) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.host = host
        self.wrap = list(wrap)
        with socket.socket() as s:  # a free port (in a namespace of its own any port is)
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.cfg = workdir / "zoo.cfg"
        self.cfg.write_text(
            "tickTime=500\n"  # sessions may be as short as 1 s
            f"dataDir={workdir / 'data'}\n"
            f"clientPort={self.port}\n"
            f"clientPortAddress={host}\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,cons\n"
        )
        self.log_path = workdir / "zookeeper.out"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def hosts(self) -> str:
        return f"{self.host}:{self.port}"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 60.0) -> ZooKeeperProcess:
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen([*self.wrap, *launcher_cmd("start", str(self.cfg))], stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not zk_serving(self.host, self.port):
            if self.proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self.proc.returncode}: see {self.log_path}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"ZooKeeper not serving after {timeout} s: see {self.log_path}")
            time.sleep(0.02)  # polling its port: a separate process
        return self

    def connected_sessions(self) -> set[int]:
        """The ids of the sessions that have a live connection to the server right now (`cons`):
        a broker whose registration's session is not among them is still reconnecting, although
        its ephemeral node is still there. Raises OSError when the server does not answer."""
        with socket.create_connection((self.host, self.port), timeout=2) as s:
            s.settimeout(2)
            s.sendall(b"cons")
            reply = b""
            while chunk := s.recv(65536):
                reply += chunk
        return {int(sid, 16) for sid in re.findall(rb"sid=0x([0-9a-f]+)", reply)}

    def ensure_running(self) -> None:
        if not self.alive():
            self.start()

    def kill9(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
