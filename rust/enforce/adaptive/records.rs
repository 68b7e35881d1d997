//! What adaptive profiles report: the profile and switch-cause codes, each switch as a record
//! whose layout Python reads ([`ProfileEvent`]), and the packets and switches of each tenant
//! by profile ([`ProfileCounts`]).

use bytemuck::{Pod, Zeroable};

use crate::codes::codes;

codes! {
    /// A tenant's profile (`isolane.ProfileId`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    pub enum ProfileId: "profile" {
        Normal = 0,
        Burst = 1,
        Overload = 2,
    }
}

codes! {
    /// Why a tenant switched profiles (`isolane.SwitchCause`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum SwitchCause: "switch cause" {
        /// A rate event of its microburst scope started.
        BurstStarted = 0,
        /// The event ended and the hold passed.
        BurstEnded = 1,
        /// The port's buffer passed the overload threshold.
        Overload = 2,
        /// The buffer drained and its turn to return came.
        Recovered = 3,
        /// A policy update: every tenant starts the new policy in its normal profile.
        Update = 4,
    }
}

/// One switch, as `Engine.profile_events()` gives it (`isolane.PROFILE_EVENT_DTYPE`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct ProfileEvent {
    /// Packet time: the packet after which the tenant switched, or the instant a hold ended.
    pub time_ns: u64,
    /// Index into the names of `Enforcer::profile_tenants` (never removed).
    pub tenant: i32,
    /// The class that switched, or -1: the tenant.
    pub cls: i32,
    pub from: u8,
    pub to: u8,
    pub cause: u8,
    pub _pad: [u8; 5],
}

/// The layout of [`ProfileEvent`] as numpy fields: (name, type, offset).
pub fn profile_event_fields() -> Vec<(&'static str, &'static str, usize)> {
    use std::mem::offset_of;
    vec![
        ("time_ns", "=u8", offset_of!(ProfileEvent, time_ns)),
        ("tenant", "=i4", offset_of!(ProfileEvent, tenant)),
        ("cls", "=i4", offset_of!(ProfileEvent, cls)),
        ("from", "u1", offset_of!(ProfileEvent, from)),
        ("to", "u1", offset_of!(ProfileEvent, to)),
        ("cause", "u1", offset_of!(ProfileEvent, cause)),
    ]
}

/// Packets enforced under each profile, and switches, of one tenant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProfileCounts {
    pub packets: [u64; 3],
    pub switches: u64,
}

impl ProfileCounts {
    pub(super) fn add(&mut self, other: &ProfileCounts) {
        for (mine, theirs) in self.packets.iter_mut().zip(other.packets) {
            *mine += theirs;
        }
        self.switches += other.switches;
    }
}
