//! What enforcement says of each packet: its [`Outcome`] and its row, [`Processed`]; below
//! enforcement, so that the burst detector beside the meters and shapers reads it too.

use bytemuck::{Pod, Zeroable};

use crate::codes::{codes, Code};
use crate::shaping::{PortDrop, ShapeDrop};
use crate::verdict::Verdict;

codes! {
    /// What happened to a packet, last stage first decided (`isolane.Outcome`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Outcome: "outcome" {
        /// Passed every stage (and was admitted at the port, if there is one).
        Pass = 0,
        /// As `Pass`, with its DSCP rewritten by a colour action.
        Remarked = 1,
        /// Passed meters and shapers; it reaches the port at its release time, after the batch's
        /// last packet: the port's verdict on it lands in the statistics of a later batch.
        Pending = 2,
        /// The classifier dropped it: not metered.
        DropClassifier = 3,
        /// A colour action dropped it.
        DropMeter = 4,
        /// A shaper's queue would have held too many bytes.
        DropShaperBytes = 5,
        /// A shaper would have held it too long.
        DropShaperTime = 6,
        /// The port's buffer was full.
        DropPortBuffer = 7,
        /// Its port queue was at its limit.
        DropPortQueue = 8,
    }
}

pub const OUTCOMES: usize = Outcome::ALL.len();
/// The `color` of a packet no meter saw because the classifier dropped it (`none` in
/// `isolane.Color`).
pub const NO_COLOR: u8 = 3;

impl Outcome {
    pub(crate) fn of_shaping(drop: ShapeDrop) -> Outcome {
        match drop {
            ShapeDrop::QueueBytes => Outcome::DropShaperBytes,
            ShapeDrop::QueueTime => Outcome::DropShaperTime,
        }
    }

    pub(crate) fn of_port(result: Result<(), PortDrop>, remarked: bool) -> Outcome {
        match result {
            Ok(()) if remarked => Outcome::Remarked,
            Ok(()) => Outcome::Pass,
            Err(PortDrop::BufferFull) => Outcome::DropPortBuffer,
            // A queue the port does not know cannot happen (queues are the spec's classes).
            Err(PortDrop::QueueLimit | PortDrop::UnknownQueue) => Outcome::DropPortQueue,
        }
    }
}

/// One packet's verdict and what QoS did to it, laid out as numpy's `isolane.PROCESSED_DTYPE`.
#[repr(C, packed)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct Processed {
    pub verdict: Verdict,
    /// `Color` after the meters (the worst any meter gave); green if none; [`NO_COLOR`].
    pub color: u8,
    pub outcome: u8,
    /// The DSCP the packet leaves with (rewritten by a remark).
    pub dscp: u8,
    /// When the shapers release it (its arrival time if unshaped); -1 when dropped before.
    pub release_ns: i64,
}

pub fn processed_fields() -> Vec<(&'static str, &'static str, usize)> {
    use std::mem::offset_of;
    let mut fields = crate::verdict::verdict_fields();
    let base = offset_of!(Processed, verdict);
    for field in &mut fields {
        field.2 += base;
    }
    fields.extend([
        ("color", "u1", offset_of!(Processed, color)),
        ("outcome", "u1", offset_of!(Processed, outcome)),
        ("dscp", "u1", offset_of!(Processed, dscp)),
        ("release_ns", "=i8", offset_of!(Processed, release_ns)),
    ]);
    fields
}
