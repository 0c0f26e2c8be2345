"""Spark's Kafka connector of a pyspark version Maven cannot resolve: the error names the fix."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pyspark
import pytest

from streamstate._maven import MavenError
from streamstate.spark._session import TESTED_SPARK_VERSIONS, kafka_connector_jars

_NOWHERE = "4.0.99"


def test_an_unresolvable_connector_names_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A version no Maven repository has: resolving fails on every machine the same way (as
    # 4.3.0's does from the project's machines, whose registry lacks that connector).
    monkeypatch.setenv("STREAMSTATE_CACHE_DIR", str(tmp_path))
    with pytest.raises(MavenError) as info:
        kafka_connector_jars(_NOWHERE)
    text = str(info.value)
    assert f"spark-sql-kafka-0-10_2.13:{_NOWHERE}" in text  # Maven's own report comes first
    assert f"pip install 'pyspark=={TESTED_SPARK_VERSIONS[-1]}'" in text
    assert "settings.xml" in text and "spark.jars" in text
    assert not (tmp_path / "spark-kafka" / _NOWHERE / ".resolved").exists()


def test_the_installed_pyspark_is_one_ci_tests() -> None:
    # Each of the two venvs `make test` runs this suite in has one end of the range.
    assert pyspark.__version__ in TESTED_SPARK_VERSIONS


def test_the_spark_extra_is_the_range_between_the_tested_ends() -> None:
    # The installed package's metadata, built from pyproject.toml's extras: a range (so the extra
    # keeps a user's pyspark of that range instead of replacing it) from the oldest tested
    # version to the newest, and nothing beyond.
    requirements = importlib.metadata.requires("streamstate") or []
    specs = [r.split(";")[0].strip() for r in requirements if r.startswith("pyspark")]
    assert all("extra == 'spark'" in r for r in requirements if r.startswith("pyspark"))
    assert len(specs) == 1
    bounds = sorted(specs[0].removeprefix("pyspark").split(","))
    assert bounds == [f"<={TESTED_SPARK_VERSIONS[-1]}", f">={TESTED_SPARK_VERSIONS[0]}"]


def test_the_makefile_tests_the_newest_version() -> None:
    makefile = (Path(__file__).parents[2] / "Makefile").read_text()
    assert f"SPARK_NEWEST := {TESTED_SPARK_VERSIONS[-1]}\n" in makefile
