//! A policy document's rules that are plainly valid, read where the document is read (on the
//! YAML reader's thread), so that Python takes each as it is instead of checking it.
//!
//! "Plainly valid": `isolane.policy.validate` reads the rule without an error, and reading it
//! is plain to tell here. That is, its keys are among `name`, `action`, `class`, `src`, `dst`,
//! `src_ports`, `dst_ports`, `proto` and `dscp`; its names are printable ASCII; its prefixes are
//! IPv4 (or `any`); its ports are integers, `lo-hi` texts or `[lo, hi]` pairs; its protocols and
//! DSCPs are numbers or names of the [`Vocabulary`] Python gives. Any other rule, valid or not,
//! is left to Python, which reads it as before, with its errors and their places.

use rustc_hash::FxHashMap;

use crate::classify::Rule;
use crate::yaml::Value;

/// The names and limits a rule is read with, as `isolane.policy.constants` has them.
#[derive(Debug, Clone, Default)]
pub struct Vocabulary {
    pub protocols: FxHashMap<String, u8>,
    pub dscps: FxHashMap<String, u8>,
    /// Protocols whose packets carry ports: a rule that matches ports may name no other.
    pub port_protocols: Vec<u8>,
    /// The most table rules one rule may expand into (the product of its list lengths).
    pub max_expansion: u64,
}

/// A rule as `isolane.policy.model.Rule` holds it, before its class is resolved: `None` for a
/// field that matches anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlainRule {
    pub allow: bool,
    /// The class the rule names (only an `allow` rule names one).
    pub class: Option<String>,
    /// An IPv4 prefix as `CompactPrefix` holds it: the address shifted left by 8, or the length.
    pub src: Option<u64>,
    pub dst: Option<u64>,
    /// Sorted, merged, inclusive ranges; never the whole port space.
    pub src_ports: Option<Vec<(u16, u16)>>,
    pub dst_ports: Option<Vec<(u16, u16)>>,
    /// Sorted numbers without repeats.
    pub proto: Option<Vec<u8>>,
    pub dscp: Option<Vec<u8>>,
    pub name: Option<String>,
}

const MAX_PORT: u16 = u16::MAX;
const MAX_DSCP: u8 = 63;
/// Python reads no number longer than this (`isolane.policy.units.MOST_DIGITS`).
const MOST_DIGITS: usize = 100;

/// Each rule of a tenant `item` (a mapping with a list under `rules`), as a [`PlainRule`] or
/// `None` where Python must read it; `None` for an item without such a list.
pub fn plain_rules(item: &Value, vocabulary: &Vocabulary) -> Option<Vec<Option<PlainRule>>> {
    let Value::Map(entries) = item else { return None };
    let Some((_, Value::Seq(rules))) = entries.iter().find(|(key, _)| matches!(key, Value::Str(key) if key == "rules")) else { return None };
    Some(rules.iter().map(|rule| plain_rule(rule, vocabulary)).collect())
}

/// The values of a rule's keys, each where given.
#[derive(Default)]
struct Given<'a> {
    name: Option<&'a Value>,
    action: Option<&'a Value>,
    class: Option<&'a Value>,
    src: Option<&'a Value>,
    dst: Option<&'a Value>,
    src_ports: Option<&'a Value>,
    dst_ports: Option<&'a Value>,
    proto: Option<&'a Value>,
    dscp: Option<&'a Value>,
}

impl<'a> Given<'a> {
    /// The keys of a mapping, if each is a key a plain rule may have (and none repeats: the
    /// YAML reader refuses a repeated key).
    fn of(rule: &'a Value) -> Option<Self> {
        let Value::Map(entries) = rule else { return None };
        let mut given = Given::default();
        for (key, value) in entries {
            let Value::Str(key) = key else { return None };
            let slot = match key.as_str() {
                "name" => &mut given.name,
                "action" => &mut given.action,
                "class" => &mut given.class,
                "src" => &mut given.src,
                "dst" => &mut given.dst,
                "src_ports" => &mut given.src_ports,
                "dst_ports" => &mut given.dst_ports,
                "proto" => &mut given.proto,
                "dscp" => &mut given.dscp,
                _ => return None,
            };
            *slot = Some(value);
        }
        Some(given)
    }
}

/// `rule` as a [`PlainRule`], if it is one.
pub fn plain_rule(rule: &Value, vocabulary: &Vocabulary) -> Option<PlainRule> {
    let given = Given::of(rule)?;
    let allow = match given.action? {
        Value::Str(action) if action == "allow" => true,
        Value::Str(action) if action == "drop" => false,
        _ => return None,
    };
    let class = read_given(given.class, printable_ascii)?;
    if class.is_some() && !allow {
        return None; // a drop rule puts packets in no class
    }
    let proto = read_given(given.proto, |value| numbers(value, &vocabulary.protocols, u8::MAX))?;
    let matches_ports = given.src_ports.is_some() || given.dst_ports.is_some();
    if matches_ports && proto.as_ref().is_some_and(|proto| proto.iter().any(|p| !vocabulary.port_protocols.contains(p))) {
        return None;
    }
    let plain = PlainRule {
        allow,
        class,
        src: optional(given.src, ipv4_prefix)?,
        dst: optional(given.dst, ipv4_prefix)?,
        src_ports: optional(given.src_ports, ports)?,
        dst_ports: optional(given.dst_ports, ports)?,
        proto,
        dscp: read_given(given.dscp, |value| numbers(value, &vocabulary.dscps, MAX_DSCP))?,
        name: read_given(given.name, printable_ascii)?,
    };
    (plain.expansion() <= vocabulary.max_expansion).then_some(plain)
}

impl PlainRule {
    /// The table rules this rule compiles into, in the order `isolane.policy.compile` gives
    /// them: by protocol, then DSCP, then source ports, then destination ports. Addresses are
    /// over the 128-bit space, IPv4 as IPv4-mapped IPv6.
    pub fn table_rules(&self) -> Vec<Rule> {
        let (src, src_len) = mapped(self.src);
        let (dst, dst_len) = mapped(self.dst);
        let any_ports = [(0, MAX_PORT)];
        let matched = |values: &Option<Vec<u8>>| values.as_ref().map_or(vec![None], |values| values.iter().copied().map(Some).collect());
        let (protos, dscps) = (matched(&self.proto), matched(&self.dscp));
        let src_ports = self.src_ports.as_deref().unwrap_or(&any_ports);
        let dst_ports = self.dst_ports.as_deref().unwrap_or(&any_ports);
        let mut rules = Vec::with_capacity(self.expansion() as usize);
        for proto in &protos {
            for dscp in &dscps {
                for &src_ports in src_ports {
                    for &dst_ports in dst_ports {
                        rules.push(Rule {
                            src,
                            src_len,
                            dst,
                            dst_len,
                            src_ports,
                            dst_ports,
                            proto: proto.unwrap_or(0),
                            proto_mask: if proto.is_some() { u8::MAX } else { 0 },
                            dscp: dscp.unwrap_or(0),
                            dscp_mask: if dscp.is_some() { MAX_DSCP } else { 0 },
                        });
                    }
                }
            }
        }
        rules
    }

    /// How many table rules this rule compiles into, as `Rule.expansion` counts them.
    fn expansion(&self) -> u64 {
        let lengths =
            [self.proto.as_ref().map(Vec::len), self.dscp.as_ref().map(Vec::len), self.src_ports.as_ref().map(Vec::len), self.dst_ports.as_ref().map(Vec::len)];
        lengths.into_iter().map(|length| length.map_or(1, |length| length as u64)).product()
    }
}

/// A field that matches anything when absent, and may read as "anything" when given: `None`
/// if the value is not plain, else what it reads as.
fn optional<T>(value: Option<&Value>, read: impl Fn(&Value) -> Option<Option<T>>) -> Option<Option<T>> {
    value.map_or(Some(None), read)
}

/// A prefix as [`PlainRule`] holds it, over the 128-bit space: (address, length); any is (0, 0).
fn mapped(prefix: Option<u64>) -> (u128, u8) {
    const IPV4_MAPPED: u128 = 0xFFFF << 32;
    prefix.map_or((0, 0), |prefix| (IPV4_MAPPED | u128::from(prefix >> 8), 96 + (prefix & 0xFF) as u8))
}

/// A field read where given: `None` if the value is not plain.
fn read_given<T>(value: Option<&Value>, read: impl Fn(&Value) -> Option<T>) -> Option<Option<T>> {
    value.map_or(Some(None), |value| read(value).map(Some))
}

/// A string of printable ASCII, which Python takes as it is (a name in NFC, without a control character).
fn printable_ascii(value: &Value) -> Option<String> {
    match value {
        Value::Str(text) if text.bytes().all(|byte| (b' '..=b'~').contains(&byte)) => Some(text.clone()),
        _ => None,
    }
}

/// `any` (`Some(None)`), or an IPv4 prefix without host bits: `a.b.c.d` or `a.b.c.d/len`,
/// written as `isolane.policy.addresses.PREFIX_PATTERN` has it (no leading zeros).
fn ipv4_prefix(value: &Value) -> Option<Option<u64>> {
    let Value::Str(text) = value else { return None };
    if text == "any" {
        return Some(None);
    }
    let (address, length) = match text.split_once('/') {
        Some((address, length)) => (address, prefix_length(length)?),
        None => (text.as_str(), 32),
    };
    let mut octets = address.split('.');
    let mut bits = 0u32;
    for _ in 0..4 {
        bits = bits << 8 | u32::from(octet(octets.next()?)?);
    }
    let host_bits = (1u64 << (32 - length)) - 1;
    (octets.next().is_none() && u64::from(bits) & host_bits == 0).then_some(Some(u64::from(bits) << 8 | u64::from(length)))
}

/// Decimal digits without a leading zero (but `0` itself), as the pattern writes octets and lengths.
fn decimal(text: &str, most_digits: usize) -> Option<u32> {
    let digits_only = !text.is_empty() && text.len() <= most_digits && text.bytes().all(|byte| byte.is_ascii_digit());
    (digits_only && (text == "0" || !text.starts_with('0'))).then(|| text.parse().ok()).flatten()
}

fn octet(text: &str) -> Option<u8> {
    decimal(text, 3).and_then(|octet| u8::try_from(octet).ok())
}

fn prefix_length(text: &str) -> Option<u32> {
    decimal(text, 2).filter(|length| *length <= 32)
}

/// A port or range, or a non-empty list of them (where `[lo, hi]` is a range too), merged;
/// `Some(None)` for the whole port space.
fn ports(value: &Value) -> Option<Option<Vec<(u16, u16)>>> {
    let mut ranges = match value {
        Value::Seq(items) if items.is_empty() => return None,
        Value::Seq(items) => items.iter().map(|item| port(item, true)).collect::<Option<Vec<_>>>()?,
        one => vec![port(one, false)?],
    };
    ranges.sort_unstable();
    let mut merged: Vec<(u16, u16)> = Vec::with_capacity(ranges.len());
    for (lo, hi) in ranges {
        match merged.last_mut() {
            Some(last) if u32::from(lo) <= u32::from(last.1) + 1 => last.1 = last.1.max(hi),
            _ => merged.push((lo, hi)),
        }
    }
    Some((merged != [(0, MAX_PORT)]).then_some(merged))
}

/// An integer port, a `port` or `lo-hi` text, or (in a list) an `[lo, hi]` pair of integers.
fn port(value: &Value, in_list: bool) -> Option<(u16, u16)> {
    let (lo, hi) = match value {
        Value::Int(port) => (u16::try_from(*port).ok()?, u16::try_from(*port).ok()?),
        Value::Str(text) => match text.split_once('-') {
            Some((lo, hi)) => (port_text(lo)?, port_text(hi)?),
            None => (port_text(text)?, port_text(text)?),
        },
        Value::Seq(pair) if in_list => match pair.as_slice() {
            [Value::Int(lo), Value::Int(hi)] => (u16::try_from(*lo).ok()?, u16::try_from(*hi).ok()?),
            _ => return None,
        },
        _ => return None,
    };
    (lo <= hi).then_some((lo, hi))
}

/// A port written in decimal digits, leading zeros allowed.
fn port_text(text: &str) -> Option<u16> {
    if text.is_empty() || text.len() > MOST_DIGITS || !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let significant = text.trim_start_matches('0');
    if significant.len() > 5 {
        return None;
    }
    u16::try_from(significant.parse::<u32>().unwrap_or(0)).ok()
}

/// A name of `names` or a number up to `most`, or a non-empty list of them: sorted, without repeats.
fn numbers(value: &Value, names: &FxHashMap<String, u8>, most: u8) -> Option<Vec<u8>> {
    let items = match value {
        Value::Seq(items) if items.is_empty() => return None,
        Value::Seq(items) => items.as_slice(),
        one => std::slice::from_ref(one),
    };
    let number = |item: &Value| match item {
        Value::Str(name) => names.get(name).copied(),
        Value::Int(number) => u8::try_from(*number).ok().filter(|number| *number <= most),
        _ => None,
    };
    let mut out = items.iter().map(number).collect::<Option<Vec<u8>>>()?;
    out.sort_unstable();
    out.dedup();
    Some(out)
}

#[cfg(test)]
mod tests;
