"""Removing members from a classic consumer group, as Kafka's
``Admin.removeMembersFromConsumerGroup`` does: a ``LeaveGroup`` request (v3, KIP-345's batch
form) naming each member, sent to the group's coordinator.

librdkafka (hence confluent-kafka) has no such admin call, and the reset tool's ``--force``
needs it: a stopped instance of an app with a long ``session.timeout.ms`` stays a member until
its session expires, and blocks the reset until then. The two requests are small and fixed
(``FindCoordinator`` v2, ``LeaveGroup`` v3, both non-flexible versions every Kafka from 2.4 to
4.x answers), so they are written here over a plain socket: ``PLAINTEXT`` and ``SSL``
listeners; a ``SASL_*`` listener is refused with a clear error.
"""

from __future__ import annotations

import socket
import ssl
import struct
import time
from collections.abc import Mapping, Sequence
from typing import Any

from streamstate.errors import StreamsError

__all__ = ["remove_members"]

_FIND_COORDINATOR, _LEAVE_GROUP = 10, 13
_RETRIABLE = {
    14: "COORDINATOR_LOAD_IN_PROGRESS",
    15: "COORDINATOR_NOT_AVAILABLE",
    16: "NOT_COORDINATOR",
}
_UNKNOWN_MEMBER_ID = 25
_ERROR_NAMES = {
    **_RETRIABLE,
    24: "INVALID_GROUP_ID",
    25: "UNKNOWN_MEMBER_ID",
    30: "GROUP_AUTHORIZATION_FAILED",
    69: "GROUP_ID_NOT_FOUND",
    82: "FENCED_INSTANCE_ID",
}


def _string(text: str) -> bytes:
    data = text.encode("utf-8")
    return struct.pack(">h", len(data)) + data


def _nullable_string(text: str | None) -> bytes:
    return struct.pack(">h", -1) if text is None else _string(text)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return value

    def string(self) -> str | None:
        size = self.take(">h")
        if size < 0:
            return None
        text = self.data[self.at : self.at + size].decode("utf-8")
        self.at += size
        return text


class _Connection:
    """One blocking connection to a broker, requests answered in order."""

    def __init__(self, host: str, port: int, config: Mapping[str, Any], timeout: float) -> None:
        protocol = str(config.get("security.protocol", "PLAINTEXT")).upper()
        if protocol not in ("PLAINTEXT", "SSL"):
            raise StreamsError(
                f"--force removes group members over PLAINTEXT or SSL listeners only, not "
                f"security.protocol={protocol}: stop the instances and wait for their "
                "session.timeout.ms instead"
            )
        try:
            raw = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise StreamsError(f"could not connect to broker {host}:{port} ({exc})") from None
        if protocol == "SSL":
            context = ssl.create_default_context(cafile=config.get("ssl.ca.location"))
            if config.get("ssl.certificate.location"):
                context.load_cert_chain(
                    config["ssl.certificate.location"],
                    config.get("ssl.key.location"),
                    config.get("ssl.key.password"),
                )
            identify = str(config.get("ssl.endpoint.identification.algorithm", "https"))
            context.check_hostname = identify.lower() == "https"
            if not context.check_hostname and config.get("enable.ssl.certificate.verification") in (
                False,
                "false",
            ):
                context.verify_mode = ssl.CERT_NONE
            raw = context.wrap_socket(raw, server_hostname=host)
        self.sock = raw
        self.correlation = 0

    def request(self, api_key: int, version: int, body: bytes) -> _Reader:
        self.correlation += 1
        header = struct.pack(">hhi", api_key, version, self.correlation) + _string(
            "streamstate-reset"
        )
        payload = header + body
        try:
            self.sock.sendall(struct.pack(">i", len(payload)) + payload)
            size = struct.unpack(">i", self._read(4))[0]
            reader = _Reader(self._read(size))
        except OSError as exc:
            raise StreamsError(f"the broker did not answer ({exc})") from None
        if reader.take(">i") != self.correlation:
            raise StreamsError("the broker answered another request than the one sent")
        return reader

    def _read(self, n: int) -> bytes:
        chunks = []
        while n > 0:
            chunk = self.sock.recv(n)
            if not chunk:
                raise StreamsError("the broker closed the connection")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        self.sock.close()


def _coordinator(
    bootstrap_servers: str, group: str, config: Mapping[str, Any], timeout: float
) -> tuple[str, int]:
    errors = []
    for server in bootstrap_servers.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            connection = _Connection(host.strip("[]"), int(port), config, timeout)
        except (StreamsError, ValueError) as exc:
            errors.append(str(exc))
            continue
        try:
            reply = connection.request(_FIND_COORDINATOR, 2, _string(group) + struct.pack(">b", 0))
        finally:
            connection.close()
        reply.take(">i")  # throttle time
        code = reply.take(">h")
        message = reply.string()
        reply.take(">i")  # node id
        coordinator_host, coordinator_port = reply.string(), reply.take(">i")
        if code != 0:
            name = _ERROR_NAMES.get(code, f"error code {code}")
            if code in _RETRIABLE:
                raise _Retry(name)
            raise StreamsError(f"no coordinator for group {group!r}: {name} ({message})")
        return str(coordinator_host), int(coordinator_port)
    raise StreamsError(f"no broker of {bootstrap_servers} answered: {'; '.join(errors)}")


class _Retry(Exception):
    pass


def remove_members(
    bootstrap_servers: str,
    group: str,
    members: Sequence[tuple[str, str | None]],
    *,
    config: Mapping[str, Any] | None = None,
    timeout: float = 30.0,
) -> None:
    """Removes ``members`` (``(member.id, group.instance.id or None)``) from classic consumer
    group ``group``. A member the coordinator no longer knows counts as removed (it left by
    itself meanwhile). Raises :class:`~streamstate.errors.StreamsError` naming the member the
    coordinator refused to remove."""
    settings = dict(config or {})
    body = _string(group) + struct.pack(">i", len(members))
    for member_id, instance_id in members:
        body += _string(member_id) + _nullable_string(instance_id)
    deadline = time.monotonic() + timeout
    while True:
        try:
            host, port = _coordinator(bootstrap_servers, group, settings, timeout)
            connection = _Connection(host, port, settings, timeout)
            try:
                reply = connection.request(_LEAVE_GROUP, 3, body)
            finally:
                connection.close()
            reply.take(">i")  # throttle time
            code = reply.take(">h")
            if code in _RETRIABLE:
                raise _Retry(_RETRIABLE[code])
            if code != 0:
                name = _ERROR_NAMES.get(code, f"error code {code}")
                raise StreamsError(f"could not remove the members of group {group!r}: {name}")
            refused = []
            for _ in range(reply.take(">i")):
                left_id, _instance = reply.string(), reply.string()
                member_code = reply.take(">h")
                if member_code not in (0, _UNKNOWN_MEMBER_ID):
                    reason = _ERROR_NAMES.get(member_code, f"error code {member_code}")
                    refused.append(f"{left_id}: {reason}")
            if refused:
                raise StreamsError(
                    f"the coordinator of group {group!r} refused to remove " + ", ".join(refused)
                )
            return
        except _Retry as busy:
            if time.monotonic() >= deadline:
                raise StreamsError(
                    f"could not remove the members of group {group!r} within {timeout:g} s ({busy})"
                ) from None
            time.sleep(0.2)
