"""Which librdkafka error events ``MetadataClient`` takes for the cluster refusing the client:
each becomes the typed ``AuthenticationError`` naming the broker, anything else waits on."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from streamstate.clients.metadata import refusal
from streamstate.errors import SaslAuthenticationError, SslAuthenticationError

_CONFIG = {"bootstrap.servers": "10.0.0.5:9094", "sasl.mechanisms": "SCRAM-SHA-512"}


def test_a_refused_login_is_a_sasl_authentication_error_naming_the_mechanism() -> None:
    error = KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: Invalid password")
    refused = refusal(error, _CONFIG)
    assert isinstance(refused, SaslAuthenticationError)
    assert "bootstrap.servers=10.0.0.5:9094" in str(refused)
    assert "sasl.mechanism=SCRAM-SHA-512" in str(refused)
    assert "Invalid password" in str(refused)


@pytest.mark.parametrize(
    ("code", "text"),
    [
        # An untrusted broker certificate: the handshake itself fails.
        (KafkaError._SSL, "SSL handshake failed: certificate verify failed"),
        # A listener refusing the client's certificate after the handshake (TLS 1.3).
        (
            KafkaError._TRANSPORT,
            "Receive failed: error:0A000412:SSL routines::ssl/tls alert bad certificate",
        ),
    ],
)
def test_a_failed_tls_handshake_is_an_ssl_authentication_error(code: int, text: str) -> None:
    refused = refusal(KafkaError(code, text), _CONFIG)
    assert isinstance(refused, SslAuthenticationError)
    assert "TLS handshake with the broker at bootstrap.servers=10.0.0.5:9094 failed" in str(refused)


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (KafkaError._TRANSPORT, "Connect to ipv4#10.0.0.5:9094 failed: Connection refused"),
        (KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"),
        (KafkaError._TRANSPORT, "Receive failed: SSL routines::unexpected eof while reading"),
    ],
)
def test_other_errors_are_not_refusals(code: int, text: str) -> None:
    assert refusal(KafkaError(code, text), _CONFIG) is None
