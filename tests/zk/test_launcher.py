"""`samsa zookeeper start`: the error paths (the happy path starts the suite's server)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from samsa.cli import zookeeper as zkcli
from samsa.cli.common import CliError
from tests.zk.conftest import ZooKeeperServer, launcher_cmd, write_zoo_cfg


def launch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(launcher_cmd(*args), capture_output=True, text=True, timeout=30)


def test_missing_config_is_one_line(tmp_path: Path) -> None:
    p = launch("start", str(tmp_path / "nope.cfg"))
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "does not exist" in lines[0], p.stderr
    assert p.stdout == ""


def test_help_and_usage() -> None:
    p = launch("--help")
    assert p.returncode == 0 and "start" in p.stdout
    p = launch("start")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1


def test_print_cmd(tmp_path: Path) -> None:
    cfg = write_zoo_cfg(tmp_path, 2181)
    p = launch("start", "--print-cmd", str(cfg))
    assert p.returncode == 0
    assert zkcli.MAIN_CLASS in p.stdout and "/usr/share/java/zookeeper.jar" in p.stdout
    assert not (tmp_path / "data").exists()  # writes nothing


@pytest.mark.parametrize(
    "text,message",
    [
        ("clientPort=2181\n", "has no dataDir"),
        ("dataDir=/etc/passwd/zk\nclientPort=2181\n", "is not a directory"),
        ("dataDir=/tmp/zk-x\nclientPort=http\n", "is not a port number"),
    ],
)
def test_bad_config(tmp_path: Path, text: str, message: str) -> None:
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text(text)
    with pytest.raises(CliError, match=message):
        zkcli.run(["start", str(cfg)])


def test_unwritable_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = write_zoo_cfg(tmp_path, 2181)
    monkeypatch.setattr(zkcli.os, "access", lambda *a: False)  # as a non-root user would see it
    with pytest.raises(CliError, match="is not writable"):
        zkcli.run(["start", str(cfg)])


def test_config_is_a_directory(tmp_path: Path) -> None:
    with pytest.raises(CliError, match="is a directory"):
        zkcli.run(["start", str(tmp_path)])


def test_no_zookeeper_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = write_zoo_cfg(tmp_path, 2181)
    monkeypatch.setattr(zkcli, "JAVA_DIR", tmp_path)
    with pytest.raises(CliError, match=r"not installed .*apt-get install zookeeper"):
        zkcli.run(["start", str(cfg)])


def test_no_java(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = write_zoo_cfg(tmp_path, 2181)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CliError, match="no java found"):
        zkcli.run(["start", str(cfg)])


def test_server_exits_143_on_sigterm(tmp_path: Path) -> None:
    from tests.zk.conftest import start_server

    server: ZooKeeperServer = start_server(tmp_path)
    assert server.stop() == 143  # the JVM's exit status after SIGTERM: the launcher exec'd it
