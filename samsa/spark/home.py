"""Python workers that start in a fraction of a second on a pip-installed PySpark.

Spark puts `$SPARK_HOME/python/lib/pyspark.zip` first on the path of every Python process it
starts. Python never caches compiled modules for a zip, so each such process compiles PySpark
from source as it imports it: measured here, 1.2-1.7 s more for every streaming query, whose
source runs in a fresh Python process (so does each foreachBatch query, and the worker daemon). With pip-installed
PySpark the zip holds exactly the package that is already installed, compiled, in site-packages.

`use_installed_pyspark()` points SPARK_HOME at a directory that mirrors the installed package
with links (the same jars, scripts and everything else) but has no pyspark.zip, so workers
import the installed PySpark. It changes nothing when it cannot be sure that is the same code:
SPARK_HOME already set (a Spark distribution, spark-submit), a JVM already running, a master
that is not local, or PYSPARK_PYTHON not naming this interpreter (workers could run another).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)


def _worker_is_this_interpreter() -> bool:
    worker = os.environ.get("PYSPARK_PYTHON")
    return worker is not None and os.path.abspath(worker) == os.path.abspath(sys.executable)


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "samsa" / "spark-home"


def _build(package: Path, target: Path) -> Path:
    """The mirror of `package` (pyspark's directory) at `target`, made atomically."""
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".building-", dir=target.parent))
    try:
        for entry in package.iterdir():
            if entry.name != "python":
                (work / entry.name).symlink_to(entry)
        lib = work / "python" / "lib"
        lib.mkdir(parents=True)
        shell = package / "python" / "pyspark"
        if shell.is_dir():
            (work / "python" / "pyspark").symlink_to(shell)
        if importlib.util.find_spec("py4j") is None:  # py4j is a pip dependency; keep its zip if absent
            for z in (package / "python" / "lib").glob("py4j-*.zip"):
                (lib / z.name).symlink_to(z)
        try:
            work.rename(target)
        except OSError:  # built meanwhile by another process
            shutil.rmtree(work, ignore_errors=True)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return target


def use_installed_pyspark(master: str | None = "local") -> str | None:
    """Before the first SparkSession of this process: make Spark's Python workers import the
    installed PySpark instead of recompiling pyspark.zip each time. Returns the SPARK_HOME it
    set, or None when it left things as they were."""
    if master is not None and not master.startswith("local"):
        return None
    if "SPARK_HOME" in os.environ or "PYSPARK_GATEWAY_PORT" in os.environ or not _worker_is_this_interpreter():
        return None
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        return None
    package = Path(spec.origin).parent
    if not (package / "python" / "lib" / "pyspark.zip").is_file() or not (package / "bin" / "spark-submit").is_file():
        return None
    try:
        version = importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    key = f"{version}-" + hashlib.sha256(str(package.resolve()).encode()).hexdigest()[:12]
    user = getattr(os, "getuid", lambda: "user")()
    for root in (_cache_root(), Path(tempfile.gettempdir()) / f"samsa-spark-home-{user}"):
        target = root / key
        try:
            home = target if (target / "bin" / "spark-submit").is_file() else _build(package, target)
        except OSError as e:
            log.debug("cannot prepare a Spark home under %s: %s", root, e)
            continue
        if (home / "bin" / "spark-submit").is_file() and (home / "jars").is_dir():
            os.environ["SPARK_HOME"] = str(home)
            return str(home)
    return None
