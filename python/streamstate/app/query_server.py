"""The query endpoint (not Kafka's): key lookups over HTTP at ``application.server``, answered
by whichever instance is asked.

Kafka Streams leaves "ask the instance that holds the key" to every user (its
``queryMetadataForKey`` says where; the RPC layer is theirs). With ``query.server.enabled=true``
a :class:`~streamstate.StreamsApp` serves, from ``start()`` to ``close()``, a stdlib
``ThreadingHTTPServer`` on its ``application.server`` (a daemon thread):

- ``GET /stores/<store>/keys/<key>`` — the key's value; ``?stale=true`` lets a standby's copy
  answer (Kafka's ``enableStaleStores``); ``?from=<ms>&to=<ms>`` fetches a window store's
  windows starting in ``[from, to]`` (``fetch(key, from, to)``) or a session store's sessions
  with ``end >= from`` and ``start <= to`` (``find_sessions``).
- ``POST /stores/<store>/keys`` with a JSON body ``{"key": ..., "stale": ..., "from": ...,
  "to": ...}`` — the same, for keys a path segment cannot carry.

The answer is JSON ``{"key": ..., "value": ..., "host": "h:p", "partition": p}`` (``host`` is
the instance that answered; a window or session fetch's ``value`` is a list of ``{"start",
"end", "value"}``; bytes are answered as text when they are UTF-8, else as ``{"base64": ...}``).

**Keys.** The path segment is URL-decoded text, turned into the store's key type by the store's
key serde: a ``String`` serde takes the text; ``Short``/``Integer``/``Long`` parse it as an
integer, ``Float``/``Double`` as a number, ``UUID`` as a UUID; ``Bytes`` (and a Processor API
byte store) take its UTF-8 bytes; any other serde (``Json``, ``Avro``, your own) deserializes
the text's UTF-8 bytes (so a ``Json`` key ``{"id": 7}`` is sent as that JSON text). In a JSON
body the ``key`` is taken as it is (a JSON string for byte stores, a number for ``Long``).
A key that does not convert is a 400.

**Where.** Under ``group.protocol="streams"`` the instance asked finds the key's partition and
its active host (:meth:`~streamstate.StreamsApp.query_metadata_for_key`): its own, it answers;
another, it forwards the request there (``http.client``, ``query.server.forward.timeout.ms``)
with the header ``X-Streamstate-Forwarded``; a forwarded request is never forwarded again (two
instances with different views of the group cannot loop: the second answers 421). With
``stale=true`` an instance holding a standby of the partition answers itself, and a partition
with no active instance is forwarded to a standby. Under the classic protocol an instance
knows only its own tasks: it answers from its local stores, and a key held elsewhere is a 404
as an absent one (``docs/rebalancing.md``). Global stores answer locally everywhere.

**Errors** (KIP-216's, as ``streamstate.app.queries`` raises them), as JSON ``{"error":
<class name>, "message": ...}``:

======================================================  =======================================
``UnknownStateStoreError``, an absent key               404
``StreamsNotStartedError``, ``StreamsRebalancingError``  503 with ``Retry-After: 1``
(rebalancing, restoring), ``StateStoreMigratedError``,
``StateStoreNotAvailableError`` (not running), no
instance runs the partition yet, forwarding failed
``InvalidStateStorePartitionError`` (the partition      421 (``active_host`` says where)
is not here and the request was already forwarded)
a malformed request (path, JSON, key, ``from``/``to``)  400
======================================================  =======================================
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import threading
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from streamstate.app.key_metadata import HostInfo
from streamstate.app.queries import ReadOnlyKeyValueStore
from streamstate.dsl.stores import SessionStore, WindowStore
from streamstate.errors import (
    InvalidStateStorePartitionError,
    StateStoreMigratedError,
    StateStoreNotAvailableError,
    StreamsError,
    StreamsNotStartedError,
    StreamsRebalancingError,
    UnknownStateStoreError,
)
from streamstate.serde import (
    BytesSerializer,
    DoubleSerializer,
    FloatSerializer,
    IntegerSerializer,
    LongSerializer,
    ShortSerializer,
    StringSerializer,
    UUIDSerializer,
)

__all__ = ["FORWARDED_HEADER", "QueryServer", "query_key"]

FORWARDED_HEADER = "X-Streamstate-Forwarded"
"""Set on a forwarded request (to the forwarding instance's ``host:port``): never forwarded
again."""
_log = logging.getLogger("streamstate.app")
_RETRY_AFTER_S = "1"


class _Answer(Exception):
    """An HTTP answer decided on the way (an error, or a forwarded reply)."""

    def __init__(
        self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(body.get("message", ""))
        self.status = status
        self.body = body
        self.headers = headers or {}


def _bad(message: str) -> _Answer:
    return _Answer(400, {"error": "BadRequest", "message": message})


def _retry(error: str, message: str, **extra: Any) -> _Answer:
    return _Answer(
        503,
        {"error": error, "message": message, **extra},
        {"Retry-After": _RETRY_AFTER_S},
    )


def _json_value(value: Any) -> Any:
    """A value as JSON can carry it (see the module doc); a UUID or another object as text."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(raw).decode("ascii")}
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    return str(value)


# Serializers of numeric keys: what a key's text or JSON value becomes, and what it takes.
_NUMBERS: tuple[tuple[Any, Any, tuple[type, ...]], ...] = (
    (ShortSerializer | IntegerSerializer | LongSerializer, int, (int, str)),
    (FloatSerializer | DoubleSerializer, float, (int, float, str)),
)


def convert_key(store: Any, key: Any, *, from_path: bool) -> Any:
    """``key`` (the path's text, or a JSON body's value) as the store's key type (the module
    doc's rules); raises ``ValueError`` when it does not convert."""
    serde = getattr(getattr(store, "serdes", None), "key_serde", None)
    if serde is None and not isinstance(store, ReadOnlyKeyValueStore):
        return key  # a typed view without serdes (a global table): the key as given
    ser = None if serde is None else serde.serializer
    if ser is None or isinstance(ser, BytesSerializer | StringSerializer):
        if not isinstance(key, str):
            raise ValueError("the store's keys are strings (a byte store's, their UTF-8 bytes)")
        return key if isinstance(ser, StringSerializer) else key.encode("utf-8")
    for kinds, make, takes in _NUMBERS:
        if isinstance(ser, kinds):
            if isinstance(key, bool) or not isinstance(key, takes):
                raise ValueError(f"the store's keys are {make.__name__}s")
            return make(key)
    if isinstance(ser, UUIDSerializer):
        return uuid.UUID(str(key))
    # Any other serde (Json, Avro, a user's): the text is the key's serialized form.
    if from_path and serde is not None:
        return serde.deserializer.deserialize(store.name, key.encode("utf-8"))
    return key


def _key_bytes(store: Any, key: Any) -> bytes | None:
    if isinstance(key, bytes):
        return key
    serdes = getattr(store, "serdes", None)
    return None if serdes is None else bytes(serdes.key_to_bytes(key))


class _Request:
    """A parsed lookup."""

    def __init__(self, store: str, key: Any, from_path: bool, stale: bool, window: Any) -> None:
        self.store = store
        self.key = key
        self.from_path = from_path
        self.stale = stale
        self.window: tuple[int, int] | None = window


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", ""):
        return value.lower() in ("true", "1")
    raise _bad(f"stale takes true or false, not {value!r}")


def _window(time_from: Any, time_to: Any) -> tuple[int, int] | None:
    if time_from is None and time_to is None:
        return None
    if time_from is None or time_to is None:
        raise _bad("a window fetch takes both from and to (epoch ms)")
    try:
        if isinstance(time_from, bool) or isinstance(time_to, bool):
            raise ValueError
        return int(time_from), int(time_to)
    except (TypeError, ValueError):
        raise _bad(f"from and to are epoch ms integers, not {time_from!r}, {time_to!r}") from None


def parse_request(method: str, path: str, body: bytes) -> _Request:
    """The lookup a request asks for; raises a 400 :class:`_Answer` when malformed, a 404 one
    for another path."""
    url = urllib.parse.urlsplit(path)
    parts = url.path.split("/")
    query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
    if method == "GET" and len(parts) == 5 and parts[:2] == ["", "stores"] and parts[3] == "keys":
        store, key = urllib.parse.unquote(parts[2]), urllib.parse.unquote(parts[4])
        if not store:
            raise _bad("no store name in the path")
        window = _window(query.get("from"), query.get("to"))
        return _Request(store, key, True, _flag(query.get("stale", "false")), window)
    if method == "POST" and len(parts) == 4 and parts[:2] == ["", "stores"] and parts[3] == "keys":
        try:
            doc = json.loads(body or b"null")
        except ValueError as exc:
            raise _bad(f"the body is not JSON: {exc}") from None
        if not isinstance(doc, dict) or "key" not in doc:
            raise _bad('the body is a JSON object with a "key"')
        window = _window(doc.get("from"), doc.get("to"))
        store = urllib.parse.unquote(parts[2])
        return _Request(store, doc["key"], False, _flag(doc.get("stale", False)), window)
    raise _Answer(
        404,
        {
            "error": "NotFound",
            "message": "GET /stores/<store>/keys/<key> or POST /stores/<store>/keys",
        },
    )


class QueryServer:
    """The endpoint of ``app`` at ``address`` (``host:port``, its ``application.server``)."""

    def __init__(
        self,
        app: Any,
        address: str,
        *,
        streams_protocol: bool,
        forward_timeout_ms: int = 5_000,
    ) -> None:
        """Nothing listens before :meth:`start`; ``streams_protocol``: whether the app knows
        where keys live (``group.protocol="streams"``)."""
        host, _, port = address.rpartition(":")
        self.app = app
        self._streams_protocol = streams_protocol
        self.host_info = HostInfo(host, int(port))
        self._timeout = forward_timeout_ms / 1000.0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        """``host:port``."""
        return f"{self.host_info.host}:{self.host_info.port}"

    def start(self) -> None:
        """Binds and serves on a daemon thread; a :class:`StreamsError` naming the address
        when it cannot bind."""
        server_self = self

        # HTTP/1.0: one request per connection, so nothing answers once close() returned.
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server_self._handle(self, "GET")

            def do_POST(self) -> None:
                server_self._handle(self, "POST")

            def log_message(self, format: str, *args: Any) -> None:
                _log.debug("query server %s: " + format, server_self.address, *args)

        try:
            server = ThreadingHTTPServer((self.host_info.host, self.host_info.port), Handler)
        except OSError as exc:
            raise StreamsError(
                f"query.server.enabled: cannot listen at application.server={self.address}: {exc}"
            ) from exc
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=f"streamstate-query-server-{self.address}",
            daemon=True,
        )
        self._thread.start()

    def close(self) -> None:
        """Stops serving and frees the port (idempotent)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join()

    # -- one request --------------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        forwarded = handler.headers.get(FORWARDED_HEADER) is not None
        try:
            request = parse_request(method, handler.path, body)
            answer = self._answer(request, method, handler.path, body, forwarded)
        except _Answer as done:
            answer = done
        except Exception as exc:  # a bug must not kill the handler silently
            _log.exception("query server %s: %s %s failed", self.address, method, handler.path)
            answer = _Answer(500, {"error": type(exc).__name__, "message": str(exc)})
        payload = json.dumps(answer.body).encode("utf-8")
        handler.send_response(answer.status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(payload)))
        for name, value in answer.headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(payload)

    def _answer(
        self, request: _Request, method: str, path: str, body: bytes, forwarded: bool
    ) -> _Answer:
        app = self.app
        try:
            topology = app.topology
            if request.store not in topology.stores and request.store not in topology.global_stores:
                raise UnknownStateStoreError(
                    f"Cannot get state store {request.store} because no such store is registered "
                    "in the topology.",
                    store_name=request.store,
                )
            facade = app.store(request.store)
            try:
                key = convert_key(facade, request.key, from_path=request.from_path)
            except (ValueError, TypeError, StreamsError) as exc:
                raise _bad(
                    f"key {request.key!r} is not a key of store {request.store}: {exc}"
                ) from None
            if request.store in topology.global_stores or not self._streams_protocol:
                return self._local(request, key, None)
            raw = _key_bytes(facade, key)
            if raw is None:
                return self._local(request, key, None)
            meta = app.query_metadata_for_key(request.store, raw)
            here = self.host_info
            if meta.partition < 0:
                raise _retry(
                    "StreamsRebalancingError",
                    "the group has not shared its members' endpoints yet; retry shortly",
                )
            if meta.active_host == here or (request.stale and here in meta.standby_hosts):
                return self._local(request, key, meta.partition)
            target = meta.active_host
            if target.port < 0 and request.stale and meta.standby_hosts:
                target = min(meta.standby_hosts, key=lambda h: (h.host, h.port))
            if forwarded:
                raise _Answer(
                    421,
                    {
                        "error": "InvalidStateStorePartitionError",
                        "message": f"partition {meta.partition} of store {request.store} is not "
                        f"on {self.address}",
                        "partition": meta.partition,
                        "active_host": f"{target.host}:{target.port}",
                    },
                )
            if target.port < 0:
                raise _retry(
                    "StreamsRebalancingError",
                    f"no instance runs partition {meta.partition} of store {request.store} "
                    "now; retry shortly",
                    partition=meta.partition,
                )
            return self._forward(target, method, path, body)
        except UnknownStateStoreError as exc:
            raise _Answer(404, {"error": type(exc).__name__, "message": str(exc)}) from None
        except InvalidStateStorePartitionError as exc:
            raise _Answer(
                421,
                {"error": type(exc).__name__, "message": str(exc), "partition": exc.partition},
            ) from None
        except (
            StreamsNotStartedError,
            StreamsRebalancingError,
            StateStoreMigratedError,
            StateStoreNotAvailableError,
        ) as exc:
            raise _retry(type(exc).__name__, str(exc)) from None

    def _local(self, request: _Request, key: Any, partition: int | None) -> _Answer:
        store = self.app.store(request.store, partition, stale_stores=request.stale)
        answered = {
            "key": _json_value(request.key),
            "host": self.address,
            "partition": -1 if partition is None else partition,
        }
        if request.window is not None:
            time_from, time_to = request.window
            if isinstance(store, WindowStore):
                size = store.window_size_ms
                found = [
                    {"start": start, "end": start + size, "value": _json_value(value)}
                    for start, value in store.fetch(key, time_from, time_to)
                ]
            elif isinstance(store, SessionStore):
                found = [
                    {
                        "start": w.window.start,
                        "end": w.window.end,
                        "value": _json_value(value),
                    }
                    for w, value in store.find_sessions(key, time_from, time_to)
                ]
            else:
                raise _bad(f"store {request.store} is not a window or session store: no from/to")
            return _Answer(200, {**answered, "value": found})
        if isinstance(store, WindowStore | SessionStore):
            raise _bad(f"store {request.store} is a window or session store: give from and to")
        value = store.get(key)
        if value is None:
            raise _Answer(
                404,
                {
                    "error": "KeyNotFound",
                    "message": f"no value for the key in store {request.store}",
                    **answered,
                },
            )
        return _Answer(200, {**answered, "value": _json_value(value)})

    def _forward(self, target: HostInfo, method: str, path: str, body: bytes) -> _Answer:
        conn = http.client.HTTPConnection(target.host, target.port, timeout=self._timeout)
        headers = {FORWARDED_HEADER: self.address, "Content-Type": "application/json"}
        try:
            conn.request(method, path, body=body or None, headers=headers)
            reply = conn.getresponse()
            data = reply.read()
            retry_after = reply.getheader("Retry-After")
        except (OSError, http.client.HTTPException) as exc:
            raise _retry(
                "ForwardFailed",
                f"the key's instance {target.host}:{target.port} did not answer ({exc}); "
                "retry shortly",
            ) from None
        finally:
            conn.close()
        try:
            doc = json.loads(data)
        except ValueError:
            doc = {"error": "ForwardFailed", "message": data.decode("utf-8", "replace")}
        if reply.status == 421:
            # The two instances' views of the group differ: it is moving; ask again shortly.
            raise _retry(doc.get("error", "StreamsRebalancingError"), doc.get("message", ""))
        return _Answer(reply.status, doc, {"Retry-After": retry_after} if retry_after else {})


def query_key(
    address: str,
    store: str,
    key: Any,
    *,
    stale: bool = False,
    time_from: int | None = None,
    time_to: int | None = None,
    timeout: float = 10.0,
) -> tuple[int, dict[str, Any]]:
    """A client of the endpoint: looks ``key`` up in ``store`` at ``address`` (``host:port``),
    sent as a JSON body (``key`` any JSON value); returns the HTTP status and the JSON answer."""
    host, _, port = address.rpartition(":")
    doc: dict[str, Any] = {"key": key, "stale": stale}
    if time_from is not None or time_to is not None:
        doc["from"], doc["to"] = time_from, time_to
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        path = f"/stores/{urllib.parse.quote(store, safe='')}/keys"
        conn.request(
            "POST", path, body=json.dumps(doc), headers={"Content-Type": "application/json"}
        )
        reply = conn.getresponse()
        answer: dict[str, Any] = json.loads(reply.read())
        return reply.status, answer
    finally:
        conn.close()
