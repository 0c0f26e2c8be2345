"""The query endpoint (``query.server.enabled``, ``app/query_server.py``) on the real 4.4 broker.

Two instances of a count (with a window and a session count beside it) over 4 partitions under
``group.protocol="streams"`` with a standby each, serving at their ``application.server``: a
lookup sent to either returns every key's count and windows (forwarded to the key's instance
when remote; with ``stale=true`` answered by the standby of the instance asked), an absent key
and an unknown store are 404s, malformed requests 400s, a forwarded request is never forwarded
again (421); then a third instance, restoring
the whole store behind a restore listener held by the test (the restore cannot finish, by
construction), answers 503 with ``Retry-After`` until it is released; after ``close()`` its port
is free.
"""

from __future__ import annotations

import collections
import http.client
import json
import socket
import threading
import time
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

from tests.apps import wait_until
from tests.integration.test_streams_app import new_app

from streamstate import (
    Serdes,
    SessionWindows,
    State,
    StreamsApp,
    StreamsBuilder,
    TimeWindows,
)
from streamstate.app.key_metadata import default_partition
from streamstate.app.query_server import FORWARDED_HEADER, query_key
from streamstate.app.state_directory import StateDirectoryLock
from streamstate.errors import StreamsError
from streamstate.kafka_local import KafkaTestCluster
from streamstate.records import TopicPartition
from streamstate.state.restorer import StateRestoreListener

STRING = Serdes.String()
LONG = Serdes.Long()
KEYS = [f"key/{i:03d} é" for i in range(24)]  # a slash and non-ASCII: URL-quoted in paths
MINUTE = 60_000
# A window start an hour back: a key's n-th record is at T0 + n minutes. Near now, not at a
# fixed date: the window and session changelogs keep a day more than their stores' retention
# (cleanup.policy=compact,delete), and the broker's retention check (every 5 minutes) would
# delete records years old while the standbys and the third instance still read them.
T0 = (int(time.time() * 1000) // MINUTE - 60) * MINUTE


def _count_topology(source: str, sink: str) -> Any:
    builder = StreamsBuilder()
    grouped = builder.stream(source, key_serde=STRING, value_serde=STRING).group_by_key()
    grouped.count(materialized="counts").to_stream().to(sink, value_serde=LONG)
    hour = 60 * MINUTE  # grace: a partition's later keys must not expire its earlier ones
    grouped.windowed_by(TimeWindows.of_size_and_grace(MINUTE, hour)).count(materialized="minutes")
    gap = SessionWindows.of_inactivity_gap_and_grace(1_000, hour)
    grouped.windowed_by(gap).count(materialized="sessions")
    return builder.build()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        port: int = s.getsockname()[1]
        return port


def _get(
    port: int, path: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, Any], str | None]:
    conn = http.client.HTTPConnection("localhost", port, timeout=15)
    try:
        conn.request("GET", path, headers=headers or {})
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read()), reply.getheader("Retry-After")
    finally:
        conn.close()


def _post(port: int, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("localhost", port, timeout=15)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read())
    finally:
        conn.close()


def _key_path(key: str, store: str = "counts") -> str:
    return f"/stores/{store}/keys/" + urllib.parse.quote(key, safe="")


def _tasks(app: StreamsApp) -> dict[Any, Any]:
    return {tid: task for t in app._threads for tid, task in t.active_tasks().items()}


class _HeldRestore(StateRestoreListener):
    """Blocks the state updater at the start of a restore until released."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def on_restore_start(
        self, tp: TopicPartition, store_name: str, start_offset: int, end_offset: int
    ) -> None:
        self.started.set()
        self.release.wait(120)


def test_any_instance_answers_every_key_forwarding_to_its_host(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source, sink = kafka.create_topic(partitions=4), kafka.create_topic(partitions=4)
    app_id = f"qs-{uuid.uuid4().hex[:8]}"
    ports = [_free_port(), _free_port()]
    while ports[1] == ports[0]:
        ports[1] = _free_port()

    def config(port: int) -> dict[str, Any]:
        return {
            "group.protocol": "streams",
            "application.server": f"localhost:{port}",
            "query.server.enabled": True,
            "num.standby.replicas": 1,
        }

    a, b = (
        new_app(apps, kafka, _count_topology(source, sink), tmp_path / f"i{n}", app_id, **config(p))
        for n, p in enumerate(ports)
    )
    expected = collections.Counter({k: 1 + i % 5 for i, k in enumerate(KEYS)})
    kafka.produce(
        source, [(k.encode(), b"x", T0 + n * MINUTE) for k in KEYS for n in range(expected[k])]
    )
    a.start()
    b.start()
    wait_until(
        lambda: len(_tasks(a)) == 2 and len(_tasks(b)) == 2 and a.state is State.RUNNING,
        "two tasks each",
    )

    def endpoints_known(x: StreamsApp) -> bool:
        eps = x._members[0].endpoints()
        return len(eps) == 2 and sum(len(e.active.get(source, ())) for e in eps) == 4

    wait_until(lambda: endpoints_known(a) and endpoints_known(b), "both instances' endpoints")
    partitions_of = {
        port: {t.partition for t in _tasks(x).values()}
        for port, x in zip(ports, (a, b), strict=True)
    }

    def counted() -> bool:
        status, doc, _ = _get(ports[0], _key_path(KEYS[-1]))
        return status == 200 and doc["value"] == expected[KEYS[-1]]

    wait_until(counted, "the last key counted")
    wait_until(
        lambda: all(_get(ports[0], _key_path(k))[1].get("value") == expected[k] for k in KEYS),
        "every key counted",
    )
    forwarded = 0
    for key in KEYS:
        partition = default_partition(key.encode(), 4)
        owner = next(p for p, parts in partitions_of.items() if partition in parts)
        for port in ports:
            status, doc, _ = _get(port, _key_path(key))
            assert status == 200, doc
            assert doc == {
                "key": key,
                "value": expected[key],
                "host": f"localhost:{owner}",
                "partition": partition,
            }
            forwarded += port != owner
            # The JSON body form answers the same.
            assert query_key(f"localhost:{port}", "counts", key) == (200, doc)
            # Asked directly with the hop header, the instance not holding it refuses (421):
            # a forwarded request is never forwarded again.
            if port != owner:
                status, doc, _ = _get(port, _key_path(key), {FORWARDED_HEADER: "test"})
                assert status == 421, doc
                assert doc["active_host"] == f"localhost:{owner}"
    assert forwarded == len(KEYS)  # each key was asked once of the instance not holding it

    # stale=true: the instance holding a standby of the key's partition answers itself, once
    # its standby replayed the changelog that far.
    for key in KEYS:
        partition = default_partition(key.encode(), 4)
        other = next(p for p, parts in partitions_of.items() if partition not in parts)

        def from_standby(key: str = key, other: int = other) -> bool:
            status, doc, _ = _get(other, _key_path(key) + "?stale=true")
            return (
                status == 200
                and doc["host"] == f"localhost:{other}"
                and doc["value"] == expected[key]
            )

        wait_until(from_standby, f"{key!r} answered by the standby on {other}")

    # Window and session stores: fetch(key, from, to), forwarded alike.
    def windows(key: str, end: int) -> list[dict[str, int]]:
        return [
            {"start": T0 + n * MINUTE, "end": T0 + n * MINUTE + end, "value": 1}
            for n in range(expected[key])
        ]

    window_query = f"?from={T0}&to={T0 + 10 * MINUTE}"
    wait_until(
        lambda: (
            _get(ports[0], _key_path(KEYS[-1], "minutes") + window_query)[1].get("value")
            == windows(KEYS[-1], MINUTE)
        ),
        "the last key's windows",
    )
    for key in KEYS:
        partition = default_partition(key.encode(), 4)
        owner = next(p for p, parts in partitions_of.items() if partition in parts)
        for port in ports:
            status, doc, _ = _get(port, _key_path(key, "minutes") + window_query)
            assert (status, doc["value"], doc["host"]) == (
                200,
                windows(key, MINUTE),
                f"localhost:{owner}",
            ), doc
            # Sessions with end >= from and start <= to; each record its own session.
            status, doc = query_key(
                f"localhost:{port}", "sessions", key, time_from=T0, time_to=T0 + 10 * MINUTE
            )
            assert (status, doc["value"], doc["host"]) == (
                200,
                windows(key, 0),
                f"localhost:{owner}",
            ), doc
        # The window's bounds are honoured: only the first window starts at T0.
        status, doc, _ = _get(ports[1], _key_path(key, "minutes") + f"?from={T0}&to={T0}")
        assert doc["value"] == windows(key, MINUTE)[:1]
    assert _get(ports[0], _key_path(KEYS[0], "minutes"))[0] == 400  # no from/to

    # Absent keys (one on each instance, forwarded or not) and an unknown store: 404.
    for absent in ("nobody-1", "nobody-2", "nobody-3", "nobody-4"):
        for port in ports:
            status, doc, _ = _get(port, _key_path(absent))
            assert (status, doc["error"]) == (404, "KeyNotFound"), doc
            assert doc["partition"] == default_partition(absent.encode(), 4)
    status, doc, _ = _get(ports[0], "/stores/nope/keys/x")
    assert (status, doc["error"]) == (404, "UnknownStateStoreError")
    # Malformed requests: 400.
    assert _post(ports[0], "/stores/counts/keys", b"{not json")[0] == 400
    assert _post(ports[0], "/stores/counts/keys", b'{"value": 1}')[0] == 400
    assert _post(ports[1], "/stores/counts/keys", b'{"key": 42}')[0] == 400  # a String store
    assert _get(ports[0], _key_path(KEYS[0]) + "?from=abc&to=1")[0] == 400
    assert _get(ports[0], _key_path(KEYS[0]) + "?from=0&to=1")[0] == 400  # not a window store
    assert _get(ports[0], _key_path(KEYS[0]) + "?stale=maybe")[0] == 400
    assert _get(ports[0], "/nothing")[0] == 404

    # A third instance on a fresh state directory restores the whole store, held by the test:
    # every lookup it cannot answer (no endpoints yet, or its tasks restoring) is a 503.
    assert a.close(30) and b.close(30)
    held = _HeldRestore()
    port_c = _free_port()
    c = StreamsApp(
        _count_topology(source, sink),
        {
            "application.id": app_id,
            "bootstrap.servers": kafka.bootstrap_servers,
            "state.dir": str(tmp_path / "c"),
            "commit.interval.ms": 200,
            "session.timeout.ms": 6000,
            **config(port_c),
        },
        restore_listener=held,
    )
    apps.append(c)
    try:
        c.start()
        assert held.started.wait(60), "the restore never started"
        wait_until(lambda: endpoints_known_one(c, source), "c's endpoint with every partition")
        for key in KEYS[:4]:
            status, doc, retry_after = _get(port_c, _key_path(key))
            assert (status, retry_after) == (503, "1"), doc
            assert doc["error"] == "StreamsRebalancingError", doc
    finally:
        held.release.set()
    wait_until(lambda: c.state is State.RUNNING, "c RUNNING once released")
    for key in KEYS:
        status, doc, _ = _get(port_c, _key_path(key))
        assert (status, doc["value"], doc["host"]) == (200, expected[key], f"localhost:{port_c}")
    # After close() the server is gone: nothing answers and the port can be bound again.
    assert c.close(30)
    try:
        _get(port_c, _key_path(KEYS[0]))
        raise AssertionError("the query server still answers after close()")
    except ConnectionRefusedError:
        pass
    with socket.socket() as s:
        # SO_REUSEADDR as every server sets it (the closed connections' TIME_WAIT stays): the
        # bind fails only while a socket still listens there.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("localhost", port_c))
        s.listen()


def endpoints_known_one(app: StreamsApp, source: str) -> bool:
    """One instance alone in the group, with its endpoint holding all 4 partitions."""
    eps = app._members[0].endpoints()
    return len(eps) == 1 and len(eps[0].active.get(source, ())) == 4


def test_classic_protocol_answers_from_local_stores_and_a_taken_port_fails_start(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source, sink = kafka.create_topic(partitions=4), kafka.create_topic(partitions=4)
    app_id = f"qs-classic-{uuid.uuid4().hex[:8]}"
    port = _free_port()
    config = {"application.server": f"localhost:{port}", "query.server.enabled": "true"}
    app = new_app(apps, kafka, _count_topology(source, sink), tmp_path / "a", app_id, **config)
    kafka.produce(source, [(k.encode(), b"x", T0) for k in KEYS])
    app.start()
    wait_until(
        lambda: all(_get(port, _key_path(k))[1].get("value") == 1 for k in KEYS),
        "every key counted",
    )
    # One instance holds every partition: it answers each key itself; the classic protocol
    # does not say where a key lives, so the partition is -1.
    for key in KEYS:
        assert _get(port, _key_path(key)) == (
            200,
            {"key": key, "value": 1, "host": f"localhost:{port}", "partition": -1},
            None,
        )
    status, doc, _ = _get(port, _key_path("absent"))
    assert (status, doc["error"]) == (404, "KeyNotFound")
    # A second instance on the same endpoint cannot listen: start() fails naming it.
    taken = new_app(apps, kafka, _count_topology(source, sink), tmp_path / "b", app_id, **config)
    try:
        taken.start()
        raise AssertionError("start() on a taken port succeeded")
    except StreamsError as exc:
        assert f"application.server=localhost:{port}" in str(exc)
    assert taken.state is State.CREATED
    # ... releasing the state directory's lock (a second lock on it is taken).
    lock = StateDirectoryLock(taken.config.app_dir())
    lock.acquire()
    lock.release()
    assert app.close(30)
