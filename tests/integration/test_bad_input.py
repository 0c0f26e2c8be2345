"""The bad-input table of ``docs/bad-input.md``, row by row: the ``streamstate`` command run as a
subprocess with bad arguments, bad configs (in the app file ``run`` executes) and bad records.

Each row asserts what the table promises: exit status ≠ 0 (2 for a usage error, as argparse
gives), exactly one ``error:`` line on stderr and no traceback (a usage error also prints its
usage lines, and ``streamstate run`` logs the app's progress through ``logging``: those lines
are allowed, a raw librdkafka line or any other line is not), the expected words in that line,
and nothing created: no state directory where none was (``run`` leaves only what Kafka Streams'
constructor creates: the lock and the process id file) and no topic on the broker. Rows marked
``broker`` run against the session's real broker; "unreachable" is a dead address.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

from streamstate.testing import KafkaTestCluster

DEAD = "127.0.0.1:1"  # nothing listens on port 1: connection refused at once

APP = """\
import json, os
from streamstate import StreamsApp, Topology
from streamstate.serde import LongDeserializer
topology = Topology()
topology.add_store("counts")
@topology.processor(
    sources=[os.environ["BAD_INPUT_TOPIC"]],
    stores=["counts"],
    value_deserializer=LongDeserializer(),
)
def count(ctx, record):
    ctx.store("counts").put(record.key or b"", b"%d" % record.value)
config = {
    "application.id": os.environ["BAD_INPUT_APP_ID"],
    "bootstrap.servers": os.environ["STREAMSTATE_BOOTSTRAP_SERVERS"],
    "state.dir": os.environ["STREAMSTATE_STATE_DIR"],
    "session.timeout.ms": 6000,
}
config.update(json.loads(os.environ.get("BAD_INPUT_CONFIG", "{}")))
app = StreamsApp(topology, config)
"""


@dataclass(frozen=True)
class Row:
    """One row of the table: the arguments (``{state}``, ``{file}``, ``{app}``, ``{broker}``,
    ``{topic}``, ``{readonly}`` filled in), the words the error line must hold, and what the
    row needs."""

    argv: list[str]
    says: str
    usage: bool = False  # an argparse usage error: exit 2, usage lines allowed
    broker: bool = False  # needs the real broker (and checks that no topic appears)
    config: dict[str, object] = field(default_factory=dict)
    app_source: str = APP
    bad_record: bool = False  # the input topic holds a value LongDeserializer refuses
    topic_exists: bool = True
    timeout: float = 120.0
    # Only waits out the command's own timeout (a dead address: librdkafka retries until then):
    # started when the module starts, beside the other rows (see ``started_early``).
    waits: bool = False


RUN = ["run", "{app}", "--bootstrap-servers", "{broker}", "--state-dir", "{state}"]
RESTORE = ["restore", "--bootstrap-servers", "{broker}", "--topic", "{topic}"]

ROWS: dict[str, Row] = {
    # the command itself
    "no command": Row([], "required: command", usage=True),
    "unknown command": Row(["bogus"], "invalid choice: 'bogus'", usage=True),
    # kafka
    "kafka: no action": Row(["kafka"], "required: {{start,stop,status}}", usage=True),
    "kafka start: --timeout not a number": Row(
        ["kafka", "start", "--timeout", "soon"], "invalid float value: 'soon'", usage=True
    ),
    "kafka start: --instance-dir is a file": Row(
        ["kafka", "start", "--instance-dir", "{file}"], "is a file, not a directory"
    ),
    # restore
    "restore: --bootstrap-servers missing": Row(
        ["restore", "--topic", "t", "--state-dir", "{state}"],
        "required: --bootstrap-servers",
        usage=True,
    ),
    "restore: --partitions not numbers": Row(
        [*RESTORE, "--state-dir", "{state}", "--partitions", "a,b"],
        "--partitions takes partition numbers",
        usage=True,
    ),
    "restore: --partitions negative": Row(
        [*RESTORE, "--state-dir", "{state}", "--partitions", "-1"],
        "partitions >= 0",
        usage=True,
    ),
    "restore: --parallelism not a number": Row(
        [*RESTORE, "--state-dir", "{state}", "--parallelism", "many"],
        "invalid int value: 'many'",
        usage=True,
    ),
    "restore: --parallelism 0": Row(
        [*RESTORE, "--state-dir", "{state}", "--parallelism", "0"],
        "--parallelism needs a number >= 1",
        usage=True,
    ),
    "restore: unreachable broker": Row(
        ["restore", "--bootstrap-servers", DEAD, "--topic", "t", "--state-dir", "{state}"],
        "could not read the metadata of topic 't' from 127.0.0.1:1",
        waits=True,
    ),
    "restore: unknown topic": Row(
        [*RESTORE, "--state-dir", "{state}"], "does not exist", broker=True, topic_exists=False
    ),
    "restore: state dir is a file": Row(
        [*RESTORE, "--state-dir", "{file}"], "is a file, not a directory", broker=True
    ),
    "restore: state dir read-only": Row(
        [*RESTORE, "--state-dir", "{readonly}"], "{readonly_parent}", broker=True
    ),
    # query
    "query: --store missing": Row(
        ["query", "--state-dir", "{state}", "--all"], "required: --store", usage=True
    ),
    "query: --key and --all": Row(
        ["query", "--state-dir", "{state}", "--store", "s", "--key", "k", "--all"],
        "not allowed with argument",
        usage=True,
    ),
    "query: --partition not a number": Row(
        ["query", "--state-dir", "{state}", "--store", "s", "--all", "--partition", "one"],
        "invalid int value: 'one'",
        usage=True,
    ),
    "query: state dir missing": Row(
        ["query", "--state-dir", "{state}", "--store", "s", "--all"], "no store 's' in"
    ),
    "query: state dir is a file": Row(
        ["query", "--state-dir", "{file}", "--store", "s", "--all"], "is a file, not a directory"
    ),
    "query: store name with a path": Row(
        ["query", "--state-dir", "{state}", "--store", "../s", "--all"],
        "plain directory name",
    ),
    "query: --hex key not hex": Row(
        ["query", "--state-dir", "{state}", "--store", "s", "--key", "zz", "--hex"],
        "--key 'zz' is not hexadecimal",
    ),
    # run
    "run: APP.py missing": Row(["run"], "required: APP.py", usage=True),
    "run: no such app file": Row(["run", "{state}/app.py"], "no app file"),
    "run: --seconds not a number": Row(
        ["run", "{app}", "--seconds", "soon"], "invalid float value: 'soon'", usage=True
    ),
    "run: app file defines no app": Row(RUN, "must define a module-level", app_source="x = 1\n"),
    "run: app file does not compile": Row(RUN, "(app.py, line 1)", app_source="app = (\n"),
    "run: unreachable broker": Row(
        ["run", "{app}", "--bootstrap-servers", DEAD, "--state-dir", "{state}"],
        "no Kafka broker answered at bootstrap.servers=127.0.0.1:1",
        waits=True,
    ),
    "run: unknown input topic": Row(RUN, "{topic}", broker=True, topic_exists=False),
    "run: state dir is a file": Row(
        ["run", "{app}", "--bootstrap-servers", "{broker}", "--state-dir", "{file}"],
        "{file}",
        broker=True,
    ),
    "run: state dir read-only": Row(
        ["run", "{app}", "--bootstrap-servers", "{broker}", "--state-dir", "{readonly}"],
        "{readonly_parent}",
        broker=True,
    ),
    # configs (in the app file that `run` executes)
    "config: unknown name": Row(
        RUN, "unknown config names ['no.such.config']", config={"no.such.config": 1}
    ),
    "config: wrong type": Row(RUN, "num.stream.threads", config={"num.stream.threads": "many"}),
    "config: value out of range": Row(
        RUN, "processing.guarantee", config={"processing.guarantee": "exactly_twice"}
    ),
    "config: both handler names, different values": Row(
        RUN,
        "'deserialization.exception.handler' ('continue') and its deprecated form "
        "'default.deserialization.exception.handler' ('fail') disagree",
        config={
            "default.deserialization.exception.handler": "fail",
            "deserialization.exception.handler": "continue",
        },
    ),
    # records
    "record: value LongDeserializer refuses (3 bytes)": Row(
        [*RUN, "--seconds", "90"],
        "LongDeserializer: expected 8 bytes for a Long, got 3 (topic '{topic}', partition 0, "
        "offset 0)",
        broker=True,
        bad_record=True,
    ),
    # demo and reset (argument errors only: their happy paths are tested elsewhere)
    "demo: --records not a number": Row(
        ["demo", "--records", "many"], "invalid int value: 'many'", usage=True
    ),
    "demo: unreachable broker": Row(
        ["demo", "--bootstrap-servers", DEAD], "no Kafka broker answered at 127.0.0.1:1", waits=True
    ),
    "reset: --application-id missing": Row(["reset"], "--application-id", usage=True),
}

ERROR_LINE = re.compile(r"^(streamstate[\w ]*: )?error: ")
LOG_LINE = re.compile(r"^(DEBUG|INFO|WARNING|ERROR) streamstate[\w.]*: ")


def topics(kafka: KafkaTestCluster) -> set[str]:
    """The broker's topics, but for its own (``__consumer_offsets`` appears with the first group
    that commits, whoever it is)."""
    return {t for t in kafka.admin.list_topics(timeout=30).topics if not t.startswith("__")}


def readonly_dir(tmp_path: Path) -> Path:
    """A state dir that cannot be created: root ignores file modes, so under root a path in
    sysfs (which refuses new entries); otherwise a directory without write permission."""
    if os.geteuid() == 0:
        return Path("/sys/streamstate-bad-input/state")
    parent = tmp_path / "readonly"
    parent.mkdir()
    parent.chmod(0o500)
    return parent / "state"


@dataclass
class Case:
    """One row made ready to run: its arguments and environment filled in, and the paths and
    topics its checks read."""

    argv: list[str]
    env: dict[str, str]
    fill: dict[str, str]
    directory: Path
    state: Path
    a_file: Path
    readonly: Path
    app_id: str
    topic: str
    before: set[str]  # the broker's topics before the run (none without a broker)


def prepare(name: str, directory: Path, kafka: KafkaTestCluster | None) -> Case:
    """Creates what row ``name`` needs in ``directory`` (and its topic on ``kafka``)."""
    row = ROWS[name]
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    topic = f"bad-input-{slug}"[:100]
    app_id = f"bad-input-app-{slug}"[:100]
    state = directory / "state"
    a_file = directory / "a-file"
    a_file.write_text("not a directory\n")
    app = directory / "app.py"
    app.write_text(row.app_source)
    readonly = readonly_dir(directory)
    if kafka is not None and row.topic_exists:
        kafka.create_topic(topic)
        value = b"\x00\x01\x02" if row.bad_record else (7).to_bytes(8, "big")
        kafka.produce(topic, [(b"k", value)])
    before = topics(kafka) if kafka is not None else set()
    fill = {
        "state": str(state),
        "file": str(a_file),
        "app": str(app),
        "broker": kafka.bootstrap_servers if kafka is not None else DEAD,
        "topic": topic,
        "readonly": str(readonly),
        "readonly_parent": str(readonly.parent),
    }
    env = {
        **os.environ,
        "BAD_INPUT_TOPIC": topic,
        "BAD_INPUT_APP_ID": app_id,
        "BAD_INPUT_CONFIG": json.dumps(row.config),
    }
    argv = [part.format(**fill) for part in row.argv]
    return Case(argv, env, fill, directory, state, a_file, readonly, app_id, topic, before)


def launch(case: Case) -> subprocess.Popen[str]:
    """Starts ``streamstate ARGV`` for ``case``."""
    return subprocess.Popen(
        [sys.executable, "-m", "streamstate", *case.argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=case.env,
        cwd=case.directory,
    )


@pytest.fixture(scope="module")
def started_early(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, tuple[Case, subprocess.Popen[str]]]]:
    """The selected ``waits`` rows, started side by side when the module starts: each only
    waits out its command's timeout (30 s for ``run`` and ``restore``), which then overlaps
    the other rows instead of adding to them. Same commands, same checks, in the row's test."""
    selected = {
        item.callspec.params["name"]
        for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec")
    }
    started: dict[str, tuple[Case, subprocess.Popen[str]]] = {}
    try:
        for name, row in ROWS.items():
            if row.waits and name in selected:
                assert not row.broker, name  # a broker row's topics are checked per test
                case = prepare(name, tmp_path_factory.mktemp("waits"), None)
                started[name] = (case, launch(case))
        yield started
    finally:
        for _, process in started.values():
            if process.poll() is None:
                process.kill()
            process.communicate()


# The ``waits`` rows last: their commands started with the module and wait while the others run.
@pytest.mark.parametrize("name", sorted(ROWS, key=lambda name: ROWS[name].waits))
def test_bad_input_gets_one_clear_line_and_creates_nothing(
    name: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    started_early: dict[str, tuple[Case, subprocess.Popen[str]]],
) -> None:
    row = ROWS[name]
    kafka: KafkaTestCluster | None = request.getfixturevalue("kafka") if row.broker else None
    if name in started_early:
        case, process = started_early[name]
    else:
        case = prepare(name, tmp_path, kafka)
        process = launch(case)
    try:
        _, stderr = process.communicate(timeout=row.timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise
    argv, fill, state, readonly, app_id = (
        case.argv,
        case.fill,
        case.state,
        case.readonly,
        case.app_id,
    )
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if ERROR_LINE.match(line)]
    assert len(errors) == 1, f"expected one error line, stderr:\n{stderr}"
    others = [line for line in lines if line not in errors]
    if row.usage:
        assert process.returncode == 2, stderr
        assert all(line.startswith(("usage:", " ")) for line in others), stderr
    else:
        assert process.returncode == 1, (process.returncode, stderr)
        allowed = LOG_LINE if argv[:1] == ["run"] else None
        stray = [line for line in others if allowed is None or not allowed.match(line)]
        assert not stray, f"lines besides the error:\n{stderr}"
    assert row.says.format(**fill) in errors[0], errors[0]
    # Nothing created: no state where there was none, no topic on the broker.
    if row.bad_record:
        # The app ran: its task directory and store exist, as after any run.
        assert (state / app_id).is_dir()
    elif argv[:1] == ["run"] and state.exists():
        # Kafka Streams' constructor locks state.dir/<application.id> and writes its process id
        # there before it contacts the cluster; no task directory may follow.
        left = {str(p.relative_to(state)) for p in state.rglob("*")}
        assert left <= {app_id, f"{app_id}/.lock", f"{app_id}/kafka-streams-process-metadata"}, left
    else:
        assert not state.exists(), sorted(state.rglob("*"))
    assert not readonly.exists()
    assert case.a_file.read_text() == "not a directory\n"
    if kafka is not None:
        created = topics(kafka) - case.before
        # The one topic a started app creates, as Kafka Streams does: its store's changelog.
        expected = {f"{app_id}-counts-changelog"} if row.bad_record else set()
        assert created == expected and case.before <= topics(kafka), created
        if row.bad_record:
            # Nothing lost: the record that failed was not committed past.
            committed = kafka.admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(app_id, [TopicPartition(case.topic, 0)])]
            )[app_id].result(timeout=30)
            offsets = [tp.offset for tp in committed.topic_partitions]
            assert all(o in (-1001, 0) for o in offsets), offsets
