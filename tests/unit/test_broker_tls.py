"""The test broker's secure listeners as ``server.properties`` renders them and a handle reads
them back: SASL_SSL beside SASL_PLAINTEXT with the same users and mechanisms, and a mutual-TLS
listener that requires a client certificate and trusts exactly the one the broker code made."""

from __future__ import annotations

from pathlib import Path

from streamstate.testing._broker_config import SecureListeners, server_properties
from streamstate.testing._tls import SecureAddresses


def _properties(tmp_path: Path) -> dict[str, str]:
    secure = SecureListeners(
        sasl_port=9001,
        ssl_port=9002,
        user="u",
        password="p",
        keystore=tmp_path / "broker-keystore.pem",
        sasl_ssl_port=9003,
        mtls_port=9004,
        client_truststore=tmp_path / "client.crt",
    )
    text = server_properties(
        data_dir=tmp_path / "data", broker_port=9000, controller_port=9999, secure=secure
    )
    (tmp_path / "server.properties").write_text(text, encoding="utf-8")
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def test_sasl_ssl_has_the_sasl_listeners_users_and_mechanisms(tmp_path: Path) -> None:
    props = _properties(tmp_path)
    assert "SASL_SSL:SASL_SSL" in props["listener.security.protocol.map"]
    for mechanism in ("plain", "scram-sha-256", "scram-sha-512"):
        key = f"listener.name.%s.{mechanism}.sasl.jaas.config"
        assert props[key % "sasl_ssl"] == props[key % "sasl_plaintext"]


def test_the_mtls_listener_requires_and_trusts_the_client_certificate(tmp_path: Path) -> None:
    props = _properties(tmp_path)
    assert "MTLS:SSL" in props["listener.security.protocol.map"]
    assert props["ssl.client.auth"] == "none"  # the other TLS listeners ask for none
    assert props["listener.name.mtls.ssl.client.auth"] == "required"
    assert props["listener.name.mtls.ssl.truststore.type"] == "PEM"
    assert props["listener.name.mtls.ssl.truststore.location"] == str(tmp_path / "client.crt")


def test_a_handle_reads_the_addresses_back(tmp_path: Path) -> None:
    _properties(tmp_path)
    handle = SecureAddresses()
    handle.instance_dir, handle.secure_listeners = tmp_path, True
    assert handle.sasl_plaintext_servers == "127.0.0.1:9001"
    assert handle.ssl_servers == "127.0.0.1:9002"
    assert handle.sasl_ssl_servers == "127.0.0.1:9003"
    assert handle.mtls_servers == "127.0.0.1:9004"
    assert handle.ssl_client_certificate_location == tmp_path / "tls" / "client.crt"
    handle.secure_listeners = False
    assert handle.mtls_servers is None
