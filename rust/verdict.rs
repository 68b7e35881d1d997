//! A packet's verdict from classification, as enforcement, the engine and the bindings read
//! it: below all three, so that the data path reads in one direction (parse, classify,
//! enforce, engine, bindings).

use bytemuck::{Pod, Zeroable};

use crate::codes::{codes, Code};

codes! {
    /// Why a packet got its verdict (`isolane.Reason`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Reason: "reason" {
        /// A rule of the tenant matched.
        Rule = 0,
        /// No rule matched: the tenant's default.
        Default = 1,
        /// No tenant claims the packet: the policy's unknown-tenant action.
        UnknownTenant = 2,
        /// The capture stopped before the headers needed: dropped.
        Truncated = 3,
        /// Impossible headers: dropped.
        Malformed = 4,
        /// The tenant's packet is not IP (ARP, ...): the tenant's default.
        NotIp = 5,
    }
}

pub const REASONS: usize = Reason::ALL.len();
/// The class of a packet that is dropped (shown as -1 in verdicts).
pub const NO_CLASS: u16 = u16::MAX;

#[inline]
pub fn class_id(class: u16) -> i32 {
    if class == NO_CLASS {
        -1
    } else {
        i32::from(class)
    }
}

codes! {
    /// What the classifier does with a packet (`isolane.Action`; a verdict's `action`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Action: "action" {
        Drop = 0,
        Allow = 1,
    }
}

pub const DROP: u8 = Action::Drop as u8;
pub const ALLOW: u8 = Action::Allow as u8;

/// One packet's verdict, laid out as numpy's `isolane.VERDICT_DTYPE`.
#[repr(C, packed)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct Verdict {
    pub tenant: i32,
    /// The index of the policy rule that matched (a policy rule may compile to several).
    pub rule: i32,
    pub cls: i32,
    pub action: u8,
    pub reason: u8,
}

pub fn verdict_fields() -> Vec<(&'static str, &'static str, usize)> {
    use std::mem::offset_of;
    vec![
        ("tenant", "=i4", offset_of!(Verdict, tenant)),
        ("rule", "=i4", offset_of!(Verdict, rule)),
        ("cls", "=i4", offset_of!(Verdict, cls)),
        ("action", "u1", offset_of!(Verdict, action)),
        ("reason", "u1", offset_of!(Verdict, reason)),
    ]
}
