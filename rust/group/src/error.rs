//! The one error type of this crate, with Kafka's error codes by name.

/// Everything that can go wrong talking to the group coordinator.
#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    /// The TCP connection to a broker failed or broke.
    #[error("connection to the broker at {broker} failed: {source}")]
    Io {
        /// `host:port` of the broker.
        broker: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A response did not parse as the message it should be.
    #[error("malformed response: {0}")]
    Malformed(String),
    /// The broker lacks an API this client needs (the streams group protocol, or a version).
    #[error("{0}")]
    Unsupported(String),
    /// A configuration this client cannot serve (e.g. SSL, not implemented yet).
    #[error("{0}")]
    Config(String),
    /// The broker answered with an error code.
    #[error("{api} failed with {name} (error code {code}){}", message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    Kafka {
        /// The request that failed, e.g. `StreamsGroupHeartbeat`.
        api: &'static str,
        /// Kafka's error code.
        code: i16,
        /// Kafka's name for the code, e.g. `FENCED_MEMBER_EPOCH`.
        name: &'static str,
        /// The broker's error message, if it sent one.
        message: Option<String>,
    },
    /// The TLS handshake with a broker failed (an untrusted certificate, a host name that
    /// does not match it, a refused client certificate).
    #[error("TLS handshake with the broker at {broker} failed: {message}")]
    Tls {
        /// `host:port` of the broker.
        broker: String,
        /// OpenSSL's account of it.
        message: String,
    },
    /// SASL authentication failed (a wrong password, an unknown user, a mechanism the listener
    /// does not enable): never retried, since retrying cannot fix it.
    #[error("SASL authentication with {mechanism} to the broker at {broker} failed: {message}")]
    Authentication {
        /// The SASL mechanism, e.g. `SCRAM-SHA-256`.
        mechanism: &'static str,
        /// `host:port` of the broker.
        broker: String,
        /// The broker's error message, or what the client found wrong.
        message: String,
    },
    /// The member was asked to do something its state forbids (e.g. heartbeat after leaving).
    #[error("{0}")]
    State(String),
}

impl GroupError {
    /// The error for a non-zero Kafka error code from `api`.
    pub fn kafka(api: &'static str, code: i16, message: Option<String>) -> Self {
        GroupError::Kafka {
            api,
            code,
            name: error_name(code),
            message,
        }
    }

    /// Kafka's error code, when the broker sent one.
    pub fn code(&self) -> Option<i16> {
        match self {
            GroupError::Kafka { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// Kafka's error codes this client handles or reports (`org.apache.kafka.common.protocol.Errors`).
pub mod codes {
    /// No error.
    pub const NONE: i16 = 0;
    /// The broker hit an unexpected exception.
    pub const UNKNOWN_SERVER_ERROR: i16 = -1;
    /// The coordinator is loading the group's state; retry.
    pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
    /// The coordinator is not available; rediscover it.
    pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    /// This broker is not the group's coordinator; rediscover it.
    pub const NOT_COORDINATOR: i16 = 16;
    /// The coordinator does not know the member: rejoin.
    pub const UNKNOWN_MEMBER_ID: i16 = 25;
    /// The member epoch is behind the group's: rejoin.
    pub const FENCED_MEMBER_EPOCH: i16 = 110;
}

/// Kafka's name for an error code, for messages (unknown codes get a generic name).
pub fn error_name(code: i16) -> &'static str {
    match code {
        0 => "NONE",
        -1 => "UNKNOWN_SERVER_ERROR",
        3 => "UNKNOWN_TOPIC_OR_PARTITION",
        7 => "REQUEST_TIMED_OUT",
        14 => "COORDINATOR_LOAD_IN_PROGRESS",
        15 => "COORDINATOR_NOT_AVAILABLE",
        16 => "NOT_COORDINATOR",
        24 => "INVALID_GROUP_ID",
        25 => "UNKNOWN_MEMBER_ID",
        29 => "TOPIC_AUTHORIZATION_FAILED",
        30 => "GROUP_AUTHORIZATION_FAILED",
        31 => "CLUSTER_AUTHORIZATION_FAILED",
        33 => "UNSUPPORTED_SASL_MECHANISM",
        34 => "ILLEGAL_SASL_STATE",
        35 => "UNSUPPORTED_VERSION",
        42 => "INVALID_REQUEST",
        58 => "SASL_AUTHENTICATION_FAILED",
        69 => "GROUP_ID_NOT_FOUND",
        81 => "GROUP_MAX_SIZE_REACHED",
        82 => "FENCED_INSTANCE_ID",
        88 => "UNSTABLE_OFFSET_COMMIT",
        110 => "FENCED_MEMBER_EPOCH",
        111 => "UNRELEASED_INSTANCE_ID",
        113 => "STALE_MEMBER_EPOCH",
        130 => "STREAMS_INVALID_TOPOLOGY",
        131 => "STREAMS_INVALID_TOPOLOGY_EPOCH",
        132 => "STREAMS_TOPOLOGY_FENCED",
        135 => "STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED",
        _ => "UNKNOWN_ERROR_CODE",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_errors_name_the_code_and_the_api() {
        let err = GroupError::kafka("StreamsGroupHeartbeat", 110, Some("epoch 3 < 5".into()));
        assert_eq!(
            err.to_string(),
            "StreamsGroupHeartbeat failed with FENCED_MEMBER_EPOCH (error code 110): epoch 3 < 5"
        );
        assert_eq!(err.code(), Some(codes::FENCED_MEMBER_EPOCH));
        assert_eq!(error_name(130), "STREAMS_INVALID_TOPOLOGY");
    }
}
