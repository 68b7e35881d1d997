//! isolane's data path: plain Rust, built and tested without Python.
//!
//! Domains, in the order the data path reads: [`batch`] (packet batches as flat arrays),
//! [`pcap`] (pcap/pcapng reading), [`parse`] (the VXLAN/Geneve-aware header parser),
//! [`classify`] (first-match rule tables), [`verdict`] (what classification says of a packet),
//! [`meter`] (RFC 2697/2698/4115 token-bucket meters), [`shaping`] (EDT shaper and egress port
//! model, in packet time), [`outcome`] (what enforcement says of a packet), [`bursts`]
//! (microburst detection per scope), [`timeline`] (time series per tenant and class, for
//! reports), [`enforce`] (meters, shapers, the port, the burst detector and the timeline
//! applied to classified packets, per tenant), [`engine`] (tables, updates and the
//! threads that classify and enforce batches); [`live`] captures batches from a Linux device
//! (AF_PACKET, TPACKET_V3 ring); apart from the data path, [`yaml`] reads policy
//! files (YAML 1.2 documents).
//!
//! Beside them: [`chunked_vec`] (vectors whose copies share their elements in chunks), [`codes`] (the integer codes of the records' columns, one enum a family, which
//! Python reads too), [`error`] (the core's one error type), [`memory`] (huge-page buffers) and
//! `pool` (the worker thread pools). The PyO3 bindings live apart in `python`, compiled only with
//! the `python` feature.

pub mod batch;
pub mod bursts;
pub mod chunked_vec;
pub mod classify;
pub mod codes;
pub mod enforce;
pub mod engine;
pub mod error;
#[cfg(target_os = "linux")]
pub mod live;
pub mod memory;
pub mod meter;
pub mod outcome;
pub mod parse;
pub mod pcap;
pub mod plain_rules;
mod pool;
pub mod shaping;
pub mod timeline;
pub mod verdict;
pub mod yaml;

#[cfg(feature = "python")]
mod python;

#[cfg(test)]
#[path = "../examples/common/rng.rs"]
pub(crate) mod test_rng;

pub use error::CoreError;
