//! Connections to brokers: a small [`Connector`] trait so that TLS and SASL sit below the
//! protocol code, and [`Connection`], which frames requests.
//!
//! `PLAINTEXT`, `SSL` ([`crate::tls`], OpenSSL), `SASL_PLAINTEXT` and `SASL_SSL` (PLAIN,
//! SCRAM-SHA-256/512, in [`crate::sasl`]).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::error::GroupError;
use crate::messages::{self, api, ApiVersions};
use crate::sasl::{SaslConnector, SaslMechanism};
use crate::tls::{tls_failure, TlsConfig, TlsConnector};

/// A byte stream to a broker.
pub trait Transport: Read + Write + Send {}

impl Transport for TcpStream {}

/// The largest response frame a broker may send this client (Kafka's own clients accept any
/// size; 64 MiB is far above any group response and stops a garbled size from allocating).
pub(crate) const MAX_RESPONSE_FRAME: i32 = 64 * 1024 * 1024;

/// Writes one whole request frame and reads its response frame, returning the bytes after the
/// correlation id, which must be `correlation_id`. Every request of this crate (the SASL
/// exchange too) goes through here: one rule for frame bounds and the correlation check.
pub(crate) fn round_trip(
    stream: &mut dyn Transport,
    broker: &str,
    request: &[u8],
    correlation_id: i32,
    max_frame: i32,
) -> Result<Vec<u8>, GroupError> {
    let io = |source: std::io::Error| {
        tls_failure(broker, &source).unwrap_or_else(|| GroupError::Io {
            broker: broker.to_owned(),
            source,
        })
    };
    stream.write_all(request).map_err(io)?;
    stream.flush().map_err(io)?;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).map_err(io)?;
    let size = i32::from_be_bytes(size);
    if !(4..=max_frame).contains(&size) {
        return Err(GroupError::Malformed(format!(
            "response frame of {size} bytes from {broker}"
        )));
    }
    let mut frame = vec![0u8; size as usize];
    stream.read_exact(&mut frame).map_err(io)?;
    let got = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
    if got != correlation_id {
        return Err(GroupError::Malformed(format!(
            "correlation id {got} from {broker}, expected {correlation_id}"
        )));
    }
    frame.drain(..4);
    Ok(frame)
}

/// Opens transports to brokers.
pub trait Connector: Send + Sync {
    /// A connected transport to `host:port`, with `timeout` on connect, reads and writes.
    fn connect(
        &self,
        host: &str,
        port: u16,
        timeout: Duration,
    ) -> Result<Box<dyn Transport>, GroupError>;
}

/// Plain TCP (`security.protocol=PLAINTEXT`).
#[derive(Debug, Default, Clone, Copy)]
pub struct PlaintextConnector;

fn refused(protocol: &str) -> GroupError {
    GroupError::Config(format!(
        "security.protocol must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, not {protocol}"
    ))
}

/// SASL settings: `sasl.mechanism`, `sasl.username`, `sasl.password`.
#[derive(Clone, Default)]
pub struct SaslConfig {
    /// `sasl.mechanism` (librdkafka's default is `GSSAPI`, which this client lacks).
    pub mechanism: Option<String>,
    /// `sasl.username`.
    pub username: Option<String>,
    /// `sasl.password`.
    pub password: Option<String>,
}

impl std::fmt::Debug for SaslConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslConfig")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// The connector for `security.protocol` with the SASL and TLS settings.
pub fn connector_for(
    protocol: &str,
    sasl: &SaslConfig,
    tls: &TlsConfig,
) -> Result<Box<dyn Connector>, GroupError> {
    let protocol = protocol.trim().to_ascii_uppercase();
    let sasl_over = |tls: Option<TlsConnector>| -> Result<Box<dyn Connector>, GroupError> {
        let name = sasl.mechanism.as_deref().ok_or_else(|| {
            GroupError::Config(format!(
                "security.protocol={protocol} needs sasl.mechanism (PLAIN, SCRAM-SHA-256 or \
                 SCRAM-SHA-512)"
            ))
        })?;
        let mechanism = SaslMechanism::parse(name)?;
        let (Some(username), Some(password)) = (&sasl.username, &sasl.password) else {
            return Err(GroupError::Config(format!(
                "sasl.mechanism={} needs sasl.username and sasl.password",
                mechanism.name()
            )));
        };
        Ok(Box::new(SaslConnector::new(
            tls, mechanism, username, password,
        )))
    };
    match protocol.as_str() {
        "PLAINTEXT" => Ok(Box::new(PlaintextConnector)),
        "SSL" => Ok(Box::new(TlsConnector::new(tls)?)),
        "SASL_PLAINTEXT" => sasl_over(None),
        "SASL_SSL" => sasl_over(Some(TlsConnector::new(tls)?)),
        _ => Err(refused(&protocol)),
    }
}

impl Connector for PlaintextConnector {
    fn connect(
        &self,
        host: &str,
        port: u16,
        timeout: Duration,
    ) -> Result<Box<dyn Transport>, GroupError> {
        Ok(Box::new(tcp_connect(host, port, timeout)?))
    }
}

/// A TCP connection to `host:port`, with `timeout` on connect, reads and writes.
pub fn tcp_connect(host: &str, port: u16, timeout: Duration) -> Result<TcpStream, GroupError> {
    let broker = format!("{host}:{port}");
    let io = |source| GroupError::Io {
        broker: broker.clone(),
        source,
    };
    let mut last = None;
    for addr in (host, port).to_socket_addrs().map_err(io)? {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(stream) => {
                stream.set_read_timeout(Some(timeout)).map_err(io)?;
                stream.set_write_timeout(Some(timeout)).map_err(io)?;
                // Heartbeats are small and latency-bound.
                stream.set_nodelay(true).map_err(io)?;
                return Ok(stream);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(io(last.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::NotFound, "no address")
    })))
}

/// Parses `host:port`.
pub fn parse_host_port(s: &str) -> Result<(String, u16), GroupError> {
    let s = s.trim();
    let bad = || GroupError::Config(format!("bootstrap server {s:?} is not host:port"));
    let (host, port) = s.rsplit_once(':').ok_or_else(bad)?;
    let port = port.parse().map_err(|_| bad())?;
    Ok((
        host.trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned(),
        port,
    ))
}

/// One connection to one broker: sends a request and waits for its response (no pipelining:
/// a member has at most one heartbeat in flight, as Kafka's clients do).
pub struct Connection {
    stream: Box<dyn Transport>,
    /// `host:port`, for messages.
    pub broker: String,
    client_id: String,
    next_correlation_id: i32,
    /// The broker's API versions, asked once per connection.
    pub versions: ApiVersions,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("broker", &self.broker)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Connects and asks the broker's API versions.
    pub fn open(
        connector: &dyn Connector,
        host: &str,
        port: u16,
        client_id: &str,
        timeout: Duration,
    ) -> Result<Self, GroupError> {
        let stream = connector.connect(host, port, timeout)?;
        let mut conn = Connection {
            stream,
            broker: format!("{host}:{port}"),
            client_id: client_id.to_owned(),
            next_correlation_id: 0,
            versions: ApiVersions::default(),
        };
        let body = conn.send(
            api::API_VERSIONS,
            messages::API_VERSIONS_VERSION,
            &messages::encode_api_versions_request(),
        )?;
        conn.versions = messages::decode_api_versions_response(&body)?;
        Ok(conn)
    }

    /// The `StreamsGroupHeartbeat` version to use with this broker, or the error that says the
    /// broker has no streams groups.
    pub fn heartbeat_version(&self) -> Result<i16, GroupError> {
        match self.versions.range(api::STREAMS_GROUP_HEARTBEAT) {
            Some((lo, hi)) if lo <= messages::MAX_HEARTBEAT_VERSION => {
                Ok(hi.min(messages::MAX_HEARTBEAT_VERSION))
            }
            _ => Err(GroupError::Unsupported(format!(
                "the broker at {} does not support the streams rebalance protocol (KIP-1071; \
                 Kafka 4.2+ with streams groups enabled, its streams.version feature is {}): set \
                 group.protocol=classic",
                self.broker,
                self.versions.feature_level("streams.version")
            ))),
        }
    }

    /// Sends one request and returns the response body (response header stripped).
    pub fn send(&mut self, api_key: i16, version: i16, body: &[u8]) -> Result<Vec<u8>, GroupError> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let request = messages::frame(api_key, version, correlation_id, &self.client_id, body);
        let frame = round_trip(
            self.stream.as_mut(),
            &self.broker,
            &request,
            correlation_id,
            MAX_RESPONSE_FRAME,
        )?;
        // Response header v0 for ApiVersions (so that any client can read it), v1 (with tagged
        // fields) for every flexible response.
        let mut r = crate::wire::Reader::new(&frame, "response header");
        if api_key != api::API_VERSIONS {
            r.skip_tagged_fields()?;
        }
        let body_start = r.position();
        Ok(frame[body_start..].to_vec())
    }

    /// Finds the coordinator of `group_id`: `(host, port)`.
    pub fn find_coordinator(&mut self, group_id: &str) -> Result<(String, u16), GroupError> {
        let version = match self.versions.range(api::FIND_COORDINATOR) {
            Some((_, hi)) if hi >= 4 => hi.min(6),
            _ => {
                return Err(GroupError::Unsupported(format!(
                    "the broker at {} lacks FindCoordinator v4+ (Kafka 3.0+)",
                    self.broker
                )))
            }
        };
        let body = self.send(
            api::FIND_COORDINATOR,
            version,
            &messages::encode_find_coordinator_request(group_id),
        )?;
        let (_, host, port) = messages::decode_find_coordinator_response(&body)?;
        let port = u16::try_from(port)
            .map_err(|_| GroupError::Malformed(format!("coordinator port {port}")))?;
        Ok((host, port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn security_protocols_are_chosen() {
        let (none, tls) = (SaslConfig::default(), TlsConfig::default());
        assert!(connector_for("PLAINTEXT", &none, &tls).is_ok());
        assert!(connector_for("ssl", &none, &tls).is_ok());
        let err = connector_for("SASL_SSL", &none, &tls).err().unwrap();
        assert!(
            err.to_string().contains("SASL_SSL needs sasl.mechanism"),
            "{err}"
        );
        let err = connector_for("TLS", &none, &tls).err().unwrap();
        assert!(err.to_string().contains("not TLS"), "{err}");
        let err = connector_for("SASL_PLAINTEXT", &none, &tls).err().unwrap();
        assert!(err.to_string().contains("sasl.mechanism"), "{err}");
        let mut sasl = SaslConfig {
            mechanism: Some("SCRAM-SHA-256".to_owned()),
            username: Some("u".to_owned()),
            ..SaslConfig::default()
        };
        let err = connector_for("sasl_plaintext", &sasl, &tls).err().unwrap();
        assert!(err.to_string().contains("sasl.password"), "{err}");
        sasl.password = Some("p".to_owned());
        assert!(connector_for("sasl_plaintext", &sasl, &tls).is_ok());
        assert!(connector_for("sasl_ssl", &sasl, &tls).is_ok());
    }

    #[test]
    fn host_port_parses() {
        assert_eq!(
            parse_host_port(" 127.0.0.1:9092").unwrap(),
            ("127.0.0.1".to_owned(), 9092)
        );
        assert_eq!(parse_host_port("[::1]:9").unwrap(), ("::1".to_owned(), 9));
        assert!(parse_host_port("nohost").is_err());
    }
}
