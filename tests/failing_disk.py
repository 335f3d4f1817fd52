"""A disk that fails for real: an ext4 file system on a loop device, which a test shuts down
with the EXT4_IOC_SHUTDOWN ioctl (xfstests' "godown"). From then on every read, write, fsync
and open under it fails with EIO, as on a dying disk, in every process.

Needs root (mount, losetup, the ioctl) and mkfs.ext4: a machine that cannot gives a clear
failure, not a skip."""

from __future__ import annotations

import fcntl
import os
import shutil
import struct
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

EXT4_IOC_SHUTDOWN = 0x8004587D  # _IOR('X', 125, __u32)
EXT4_GOING_FLAGS_NOLOGFLUSH = 2


class FailingDisk:
    def __init__(self, mountpoint: Path) -> None:
        self.path = mountpoint

    def fail(self) -> None:
        """Shut the file system down: EIO from now on."""
        fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN, struct.pack("I", EXT4_GOING_FLAGS_NOLOGFLUSH))
        finally:
            os.close(fd)


def _run(*cmd: str) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"a failing-disk test needs `{' '.join(cmd)}` (root, loop devices): {r.stderr.strip()}"
    return r.stdout.strip()


@contextmanager
def failing_disk(workdir: Path, size_mb: int = 64) -> Iterator[FailingDisk]:
    assert shutil.which("mkfs.ext4") and shutil.which("losetup"), "a failing-disk test needs e2fsprogs and losetup"
    image = workdir / "disk.img"
    mountpoint = workdir / "disk"
    mountpoint.mkdir(parents=True)
    with open(image, "wb") as f:
        f.truncate(size_mb << 20)
    _run("mkfs.ext4", "-q", "-F", str(image))
    loop = _run("losetup", "-f", "--show", str(image))
    try:
        _run("mount", loop, str(mountpoint))
        try:
            yield FailingDisk(mountpoint)
        finally:
            subprocess.run(["umount", "-l", str(mountpoint)], capture_output=True)
    finally:
        subprocess.run(["losetup", "-d", loop], capture_output=True)
