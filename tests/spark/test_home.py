"""samsa.spark.home: Spark's Python workers import the installed PySpark, not pyspark.zip."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from samsa.spark.home import use_installed_pyspark


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    monkeypatch.delenv("SPARK_HOME", raising=False)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path


def test_mirror_has_sparks_files_but_no_pyspark_zip(clean_env):
    home = use_installed_pyspark("local[2]")
    assert home is not None and os.environ["SPARK_HOME"] == home
    assert Path(home).is_relative_to(clean_env / "cache")
    assert (Path(home) / "bin" / "spark-submit").is_file() and (Path(home) / "jars").is_dir()
    assert not (Path(home) / "python" / "lib" / "pyspark.zip").exists()
    del os.environ["SPARK_HOME"]
    assert use_installed_pyspark("local[*]") == home  # built once, reused


@pytest.mark.parametrize(
    "setting",
    [("SPARK_HOME", "/opt/spark"), ("PYSPARK_PYTHON", "/usr/bin/python3"), ("PYSPARK_GATEWAY_PORT", "4040")],
)
def test_leaves_spark_alone_when_unsure(clean_env, monkeypatch, setting):
    monkeypatch.setenv(*setting)
    assert use_installed_pyspark("local[2]") is None
    assert os.environ.get("SPARK_HOME") == (setting[1] if setting[0] == "SPARK_HOME" else None)


def test_leaves_spark_alone_for_a_cluster_master(clean_env):
    assert use_installed_pyspark("spark://127.0.0.1:7077") is None
    assert "SPARK_HOME" not in os.environ


def test_workers_of_the_test_session_import_the_installed_pyspark(spark):
    """The shared session was built after use_installed_pyspark(): an executor's Python worker
    finds PySpark in site-packages (compiled once), not in the zip Spark would put first."""

    def where(_):
        import pyspark

        yield pyspark.__file__

    found = spark.sparkContext.parallelize([0], 1).mapPartitions(where).collect()
    assert found and ".zip" not in found[0]
    assert Path(found[0]).parent == Path(__import__("pyspark").__file__).parent
