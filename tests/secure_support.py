"""The client settings of the secure test broker's listeners (``LocalKafka(secure_listeners=
True)``: SASL_PLAINTEXT, SSL, SASL_SSL, mutual TLS), shared by the tests that connect through
them."""

from __future__ import annotations

from typing import Any

from streamstate.kafka_local import LocalKafka


def sasl_settings(
    mechanism: str = "PLAIN",
    user: str = LocalKafka.SASL_USER,
    password: str = LocalKafka.SASL_PASSWORD,
    *,
    tls: LocalKafka | None = None,
) -> dict[str, Any]:
    """SASL with ``mechanism`` as ``user`` (the broker's PLAIN user by default): over
    SASL_PLAINTEXT, or over SASL_SSL trusting the certificate of broker ``tls``."""
    settings = {
        "security.protocol": "SASL_PLAINTEXT" if tls is None else "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
    return settings if tls is None else {**settings, "ssl.ca.location": str(tls.ssl_ca_location)}


def tls_settings(broker: LocalKafka) -> dict[str, Any]:
    """TLS trusting ``broker``'s self-signed certificate (the SSL listener; the mutual-TLS one
    also wants :func:`client_certificate_settings`)."""
    return {"security.protocol": "SSL", "ssl.ca.location": str(broker.ssl_ca_location)}


def client_certificate_settings(broker: LocalKafka) -> dict[str, Any]:
    """The client certificate and key ``broker``'s mutual-TLS listener trusts."""
    return {
        "ssl.certificate.location": str(broker.ssl_client_certificate_location),
        "ssl.key.location": str(broker.ssl_client_key_location),
    }
