//! The one error type of the core; the bindings map each variant to a named Python exception.

use std::io;

#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// A capture file that is not a valid pcap/pcapng, with where it went wrong.
    #[error("byte offset {offset}, packet {packet}: {reason}")]
    Pcap {
        offset: u64,
        /// Zero-based index of the packet being read when the error was found.
        packet: u64,
        reason: String,
    },
    /// Arrays handed in for a packet batch that do not describe a batch.
    #[error("{0}")]
    InvalidBatch(String),
    /// A YAML text that is not one document by the rules of `crate::yaml`.
    #[error(transparent)]
    Yaml(#[from] crate::yaml::YamlError),
    #[error(transparent)]
    Io(#[from] io::Error),
}

pub type Result<T> = std::result::Result<T, CoreError>;
