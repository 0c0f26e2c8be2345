//! SCRAM (RFC 5802; SHA-256 and SHA-512 as in RFC 7677), the client side, as Kafka's
//! `ScramSaslClient` runs it: client-first, server-first, client-final with the proof, and the
//! server's signature checked before the connection is trusted.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256, Sha512};

use crate::error::GroupError;

/// The hash behind a SCRAM mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScramHash {
    /// `SCRAM-SHA-256`.
    Sha256,
    /// `SCRAM-SHA-512`.
    Sha512,
}

impl ScramHash {
    /// The SASL mechanism name.
    pub fn mechanism(self) -> &'static str {
        match self {
            ScramHash::Sha256 => "SCRAM-SHA-256",
            ScramHash::Sha512 => "SCRAM-SHA-512",
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            ScramHash::Sha256 => {
                let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(key)
                    .expect("HMAC takes keys of any length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            ScramHash::Sha512 => {
                let mut m = <Hmac<Sha512> as KeyInit>::new_from_slice(key)
                    .expect("HMAC takes keys of any length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramHash::Sha256 => Sha256::digest(data).to_vec(),
            ScramHash::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// `Hi(str, salt, i)` of RFC 5802 (PBKDF2 with this HMAC and one output block).
    fn hi(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut block = salt.to_vec();
        block.extend_from_slice(&1u32.to_be_bytes());
        let mut u = self.hmac(password, &block);
        let mut out = u.clone();
        for _ in 1..iterations {
            u = self.hmac(password, &u);
            out.iter_mut().zip(&u).for_each(|(o, x)| *o ^= x);
        }
        out
    }
}

/// Kafka's minimum iteration count for SCRAM-SHA-256/512 (`ScramMechanism.minIterations`).
const MIN_ITERATIONS: u32 = 4096;

/// `saslname` of RFC 5802: `=` and `,` escaped.
fn sasl_name(username: &str) -> String {
    username.replace('=', "=3D").replace(',', "=2C")
}

/// A fresh client nonce: 32 random bytes, base64 without the characters SCRAM reserves.
pub fn new_nonce() -> Result<String, GroupError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| GroupError::Config(format!("no randomness for the SCRAM nonce: {e}")))?;
    // Printable ASCII except ',' (RFC 5802 `printable`); base64 uses none of ','.
    Ok(B64.encode(bytes))
}

/// One SCRAM exchange in progress.
#[derive(Debug)]
pub struct ScramClient {
    hash: ScramHash,
    password: String,
    nonce: String,
    client_first_bare: String,
    server_signature: Option<Vec<u8>>,
}

impl ScramClient {
    /// Starts an exchange for `username` with the client `nonce`.
    pub fn new(hash: ScramHash, username: &str, password: &str, nonce: String) -> Self {
        let client_first_bare = format!("n={},r={nonce}", sasl_name(username));
        ScramClient {
            hash,
            password: password.to_owned(),
            nonce,
            client_first_bare,
            server_signature: None,
        }
    }

    /// The client-first message (no channel binding, no authorization id: `n,,`).
    pub fn client_first(&self) -> Vec<u8> {
        format!("n,,{}", self.client_first_bare).into_bytes()
    }

    fn fail(&self, what: &str) -> GroupError {
        GroupError::Authentication {
            mechanism: self.hash.mechanism(),
            broker: String::new(),
            message: what.to_owned(),
        }
    }

    /// The client-final message (with the proof) answering the broker's server-first message.
    pub fn client_final(&mut self, server_first: &[u8]) -> Result<Vec<u8>, GroupError> {
        let server_first = std::str::from_utf8(server_first)
            .map_err(|_| self.fail("server-first message is not UTF-8"))?;
        if let Some(e) = server_first.strip_prefix("e=") {
            return Err(self.fail(&format!("the broker refused the exchange: {e}")));
        }
        let (mut nonce, mut salt, mut iterations) = (None, None, None);
        for attr in server_first.split(',') {
            match attr.split_once('=') {
                Some(("r", v)) => nonce = Some(v),
                Some(("s", v)) => salt = Some(v),
                Some(("i", v)) => iterations = Some(v),
                _ => {}
            }
        }
        let bad = || self.fail(&format!("malformed server-first message {server_first:?}"));
        let (nonce, salt, iterations) = match (nonce, salt, iterations) {
            (Some(n), Some(s), Some(i)) => (n, s, i),
            _ => return Err(bad()),
        };
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err(self.fail("the broker's nonce does not extend the client's"));
        }
        let salt = B64.decode(salt).map_err(|_| bad())?;
        let iterations: u32 = iterations.parse().map_err(|_| bad())?;
        if iterations < MIN_ITERATIONS {
            return Err(self.fail(&format!(
                "{iterations} iterations is below the minimum {MIN_ITERATIONS}"
            )));
        }
        let without_proof = format!("c={},r={nonce}", B64.encode(b"n,,"));
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let h = self.hash;
        let salted = h.hi(self.password.as_bytes(), &salt, iterations);
        let client_key = h.hmac(&salted, b"Client Key");
        let stored_key = h.hash(&client_key);
        let client_signature = h.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&client_signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let server_key = h.hmac(&salted, b"Server Key");
        self.server_signature = Some(h.hmac(&server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", B64.encode(proof)).into_bytes())
    }

    /// Checks the broker's server-final message: its signature proves it knows the password.
    pub fn verify_server_final(&self, server_final: &[u8]) -> Result<(), GroupError> {
        let text = String::from_utf8_lossy(server_final);
        if let Some(e) = text.strip_prefix("e=") {
            return Err(self.fail(&format!("the broker refused the proof: {e}")));
        }
        let expected = self
            .server_signature
            .as_ref()
            .ok_or_else(|| self.fail("server-final message before client-final"))?;
        let got = text
            .split(',')
            .find_map(|a| a.strip_prefix("v="))
            .and_then(|v| B64.decode(v).ok());
        if got.as_deref() == Some(expected.as_slice()) {
            Ok(())
        } else {
            Err(self.fail("the broker's server signature is invalid"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677 section 3's example exchange.
    #[test]
    fn rfc7677_sha256_vector() {
        let mut c = ScramClient::new(
            ScramHash::Sha256,
            "user",
            "pencil",
            "rOprNGfwEbeRWgbNEkqO".to_owned(),
        );
        assert_eq!(c.client_first(), b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first =
            b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let client_final = c.client_final(server_first).unwrap();
        assert_eq!(
            String::from_utf8(client_final).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
             p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        c.verify_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap();
        let err = c
            .verify_server_final(b"v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap_err();
        assert!(err.to_string().contains("server signature"), "{err}");
        let err = c.verify_server_final(b"e=invalid-proof").unwrap_err();
        assert!(err.to_string().contains("invalid-proof"), "{err}");
    }

    #[test]
    fn server_first_is_checked() {
        let mut c = ScramClient::new(ScramHash::Sha512, "a=b,c", "pw", "abc".to_owned());
        assert_eq!(c.client_first(), b"n,,n=a=3Db=2Cc,r=abc");
        // The broker's nonce must extend the client's.
        assert!(c.client_final(b"r=xyz123,s=AAAA,i=4096").is_err());
        // Too few iterations (Kafka refuses below 4096).
        let err = c.client_final(b"r=abc123,s=AAAA,i=100").unwrap_err();
        assert!(err.to_string().contains("SCRAM-SHA-512"), "{err}");
        assert!(c.client_final(b"r=abc123,s=AAAA,i=4096").is_ok());
        assert!(new_nonce().unwrap().len() >= 32);
    }
}
