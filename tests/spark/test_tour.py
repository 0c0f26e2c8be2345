"""The tour (``streamstate demo``) on the real broker and Spark: it must find exact counts after
the crash, the restore from the changelog and the Spark restore, and fail when they differ."""

from __future__ import annotations

import pytest

from streamstate.cli.tour import TourResult, run_tour
from streamstate.kafka_local import KafkaTestCluster


def test_the_tour_restores_exact_counts_in_the_app_and_on_spark(
    kafka: KafkaTestCluster, spark, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_tour(kafka, spark, clicks=5_000)
    assert result.mismatches == []
    assert (result.clicks, result.counted_by_app, result.keys_restored) == (5_000, 5_000, 200)
    assert result.spark_restored == 5_000
    assert result.ok
    out = capsys.readouterr().out
    for step in (
        "1. producing",
        "2. running",
        "3. kill -9",
        "4. starting the app again",
        "5. restoring",
    ):
        assert step in out
    assert "100.0%" in out  # the restore progress bar reached the end


def test_a_tour_result_with_a_mismatch_is_not_ok() -> None:
    assert not TourResult(clicks=5, counted_by_app=5, mismatches=["differs"]).ok
    assert not TourResult(clicks=5, counted_by_app=4).ok
    assert TourResult(clicks=5, counted_by_app=5).ok
