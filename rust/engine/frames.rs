//! Rules that match a tenant's frames by EtherType (`ethertype: arp` in a policy): ARP and other
//! non-IP traffic, or every IPv4 or IPv6 packet.
//!
//! Such a rule keeps its row in the tenant's IP rule table, so that policy rules stay numbered by
//! counting rows and edits work as for any rule, but as a row no IP packet matches: its DSCP
//! carries bit 6, which a packet's 6-bit DSCP never has. Its EtherType is in the row's source
//! port range. The engine reads those rows into a short list that non-IP packets are looked up in
//! (and IP packets, when a rule names IPv4 or IPv6).

use super::{EngineTables, TenantTables};
use crate::classify::Rule;
pub use crate::classify::FRAME_RULE_DSCP;
use crate::parse::PacketInfo;
use crate::verdict::{class_id, Reason, Verdict};

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;

/// The EtherType a table row matches frames by, if it is a frame rule's row.
#[inline]
pub fn frame_ethertype(rule: &Rule) -> Option<u16> {
    (rule.dscp & rule.dscp_mask & FRAME_RULE_DSCP != 0).then_some(rule.src_ports.0)
}

/// The row a frame rule of `ethertype` compiles to.
pub fn frame_rule(ethertype: u16) -> Rule {
    Rule { src_ports: (ethertype, ethertype), dscp: FRAME_RULE_DSCP, dscp_mask: FRAME_RULE_DSCP, ..Rule::ANY }
}

/// One frame rule of a tenant, with what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FrameRule {
    pub ethertype: u16,
    pub policy_rule: i32,
    pub class: u16,
    pub action: u8,
}

impl FrameRule {
    fn verdict(&self, tenant: i32) -> Verdict {
        Verdict { tenant, rule: self.policy_rule, cls: class_id(self.class), action: self.action, reason: Reason::Rule as u8 }
    }
}

/// A tenant's frame rules in policy order.
#[derive(Debug, Clone)]
pub(super) struct FrameRules {
    rules: Box<[FrameRule]>,
}

impl FrameRules {
    /// The tenant's frame rules, if it has any.
    fn new(rules: impl IntoIterator<Item = FrameRule>) -> Option<Box<FrameRules>> {
        let rules: Box<[FrameRule]> = rules.into_iter().collect();
        (!rules.is_empty()).then(|| Box::new(FrameRules { rules }))
    }

    /// Whether one names IPv4 or IPv6, so that IP packets must be looked up too.
    pub fn name_ip(&self) -> bool {
        self.rules.iter().any(|r| matches!(r.ethertype, ETHERTYPE_IPV4 | ETHERTYPE_IPV6))
    }

    /// The verdict of the first frame rule for a non-IP frame of `ethertype`, if one matches.
    #[inline]
    pub fn non_ip(&self, tenant: i32, ethertype: u16) -> Option<Verdict> {
        self.rules.iter().find(|r| r.ethertype == ethertype).map(|r| r.verdict(tenant))
    }

    /// The verdict on an IP packet of `ip_version`, given the verdict of the IP rules: a frame
    /// rule for its EtherType wins if it comes first in the policy.
    pub fn ip(&self, tenant: i32, ip_version: u8, by_ip_rules: Verdict) -> Verdict {
        let ethertype = if ip_version == 4 { ETHERTYPE_IPV4 } else { ETHERTYPE_IPV6 };
        let first = self.rules.iter().find(|r| r.ethertype == ethertype);
        match first {
            Some(rule) if by_ip_rules.reason != Reason::Rule as u8 || rule.policy_rule < by_ip_rules.rule => rule.verdict(tenant),
            _ => by_ip_rules,
        }
    }
}

impl TenantTables {
    /// The frame rules among these tables' rows.
    pub(super) fn read_frames(&self) -> Option<Box<FrameRules>> {
        let frame_rules = self.numbered_rows().zip(self.table.rules()).filter_map(|((policy_rule, row), rule)| {
            frame_ethertype(&rule).map(|ethertype| FrameRule { ethertype, policy_rule, class: row.class, action: row.action })
        });
        FrameRules::new(frame_rules)
    }
}

impl EngineTables {
    /// The verdict of a tenant's first frame rule for a frame that is not IP, if one matches.
    /// (Out of line, as `frames_first`: the common path stays as it was without frame rules.)
    #[cold]
    #[inline(never)]
    pub(super) fn by_frame_rules(&self, tenant: i32, info: &PacketInfo) -> Option<Verdict> {
        self.tenants[tenant as usize].frames.as_ref().and_then(|frames| frames.non_ip(tenant, info.ethertype))
    }

    /// The verdict of a tenant's frame rule for an IP packet, if it comes before `by_ip_rules`'s.
    #[cold]
    #[inline(never)]
    pub(super) fn frames_first(&self, tenant: i32, info: &PacketInfo, by_ip_rules: Verdict) -> Verdict {
        match &self.tenants[tenant as usize].frames {
            Some(frames) => frames.ip(tenant, info.ip_version, by_ip_rules),
            None => by_ip_rules,
        }
    }
}
