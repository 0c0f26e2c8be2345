//! SASL over a plain or TLS connection (`SASL_PLAINTEXT`, `SASL_SSL`), as Kafka's
//! `SaslClientAuthenticator` runs it: `SaslHandshake` v1 (API 17) names the mechanism, then the
//! mechanism's tokens travel in `SaslAuthenticate` v1 (API 36) requests. `PLAIN` sends one
//! token; `SCRAM-SHA-256`/`-512` two, and the broker's signature is checked.
//!
//! A failure is a [`GroupError::Authentication`] naming the mechanism and the broker's message;
//! the member never retries it (a wrong password fails `start()` at once).

use std::time::Duration;

use crate::error::{error_name, GroupError};
use crate::scram::{new_nonce, ScramClient, ScramHash};
use crate::tls::TlsConnector;
use crate::transport::{round_trip, Connector, PlaintextConnector, Transport};
use crate::wire::Writer;

/// `SaslHandshake`'s API key.
pub const SASL_HANDSHAKE: i16 = 17;
/// `SaslAuthenticate`'s API key.
pub const SASL_AUTHENTICATE: i16 = 36;

/// A SASL mechanism.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SaslMechanism {
    /// `PLAIN` (RFC 4616): the password travels as is, so use it over TLS in production.
    Plain,
    /// `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    Scram(ScramHash),
}

impl SaslMechanism {
    /// The mechanism named by `sasl.mechanism` (librdkafka's and Kafka's names).
    pub fn parse(name: &str) -> Result<Self, GroupError> {
        match name.trim().to_ascii_uppercase().as_str() {
            "PLAIN" => Ok(SaslMechanism::Plain),
            "SCRAM-SHA-256" => Ok(SaslMechanism::Scram(ScramHash::Sha256)),
            "SCRAM-SHA-512" => Ok(SaslMechanism::Scram(ScramHash::Sha512)),
            other => Err(GroupError::Config(format!(
                "group.protocol=streams supports sasl.mechanism PLAIN, SCRAM-SHA-256 and \
                 SCRAM-SHA-512, not {other:?}: set group.protocol=classic for other mechanisms"
            ))),
        }
    }

    /// The name sent in `SaslHandshake`.
    pub fn name(&self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::Scram(h) => h.mechanism(),
        }
    }
}

/// Connects in plain TCP (`SASL_PLAINTEXT`) or TLS (`SASL_SSL`), then authenticates with SASL.
pub struct SaslConnector {
    tls: Option<TlsConnector>,
    mechanism: SaslMechanism,
    username: String,
    password: String,
    client_id: String,
}

impl std::fmt::Debug for SaslConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password.
        f.debug_struct("SaslConnector")
            .field("mechanism", &self.mechanism.name())
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

impl SaslConnector {
    /// A connector authenticating as `username` with `mechanism`, over `tls` when given.
    pub fn new(
        tls: Option<TlsConnector>,
        mechanism: SaslMechanism,
        username: &str,
        password: &str,
    ) -> Self {
        SaslConnector {
            tls,
            mechanism,
            username: username.to_owned(),
            password: password.to_owned(),
            client_id: "streamstate".to_owned(),
        }
    }
}

impl Connector for SaslConnector {
    fn connect(
        &self,
        host: &str,
        port: u16,
        timeout: Duration,
    ) -> Result<Box<dyn Transport>, GroupError> {
        let mut stream = match &self.tls {
            Some(tls) => tls.connect(host, port, timeout)?,
            None => PlaintextConnector.connect(host, port, timeout)?,
        };
        let broker = format!("{host}:{port}");
        authenticate(
            stream.as_mut(),
            &broker,
            &self.client_id,
            &self.mechanism,
            &self.username,
            &self.password,
        )
        .map_err(|e| match e {
            GroupError::Authentication {
                mechanism, message, ..
            } => GroupError::Authentication {
                mechanism,
                broker: broker.clone(),
                message,
            },
            other => other,
        })?;
        Ok(stream)
    }
}

/// The `SaslHandshake` v1 request body.
pub fn encode_handshake(mechanism: &str) -> Vec<u8> {
    let mut w = Writer::new();
    w.nullable_string(Some(mechanism));
    w.into_bytes()
}

/// The `SaslAuthenticate` v1 request body.
pub fn encode_authenticate(token: &[u8]) -> Vec<u8> {
    let mut out = i32::try_from(token.len())
        .unwrap_or(i32::MAX)
        .to_be_bytes()
        .to_vec();
    out.extend_from_slice(token);
    out
}

/// Runs the SASL exchange on a fresh connection.
fn authenticate(
    stream: &mut dyn Transport,
    broker: &str,
    client_id: &str,
    mechanism: &SaslMechanism,
    username: &str,
    password: &str,
) -> Result<(), GroupError> {
    let fail = |message: String| GroupError::Authentication {
        mechanism: mechanism.name(),
        broker: broker.to_owned(),
        message,
    };
    let mut exchange = Exchange {
        stream,
        broker,
        client_id,
        correlation_id: 0,
    };
    let body = exchange.send(SASL_HANDSHAKE, 1, &encode_handshake(mechanism.name()))?;
    let mut r = Cursor::new(&body, "SaslHandshake response");
    let code = r.i16()?;
    if code != 0 {
        let n = r.i32()?;
        let mut enabled = Vec::new();
        for _ in 0..n.max(0) {
            enabled.push(r.string()?);
        }
        return Err(fail(format!(
            "SaslHandshake failed with {} (error code {code}); the listener enables {}",
            error_name(code),
            if enabled.is_empty() {
                "no mechanism".to_owned()
            } else {
                enabled.join(", ")
            }
        )));
    }
    match mechanism {
        SaslMechanism::Plain => {
            let token = format!("\0{username}\0{password}");
            exchange.authenticate(token.as_bytes(), &fail)?;
        }
        SaslMechanism::Scram(hash) => {
            let mut scram = ScramClient::new(*hash, username, password, new_nonce()?);
            let server_first = exchange.authenticate(&scram.client_first(), &fail)?;
            let client_final = scram.client_final(&server_first)?;
            let server_final = exchange.authenticate(&client_final, &fail)?;
            scram.verify_server_final(&server_final)?;
        }
    }
    Ok(())
}

/// Request/response framing before the connection is authenticated: request header v1,
/// response header v0 (both SASL APIs at v1 are not flexible).
struct Exchange<'a> {
    stream: &'a mut dyn Transport,
    broker: &'a str,
    client_id: &'a str,
    correlation_id: i32,
}

impl Exchange<'_> {
    fn send(&mut self, api_key: i16, version: i16, body: &[u8]) -> Result<Vec<u8>, GroupError> {
        let correlation_id = self.correlation_id;
        self.correlation_id += 1;
        let mut w = Writer::new();
        w.i16(api_key);
        w.i16(version);
        w.i32(correlation_id);
        w.nullable_string(Some(self.client_id));
        let header = w.into_bytes();
        let size = i32::try_from(header.len() + body.len()).unwrap_or(i32::MAX);
        let mut request = size.to_be_bytes().to_vec();
        request.extend_from_slice(&header);
        request.extend_from_slice(body);
        // SASL frames are small: a tight bound, so a listener that is not SASL (answering
        // with something else) fails here rather than allocating.
        round_trip(
            self.stream,
            self.broker,
            &request,
            correlation_id,
            1024 * 1024,
        )
    }

    /// Sends one token; returns the broker's token, or the broker's error message.
    fn authenticate(
        &mut self,
        token: &[u8],
        fail: &dyn Fn(String) -> GroupError,
    ) -> Result<Vec<u8>, GroupError> {
        let body = self.send(SASL_AUTHENTICATE, 1, &encode_authenticate(token))?;
        let mut r = Cursor::new(&body, "SaslAuthenticate response");
        let code = r.i16()?;
        let message = r.nullable_string()?;
        if code != 0 {
            return Err(fail(format!(
                "{} (error code {code}){}",
                error_name(code),
                message.map(|m| format!(": {m}")).unwrap_or_default()
            )));
        }
        let n = r.i32()?;
        Ok(r.take(usize::try_from(n.max(0)).unwrap_or(0))?.to_vec())
    }
}

/// Reads the non-flexible types of the SASL responses (int16-length strings, int32-length
/// bytes), which the flexible-version reader of `wire` does not cover.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Cursor<'a> {
    fn new(buf: &'a [u8], what: &'static str) -> Self {
        Cursor { buf, pos: 0, what }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], GroupError> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.buf.len());
        let end = end.ok_or_else(|| GroupError::Malformed(format!("truncated {}", self.what)))?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn i16(&mut self) -> Result<i16, GroupError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Result<i32, GroupError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn nullable_string(&mut self) -> Result<Option<String>, GroupError> {
        let n = self.i16()?;
        if n < 0 {
            return Ok(None);
        }
        let b = self.take(usize::try_from(n).unwrap_or(0))?;
        Ok(Some(String::from_utf8_lossy(b).into_owned()))
    }

    fn string(&mut self) -> Result<String, GroupError> {
        Ok(self.nullable_string()?.unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_and_authenticate_encode_as_kafka() {
        // SaslHandshake v1: mechanism as an int16-length string.
        assert_eq!(
            encode_handshake("PLAIN"),
            [0, 5, b'P', b'L', b'A', b'I', b'N']
        );
        // SaslAuthenticate v1: auth_bytes as int32-length bytes.
        assert_eq!(
            encode_authenticate(b"\0u\0p"),
            [0, 0, 0, 4, 0, b'u', 0, b'p']
        );
    }

    #[test]
    fn responses_decode() {
        // SaslAuthenticate v1 response: error, message, auth_bytes, session lifetime.
        let body = [
            0, 58, 0, 3, b'b', b'a', b'd', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        let mut r = Cursor::new(&body, "test");
        assert_eq!(r.i16().unwrap(), 58);
        assert_eq!(r.nullable_string().unwrap().as_deref(), Some("bad"));
        assert_eq!(r.i32().unwrap(), 0);
        assert!(Cursor::new(&[0], "test").i16().is_err());
        assert_eq!(error_name(58), "SASL_AUTHENTICATION_FAILED");
    }

    #[test]
    fn mechanisms_parse() {
        assert!(SaslMechanism::parse("plain").unwrap() == SaslMechanism::Plain);
        assert_eq!(
            SaslMechanism::parse("SCRAM-SHA-512").unwrap().name(),
            "SCRAM-SHA-512"
        );
        let err = SaslMechanism::parse("GSSAPI").unwrap_err();
        assert!(err.to_string().contains("GSSAPI"), "{err}");
    }

    #[test]
    fn debug_hides_the_password() {
        let c = SaslConnector::new(None, SaslMechanism::Plain, "alice", "s3cret");
        assert!(!format!("{c:?}").contains("s3cret"));
    }
}
