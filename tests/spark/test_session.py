"""``local_session``: the shuffle partitions are the user's (issue "Spark at production scale",
point 7): a streaming query's stateful operator keeps the count its checkpoint started with, so
``local_session`` must not pick one behind the user's back."""

from __future__ import annotations

from typing import Any

import pytest

from streamstate.spark import local_session

_KEY = "spark.sql.shuffle.partitions"


def test_local_session_leaves_the_shuffle_partitions_to_the_user(spark: Any) -> None:
    # local_session hands back the running session (getOrCreate), applying the SQL settings it
    # is given to it: without shuffle_partitions it must apply none.
    before = spark.conf.get(_KEY)
    try:
        spark.conf.set(_KEY, "5")
        assert local_session(app_name="streamstate-tests") is spark
        assert spark.conf.get(_KEY) == "5"
        local_session(app_name="streamstate-tests", extra_conf={_KEY: "4"})
        assert spark.conf.get(_KEY) == "4"
        local_session(app_name="streamstate-tests", shuffle_partitions=3)
        assert spark.conf.get(_KEY) == "3"
    finally:
        spark.conf.set(_KEY, before)


def test_a_shuffle_partition_count_under_one_is_refused() -> None:
    with pytest.raises(ValueError, match="shuffle_partitions must be at least 1, not 0"):
        local_session(shuffle_partitions=0)
