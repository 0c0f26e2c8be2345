//! TLS (`security.protocol=SSL`, and under SASL for `SASL_SSL`) through OpenSSL, which
//! librdkafka already links: the CA from `ssl.ca.location` (the system's when unset), a client
//! certificate and key from `ssl.certificate.location` / `ssl.key.location` (PEM, the key
//! optionally encrypted with `ssl.key.password`) for mutual TLS, and the broker's host name
//! checked against its certificate unless `ssl.endpoint.identification.algorithm=none`, as
//! librdkafka does.

use std::net::TcpStream;
use std::time::Duration;

use openssl::pkey::PKey;
use openssl::ssl::{SslConnector, SslFiletype, SslMethod, SslStream, SslVerifyMode};

use crate::error::GroupError;
use crate::transport::{tcp_connect, Connector, Transport};

impl Transport for SslStream<TcpStream> {}

/// The `ssl.*` settings this client reads (librdkafka's names).
#[derive(Clone, Default)]
pub struct TlsConfig {
    /// `ssl.ca.location`: a PEM file of trusted CA certificates.
    pub ca_location: Option<String>,
    /// `ssl.certificate.location`: the client's PEM certificate (mutual TLS).
    pub certificate_location: Option<String>,
    /// `ssl.key.location`: the client's PEM private key (mutual TLS).
    pub key_location: Option<String>,
    /// `ssl.key.password`: the private key's passphrase.
    pub key_password: Option<String>,
    /// `ssl.endpoint.identification.algorithm` is `https` (the default), not `none`.
    pub verify_hostname: bool,
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConfig")
            .field("ca_location", &self.ca_location)
            .field("certificate_location", &self.certificate_location)
            .field("key_location", &self.key_location)
            .field("verify_hostname", &self.verify_hostname)
            .finish_non_exhaustive()
    }
}

/// Connects with TLS.
pub struct TlsConnector {
    connector: SslConnector,
    verify_hostname: bool,
}

impl std::fmt::Debug for TlsConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConnector").finish_non_exhaustive()
    }
}

fn config_error(what: &str, path: Option<&str>, e: impl std::fmt::Display) -> GroupError {
    GroupError::Config(match path {
        Some(p) => format!("{what} {p:?} cannot be used: {e}"),
        None => format!("{what}: {e}"),
    })
}

impl TlsConnector {
    /// A connector for `config`; unreadable files are a [`GroupError::Config`] naming them.
    pub fn new(config: &TlsConfig) -> Result<Self, GroupError> {
        let mut b = SslConnector::builder(SslMethod::tls_client())
            .map_err(|e| config_error("TLS setup failed", None, e))?;
        if let Some(ca) = &config.ca_location {
            b.set_ca_file(ca)
                .map_err(|e| config_error("ssl.ca.location", Some(ca), e))?;
        }
        match (&config.certificate_location, &config.key_location) {
            (Some(cert), Some(key)) => {
                b.set_certificate_chain_file(cert)
                    .map_err(|e| config_error("ssl.certificate.location", Some(cert), e))?;
                match &config.key_password {
                    Some(pw) => {
                        let pem = std::fs::read(key)
                            .map_err(|e| config_error("ssl.key.location", Some(key), e))?;
                        let pkey = PKey::private_key_from_pem_passphrase(&pem, pw.as_bytes())
                            .map_err(|e| config_error("ssl.key.location", Some(key), e))?;
                        b.set_private_key(&pkey)
                            .map_err(|e| config_error("ssl.key.location", Some(key), e))?;
                    }
                    None => b
                        .set_private_key_file(key, SslFiletype::PEM)
                        .map_err(|e| config_error("ssl.key.location", Some(key), e))?,
                }
                b.check_private_key().map_err(|e| {
                    config_error(
                        "ssl.key.location",
                        Some(key),
                        format!("{e} (not the certificate's key?)"),
                    )
                })?;
            }
            (None, None) => {}
            _ => {
                return Err(GroupError::Config(
                    "mutual TLS needs both ssl.certificate.location and ssl.key.location"
                        .to_owned(),
                ))
            }
        }
        b.set_verify(SslVerifyMode::PEER);
        Ok(TlsConnector {
            connector: b.build(),
            verify_hostname: config.verify_hostname,
        })
    }

    /// Connects and runs the TLS handshake.
    pub fn connect_tls(
        &self,
        host: &str,
        port: u16,
        timeout: Duration,
    ) -> Result<SslStream<TcpStream>, GroupError> {
        let tcp = tcp_connect(host, port, timeout)?;
        let mut config = self
            .connector
            .configure()
            .map_err(|e| config_error("TLS setup failed", None, e))?;
        config.set_verify_hostname(self.verify_hostname);
        config.connect(host, tcp).map_err(|e| GroupError::Tls {
            broker: format!("{host}:{port}"),
            message: e.to_string(),
        })
    }
}

/// The [`GroupError::Tls`] for an I/O error that OpenSSL raised on an established connection,
/// or `None` for any other I/O error. Under TLS 1.3 a listener that requires a client
/// certificate (`ssl.client.auth=required`) refuses a missing or untrusted one only after the
/// client has finished its side of the handshake, in an alert that the first read meets: that
/// refusal is the handshake's failure, not a broken connection to retry.
pub(crate) fn tls_failure(broker: &str, err: &std::io::Error) -> Option<GroupError> {
    let ssl = err.get_ref()?.downcast_ref::<openssl::ssl::Error>()?;
    ssl.ssl_error()?;
    Some(GroupError::Tls {
        broker: broker.to_owned(),
        message: ssl.to_string(),
    })
}

impl Connector for TlsConnector {
    fn connect(
        &self,
        host: &str,
        port: u16,
        timeout: Duration,
    ) -> Result<Box<dyn Transport>, GroupError> {
        Ok(Box::new(self.connect_tls(host, port, timeout)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_files_are_named() {
        let err = TlsConnector::new(&TlsConfig {
            ca_location: Some("/nonexistent/ca.pem".to_owned()),
            ..TlsConfig::default()
        })
        .unwrap_err();
        assert!(err.to_string().contains("/nonexistent/ca.pem"), "{err}");
        let err = TlsConnector::new(&TlsConfig {
            certificate_location: Some("/x.pem".to_owned()),
            ..TlsConfig::default()
        })
        .unwrap_err();
        assert!(err.to_string().contains("ssl.key.location"), "{err}");
        assert!(TlsConnector::new(&TlsConfig::default()).is_ok());
    }
}
