//! The one error type of the core; the bindings map each variant to a named Python exception
//! (`rust/python/error.rs`).

use std::fmt;
use std::io;

#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// A capture file that is not a valid pcap/pcapng, with where it went wrong.
    #[error("byte offset {offset}{}: {reason}", PacketNumber(*packet))]
    Pcap {
        offset: u64,
        /// The number of the packet being read when the error was found, counted from 1 as
        /// Wireshark does; 0 for the file header, before any packet.
        packet: u64,
        reason: String,
    },
    /// Arrays handed in for a packet batch that do not describe a batch.
    #[error("{0}")]
    InvalidBatch(String),
    /// A spec the core refuses: tables, rules, meters, shapers, the port, microburst settings.
    /// `place` says which part, outermost first (`"tenant 0 ('a'), class 1: meter"`; empty for
    /// the spec as a whole), `reason` what is wrong with it.
    #[error("{}", Located(place, reason))]
    InvalidSpec { place: String, reason: String },
    /// A tenant the engine does not have, by name.
    #[error("no tenant '{0}'")]
    NoTenant(String),
    /// A rule edit at an index the table does not have: `rules` rules there, so an insertion
    /// may go at `0..=rules` and a removal or replacement at `0..rules`.
    #[error("{}", RuleIndexText(self))]
    RuleIndex {
        /// What the index counts: `"rule"` (table rows) or `"policy rule"`.
        what: &'static str,
        index: i64,
        rules: usize,
        insert: bool,
    },
    /// An argument a call cannot take: a thread count, an edit operation.
    #[error("{0}")]
    InvalidArgument(String),
    /// A live capture that cannot be opened or read: `message` says which step failed and why,
    /// `errno` is the kernel's answer when it gave one.
    #[error("{message}")]
    Capture { message: String, errno: Option<i32> },
    /// A YAML text that is not one document by the rules of `crate::yaml`.
    #[error(transparent)]
    Yaml(#[from] crate::yaml::YamlError),
    #[error(transparent)]
    Io(#[from] io::Error),
}

pub type Result<T> = std::result::Result<T, CoreError>;

impl CoreError {
    /// A spec refused as a whole (callers add the place with [`CoreError::within`]).
    pub fn spec(reason: impl Into<String>) -> CoreError {
        CoreError::InvalidSpec { place: String::new(), reason: reason.into() }
    }

    /// A part of a spec refused.
    pub fn spec_at(place: impl Into<String>, reason: impl Into<String>) -> CoreError {
        CoreError::InvalidSpec { place: place.into(), reason: reason.into() }
    }

    /// The error with `place` (the enclosing part of the spec) put before the place it names;
    /// errors other than [`CoreError::InvalidSpec`] are returned unchanged.
    pub fn within(self, place: impl Into<String>) -> CoreError {
        match self {
            CoreError::InvalidSpec { place: inner, reason } => {
                let outer = place.into();
                let place = if inner.is_empty() { outer } else { format!("{outer}: {inner}") };
                CoreError::InvalidSpec { place, reason }
            }
            other => other,
        }
    }
}

/// `, packet N`, or nothing for packet 0 (the file header).
struct PacketNumber(u64);

impl fmt::Display for PacketNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => Ok(()),
            number => write!(f, ", packet {number}"),
        }
    }
}

/// `place: reason`, or `reason` with no place.
struct Located<'a>(&'a str, &'a str);

impl fmt::Display for Located<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Located("", reason) => f.write_str(reason),
            Located(place, reason) => write!(f, "{place}: {reason}"),
        }
    }
}

struct RuleIndexText<'a>(&'a CoreError);

impl fmt::Display for RuleIndexText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let CoreError::RuleIndex { what, index, rules, insert } = self.0 else { unreachable!("RuleIndexText shows RuleIndex only") };
        let noun = if *rules == 1 { what.to_string() } else { format!("{what}s") };
        if *insert {
            write!(f, "cannot insert {what} {index} ({rules} {noun}: an insertion goes at 0..={rules})")
        } else {
            write!(f, "no {what} {index} ({rules} {noun})")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_nest_outermost_first() {
        let err = CoreError::spec("rate must be positive").within("shaper").within("tenant 'a', class 1");
        assert_eq!(err.to_string(), "tenant 'a', class 1: shaper: rate must be positive");
        assert!(matches!(&err, CoreError::InvalidSpec { place, .. } if place == "tenant 'a', class 1: shaper"));
        assert_eq!(CoreError::spec("a microburst queue view needs a port").to_string(), "a microburst queue view needs a port");
        assert_eq!(CoreError::spec_at("port", "buffer_bytes must be positive").to_string(), "port: buffer_bytes must be positive");
    }

    #[test]
    fn within_leaves_other_variants_alone() {
        let err = CoreError::NoTenant("a".into()).within("somewhere");
        assert_eq!(err.to_string(), "no tenant 'a'");
        assert_eq!(CoreError::InvalidArgument("threads must be at least 1".into()).within("x").to_string(), "threads must be at least 1");
    }

    #[test]
    fn rule_index_says_what_there_is() {
        let insert = CoreError::RuleIndex { what: "policy rule", index: 5, rules: 3, insert: true };
        assert_eq!(insert.to_string(), "cannot insert policy rule 5 (3 policy rules: an insertion goes at 0..=3)");
        let remove = CoreError::RuleIndex { what: "rule", index: -1, rules: 1, insert: false };
        assert_eq!(remove.to_string(), "no rule -1 (1 rule)");
    }
}
