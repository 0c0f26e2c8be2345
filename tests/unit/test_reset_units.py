"""The reset tool's rules without a broker: Kafka's internal-topic rule
(``StreamsResetterTest.shouldDetermineInternalTopicBasedOnTopicName1`` and the application-id
prefix), the offset range check (``StreamsResetterTest``'s before/between/after cases), the
``--to-datetime``/``--by-duration``/``--from-file`` formats, the plan an operator reads, and
the command line's error contract (one line, exit != 0)."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from tests.unit.test_api_doc import cli_options, doc_text, documented_names, headings

import streamstate.tools
from streamstate.cli.reset import read_properties
from streamstate.tools import (
    ResetPlan,
    is_internal_topic,
    matches_internal_topic_format,
    parse_datetime,
    parse_duration,
    parse_reset_plan,
    reset_application,
)
from streamstate.tools.reset import PartitionReset, _check_offset_range


@pytest.mark.parametrize(
    "topic",
    [
        "appId-named-subscription-response-topic",
        "appId-named-subscription-registration-topic",
        "appId-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-12323232-topic",
        "appId-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-12323232-topic",
        "appId-KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog",
        "appId-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition",
    ],
)
def test_kafkas_internal_topic_formats(topic: str) -> None:
    assert matches_internal_topic_format(topic)
    assert is_internal_topic(topic, "appId")


@pytest.mark.parametrize(
    "topic",
    [
        "appId-output",
        "appId-changelog-archive",
        "appId-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-12x-topic",
        "appId-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE--topic",
    ],
)
def test_other_names_are_not_internal(topic: str) -> None:
    assert not matches_internal_topic_format(topic)
    assert not is_internal_topic(topic, "appId")


def test_an_internal_topic_needs_the_application_ids_prefix() -> None:
    assert not is_internal_topic("other-store-changelog", "appId")
    assert not is_internal_topic("appIdx-store-changelog", "appId")
    # The prefix is the application id and a dash: a topic named the id alone is no prefix.
    assert not is_internal_topic("appId-changelog", "appId-changelog")
    assert is_internal_topic("appId-store-changelog", "appId")


def test_a_user_topic_named_like_an_internal_one_is_not_internal() -> None:
    # KAFKA-7930: an input or intermediate topic given keeps its name's look to itself.
    assert not is_internal_topic("appId-in-changelog", "appId", user_topics=["appId-in-changelog"])


@pytest.mark.parametrize(
    ("offset", "beginning", "end", "expected"),
    [
        (2, 0, 4, 2),  # between
        (2, 3, 4, 3),  # before the beginning: the beginning
        (4, 0, 3, 3),  # after the end: the end
        (12, 5, 10, 10),
        (3, 3, 4, 3),
        (4, 0, 4, 4),  # at the end: the end, no note
    ],
)
def test_the_offset_range_check(offset: int, beginning: int, end: int, expected: int) -> None:
    assert _check_offset_range(offset, beginning, end)[0] == expected


def test_the_range_check_says_why_it_moved_an_offset() -> None:
    assert _check_offset_range(12, 5, 10)[1] == "12 is beyond the latest offset 10"
    assert _check_offset_range(1, 5, 10)[1] == "1 is before the earliest offset 5"
    assert _check_offset_range(7, 5, 10)[1] is None


def test_datetimes_without_a_zone_are_utc_as_in_kafka() -> None:
    assert parse_datetime("2023-11-14T22:13:20.000") == 1_700_000_000_000
    assert parse_datetime("2023-11-14T22:13:20.500Z") == 1_700_000_000_500
    assert parse_datetime("2023-11-14T23:13:20.000+01:00") == 1_700_000_000_000
    assert parse_datetime("2023-11-14T22:13:20") == 1_700_000_000_000


@pytest.mark.parametrize("text", ["2023-11-14", "yesterday", "2023-11-14T25:00:00.000", "T"])
def test_malformed_datetimes_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="--to-datetime takes an ISO-8601 date and time"):
        parse_datetime(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("P1D", timedelta(days=1)),
        ("PT1H30M", timedelta(hours=1, minutes=30)),
        ("PT0.5S", timedelta(milliseconds=500)),
        ("P2DT3H4M5.000000006S", timedelta(days=2, hours=3, minutes=4, seconds=5)),
        ("-PT10M", timedelta(minutes=-10)),
        ("pt15m", timedelta(minutes=15)),
        ("PT-1.5S", timedelta(seconds=-1.5)),
    ],
)
def test_durations_in_javas_format(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["P", "PT", "1H", "P1H", "PT1D", "P1W", "", "PT1.S5"])
def test_malformed_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"--by-duration takes a duration as PnDTnHnMn\.nS"):
        parse_duration(text)


def test_a_reset_plan_file() -> None:
    assert parse_reset_plan("orders,0,5\norders,1,7\n\nclicks,0,0\n") == {
        ("orders", 0): 5,
        ("orders", 1): 7,
        ("clicks", 0): 0,
    }
    with pytest.raises(ValueError, match="empty"):
        parse_reset_plan("  \n")
    with pytest.raises(ValueError, match="line 2 of the reset plan is not TOPIC,PARTITION,OFFSET"):
        parse_reset_plan("orders,0,5\norders,one,7\n")
    with pytest.raises(ValueError, match="line 1"):
        parse_reset_plan("orders,0\n")


def test_the_plan_reads_as_a_list_of_actions(tmp_path: Path) -> None:
    plan = ResetPlan(
        application_id="app",
        position="offset 3",
        dry_run=True,
        inputs=(PartitionReset("in", 0, 8, 3), PartitionReset("in", 1, None, 2, "a note")),
        intermediates=(PartitionReset("mid", 0, 1, 9),),
        internal_topics=("app-s-changelog",),
        state_dir=tmp_path,
    )
    lines = plan.lines()
    assert lines[0].startswith("Dry run")
    assert "Input topics: would reset offsets to offset 3" in lines
    assert "  in partition 0: 8 -> 3" in lines
    assert "  in partition 1: (none) -> 2  (a note)" in lines
    assert "Intermediate topics: would seek to end" in lines
    assert "Internal topics (inferred): would delete" in lines
    assert "  app-s-changelog" in lines
    assert f"Local state: would delete {tmp_path}" in lines
    plan.state_dir = tmp_path / "missing"
    assert f"Local state: none under {tmp_path / 'missing'}" in plan.lines()
    assert plan.offsets == {("in", 0): 3, ("in", 1): 2, ("mid", 0): 9}


def test_arguments_are_checked_before_any_request() -> None:
    # Port 1: nothing listens; each refusal comes before the first connection attempt.
    with pytest.raises(ValueError, match="choose one reset position"):
        reset_application("127.0.0.1:1", "app", to_latest=True, to_offset=3)
    with pytest.raises(ValueError, match="application id is required"):
        reset_application("127.0.0.1:1", "")
    with pytest.raises(ValueError, match="both input and intermediate"):
        reset_application("127.0.0.1:1", "app", input_topics=["a"], intermediate_topics=["a"])
    with pytest.raises(ValueError, match="cannot read the reset plan"):
        reset_application("127.0.0.1:1", "app", from_file="/no/such/plan.csv")


def test_a_properties_file(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text("# comment\n! also\nsecurity.protocol=SSL\nssl.ca.location : /ca.pem\n\n")
    assert read_properties(str(path)) == {
        "security.protocol": "SSL",
        "ssl.ca.location": "/ca.pem",
    }
    path.write_text("oops\n")
    with pytest.raises(ValueError, match="line 1"):
        read_properties(str(path))


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streamstate", "reset", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_the_command_lists_kafkas_options() -> None:
    out = run("--help")
    assert out.returncode == 0
    for option in (
        "--application-id",
        "--bootstrap-server",
        "--input-topics",
        "--intermediate-topics",
        "--internal-topics",
        "--to-earliest",
        "--to-latest",
        "--to-offset",
        "--to-datetime",
        "--by-duration",
        "--shift-by",
        "--from-file",
        "--command-config",
        "--force",
        "--dry-run",
        "--state-dir",
    ):
        assert option in out.stdout, option


def test_a_missing_application_id_is_a_usage_error() -> None:
    out = run("--bootstrap-server", "127.0.0.1:1")
    assert out.returncode == 2
    assert "--application-id" in out.stderr.splitlines()[-1]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--to-latest", "--to-offset", "3"), "not allowed with argument"),
        (("--to-datetime", "yesterday"), "--to-datetime takes an ISO-8601"),
        (("--by-duration", "1h"), "--by-duration takes a duration"),
        (("--to-offset", "x"), "invalid int value"),
        (("--input-topics", ","), "expected topic names"),
    ],
)
def test_bad_options_are_usage_errors(args: tuple[str, ...], says: str) -> None:
    out = run("--application-id", "app", "--bootstrap-server", "127.0.0.1:1", *args)
    assert out.returncode == 2
    assert says in out.stderr.splitlines()[-1]


def test_an_unreachable_broker_is_one_line(tmp_path: Path) -> None:
    out = run("--application-id", "app", "--bootstrap-server", "127.0.0.1:1", "--timeout", "2")
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("streamstate: error: no Kafka broker answered at 127.0.0.1:1")
    assert out.stdout == ""


def test_a_missing_config_file_is_one_line() -> None:
    out = run("--application-id", "app", "--command-config", "/no/such/file.properties")
    assert out.returncode == 1
    assert out.stderr.strip() == (
        "streamstate: error: cannot read the config file '/no/such/file.properties': "
        "No such file or directory"
    )


def test_the_reference_documents_the_command_and_the_library() -> None:
    # What test_api_doc checks for the commands and modules it lists, for this one.
    text = doc_text()
    assert any("`streamstate reset`" in line for line in headings(text))
    assert any("`streamstate.tools`" in line for line in headings(text))
    missing = sorted(
        o for o in cli_options(["reset"]) if f"`{o}" not in text and f" {o}" not in text
    )
    assert not missing, f"options of `streamstate reset` not in docs/api.md: {missing}"
    documented = documented_names(text)
    assert [n for n in streamstate.tools.__all__ if n not in documented] == []


def test_a_setting_librdkafka_does_not_know_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text("sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule\n")
    out = run("--application-id", "app", "--command-config", str(config))
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("streamstate: error: invalid client settings:")
    assert "JAAS configuration is not supported" in lines[0]
