"""The secure listeners of a local broker as its clients see them: their addresses and the TLS
files a client needs (the broker's certificate to trust, a client certificate for mutual TLS).

:class:`SecureAddresses` is mixed into :class:`~streamstate.testing.broker.LocalKafka`; it reads
the addresses back from the written ``server.properties``, so a handle in another process finds
them. :func:`client_certificate` makes the client's key and self-signed certificate that the
mutual-TLS listener trusts.
"""

from __future__ import annotations

from pathlib import Path

from streamstate.testing._broker_config import (
    CERTIFICATE,
    listener_address,
    self_signed_certificate,
)

__all__ = ["CLIENT_CERTIFICATE", "CLIENT_KEY", "SecureAddresses", "client_certificate"]

CLIENT_CERTIFICATE = "client.crt"
"""The mutual-TLS client's self-signed certificate (PEM) in the ``tls/`` directory; it is also
the MTLS listener's whole truststore."""
CLIENT_KEY = "client.key"
"""The mutual-TLS client's private key (PEM, unencrypted) in the ``tls/`` directory."""


def client_certificate(tls_dir: Path) -> Path:
    """The client certificate (``CN=streamstate-client``, for TLS client authentication only)
    and its key in ``tls_dir``, made once with ``openssl``; returns the certificate's path.

    Raises:
        OSError: ``openssl`` is missing or a file cannot be written.
        subprocess.SubprocessError: ``openssl`` failed or took over a minute.
    """
    tls_dir.mkdir(parents=True, exist_ok=True)
    key, cert = tls_dir / CLIENT_KEY, tls_dir / CLIENT_CERTIFICATE
    # Java checks a client certificate's key usages even when it trusts it directly.
    extensions = [
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        "extendedKeyUsage=clientAuth",
    ]
    self_signed_certificate(key, cert, "/CN=streamstate-client", extensions)
    return cert


class SecureAddresses:
    """The secure listeners' addresses and TLS files of a broker started with
    ``secure_listeners=True`` (each address is ``None`` otherwise)."""

    instance_dir: Path
    secure_listeners: bool

    @property
    def properties_file(self) -> Path:
        """``server.properties`` in the instance directory."""
        return self.instance_dir / "server.properties"

    @property
    def _tls_dir(self) -> Path:
        return self.instance_dir / "tls"

    def _secure_address(self, name: str) -> str | None:
        if not self.secure_listeners:
            return None
        return listener_address(self.properties_file, name)

    @property
    def ssl_ca_location(self) -> Path:
        """The self-signed certificate of the TLS listeners (PEM), for ``ssl.ca.location``."""
        return self._tls_dir / CERTIFICATE

    @property
    def sasl_plaintext_servers(self) -> str | None:
        """The SASL_PLAINTEXT listener's address (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)."""
        return self._secure_address("SASL_PLAINTEXT")

    @property
    def ssl_servers(self) -> str | None:
        """The SSL listener's address (server authentication only)."""
        return self._secure_address("SSL")

    @property
    def sasl_ssl_servers(self) -> str | None:
        """The SASL_SSL listener's address: the SASL_PLAINTEXT listener's users and mechanisms
        over TLS with :attr:`ssl_ca_location`'s certificate."""
        return self._secure_address("SASL_SSL")

    @property
    def mtls_servers(self) -> str | None:
        """The mutual-TLS listener's address (``security.protocol=SSL``,
        ``ssl.client.auth=required``): it admits the client holding
        :attr:`ssl_client_certificate_location` and :attr:`ssl_client_key_location`."""
        return self._secure_address("MTLS")

    @property
    def ssl_client_certificate_location(self) -> Path:
        """The client certificate the mutual-TLS listener trusts, for
        ``ssl.certificate.location``."""
        return self._tls_dir / CLIENT_CERTIFICATE

    @property
    def ssl_client_key_location(self) -> Path:
        """Its private key (unencrypted PEM), for ``ssl.key.location``."""
        return self._tls_dir / CLIENT_KEY
