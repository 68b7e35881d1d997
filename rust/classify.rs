//! First-match 5-tuple (+DSCP) classification with one-rule updates in microseconds.
//!
//! Tuple space search in the style of TupleMerge: rules live in hash tables keyed by their
//! source and destination prefixes cut to the table's lengths (a table hashes no more bits than
//! any of its rules specify); a bucket holds the rules sharing a masked key, in priority order,
//! and ports, protocol and DSCP are checked there. Tables are probed best-first (by the best
//! priority they hold), so a lookup stops as soon as no later table can beat its match.
//! Adding or removing a rule touches one bucket, which is what makes live updates cheap.

use rustc_hash::FxHashMap;

/// A packet's fields as the classifier sees them (addresses as 128-bit, IPv4-mapped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Key {
    pub src: u128,
    pub dst: u128,
    pub src_port: u16,
    pub dst_port: u16,
    pub proto: u8,
    pub dscp: u8,
}

/// One rule: prefixes over 128-bit addresses, inclusive port ranges, masked protocol and DSCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub src: u128,
    pub src_len: u8,
    pub dst: u128,
    pub dst_len: u8,
    pub src_ports: (u16, u16),
    pub dst_ports: (u16, u16),
    pub proto: u8,
    pub proto_mask: u8,
    pub dscp: u8,
    pub dscp_mask: u8,
}

impl Rule {
    /// A rule that matches every packet.
    pub const ANY: Rule = Rule {
        src: 0,
        src_len: 0,
        dst: 0,
        dst_len: 0,
        src_ports: (0, u16::MAX),
        dst_ports: (0, u16::MAX),
        proto: 0,
        proto_mask: 0,
        dscp: 0,
        dscp_mask: 0,
    };

    /// Checks the fields a table's hash does not cover (and the prefixes beyond its lengths).
    #[inline]
    pub fn matches(&self, key: &Key) -> bool {
        (key.src ^ self.src) & prefix_mask(self.src_len) == 0
            && (key.dst ^ self.dst) & prefix_mask(self.dst_len) == 0
            && (self.dst_ports.0..=self.dst_ports.1).contains(&key.dst_port)
            && (self.src_ports.0..=self.src_ports.1).contains(&key.src_port)
            && (key.proto ^ self.proto) & self.proto_mask == 0
            && (key.dscp ^ self.dscp) & self.dscp_mask == 0
    }

    /// Rejects what no packet could be compared against: lengths over 128, reversed ranges.
    pub fn check(&self) -> Result<(), String> {
        if self.src_len > 128 || self.dst_len > 128 {
            return Err(format!("prefix length {} is over 128", self.src_len.max(self.dst_len)));
        }
        if self.src_ports.0 > self.src_ports.1 || self.dst_ports.0 > self.dst_ports.1 {
            return Err("port range is reversed".to_string());
        }
        Ok(())
    }
}

#[inline]
pub fn prefix_mask(len: u8) -> u128 {
    match len {
        0 => 0,
        len => u128::MAX << (128 - u32::from(len.min(128))),
    }
}

/// How many rules may share one bucket before a rule goes to a more specific table.
const BUCKET_LIMIT: usize = 32;
/// Prefix lengths a new table is cut to: coarse enough to share, fine enough to spread.
const LENGTH_STEP: u8 = 8;

/// A rule's place in the order: ranks grow with the index but leave gaps, so that a rule
/// inserted between two others takes a rank between theirs and no other rule is renumbered
/// (which would copy every bucket of a table that is being patched).
type Rank = u64;
const RANK_GAP: Rank = 1 << 20;

/// Rules sharing a masked key, by rank; shared between clones of a table until one is edited.
type Bucket = std::sync::Arc<[(Rank, Rule)]>;

#[derive(Debug, Clone)]
struct TupleTable {
    src_len: u8,
    dst_len: u8,
    src_mask: u128,
    dst_mask: u128,
    /// Each bucket holds its rules themselves: no second lookup to check them.
    buckets: FxHashMap<(u128, u128), Bucket>,
    /// The best (smallest) rank in the table: the probe order and the early exit.
    best: Rank,
    rules: usize,
}

impl TupleTable {
    fn new(src_len: u8, dst_len: u8) -> Self {
        TupleTable {
            src_len,
            dst_len,
            src_mask: prefix_mask(src_len),
            dst_mask: prefix_mask(dst_len),
            buckets: FxHashMap::default(),
            best: Rank::MAX,
            rules: 0,
        }
    }

    fn accepts(&self, rule: &Rule) -> bool {
        self.src_len <= rule.src_len && self.dst_len <= rule.dst_len
    }

    fn bucket_key(&self, src: u128, dst: u128) -> (u128, u128) {
        (src & self.src_mask, dst & self.dst_mask)
    }

    fn holds(&self, rule: &Rule, rank: Rank) -> bool {
        self.accepts(rule) && self.buckets.get(&self.bucket_key(rule.src, rule.dst)).is_some_and(|b| b.iter().any(|(r, _)| *r == rank))
    }

    fn recompute_best(&mut self) {
        self.best = self.buckets.values().filter_map(|b| b.first().map(|(r, _)| *r)).min().unwrap_or(Rank::MAX);
    }
}

/// An ordered rule set: index 0 is checked first, and the first match wins.
/// Cloning is cheap (buckets are shared), so a live update can patch a copy.
#[derive(Debug, Clone, Default)]
pub struct RuleTable {
    rules: Vec<Rule>,
    /// `ranks[i]` is rule `i`'s rank; strictly increasing.
    ranks: Vec<Rank>,
    tables: Vec<TupleTable>,
}

impl RuleTable {
    pub fn new(rules: Vec<Rule>) -> Result<Self, (usize, String)> {
        for (index, rule) in rules.iter().enumerate() {
            rule.check().map_err(|why| (index, why))?;
        }
        let ranks = (1..=rules.len() as Rank).map(|i| i * RANK_GAP).collect();
        let mut table = RuleTable { rules, ranks, tables: Vec::new() };
        for index in 0..table.rules.len() {
            table.place(index);
        }
        table.sort_tables();
        Ok(table)
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn table_count(&self) -> usize {
        self.tables.len()
    }

    /// Bytes held by the rules and tables (buckets counted at their capacity).
    pub fn memory_bytes(&self) -> usize {
        let rules = self.rules.capacity() * std::mem::size_of::<Rule>() + self.ranks.capacity() * std::mem::size_of::<Rank>();
        let tables: usize = self
            .tables
            .iter()
            .map(|t| {
                let entry = std::mem::size_of::<((u128, u128), Bucket)>() + 1;
                let lists: usize = t.buckets.values().map(|b| 16 + b.len() * std::mem::size_of::<(Rank, Rule)>()).sum();
                std::mem::size_of::<TupleTable>() + t.buckets.capacity() * entry + lists
            })
            .sum();
        rules + tables
    }

    /// The first rule matching `key`, if any.
    #[inline]
    pub fn lookup(&self, key: &Key) -> Option<usize> {
        let mut best = Rank::MAX;
        for table in &self.tables {
            if table.best >= best {
                break;
            }
            let Some(bucket) = table.buckets.get(&table.bucket_key(key.src, key.dst)) else { continue };
            for (rank, rule) in bucket.iter() {
                if *rank >= best {
                    break;
                }
                if rule.matches(key) {
                    best = *rank;
                    break;
                }
            }
        }
        (best != Rank::MAX).then(|| self.ranks.partition_point(|&r| r < best))
    }

    pub fn lookup_all(&self, keys: &[Key], out: &mut [i32]) {
        for (key, slot) in keys.iter().zip(out.iter_mut()) {
            *slot = self.lookup(key).map_or(-1, |index| index as i32);
        }
    }

    /// Inserts `rule` at `index`: it is checked before the rules from `index` on, which move
    /// down by one.
    pub fn insert(&mut self, index: usize, rule: Rule) -> Result<(), String> {
        rule.check()?;
        if index > self.rules.len() {
            return Err(format!("index {index} is past the end ({} rules)", self.rules.len()));
        }
        let below = if index == 0 { 0 } else { self.ranks[index - 1] };
        let above = self.ranks.get(index).copied().unwrap_or(below + 2 * RANK_GAP);
        self.rules.insert(index, rule);
        if above - below < 2 {
            // No room between the neighbours (after ~20 inserts at one place): spread all out.
            *self = RuleTable::new(std::mem::take(&mut self.rules)).map_err(|(_, why)| why)?;
            return Ok(());
        }
        self.ranks.insert(index, below + (above - below) / 2);
        self.place(index);
        self.sort_tables();
        Ok(())
    }

    /// Removes the rule at `index`; the rules after it move up by one.
    pub fn remove(&mut self, index: usize) -> Result<Rule, String> {
        if index >= self.rules.len() {
            return Err(format!("no rule {index} ({} rules)", self.rules.len()));
        }
        let (rule, rank) = (self.rules[index], self.ranks[index]);
        if let Some(slot) = self.tables.iter().position(|t| t.holds(&rule, rank)) {
            let table = &mut self.tables[slot];
            let key = table.bucket_key(rule.src, rule.dst);
            if let Some(bucket) = table.buckets.get_mut(&key) {
                let kept: Vec<(Rank, Rule)> = bucket.iter().copied().filter(|(r, _)| *r != rank).collect();
                if kept.is_empty() {
                    table.buckets.remove(&key);
                } else {
                    *bucket = kept.into();
                }
            }
            table.rules -= 1;
            if table.rules == 0 {
                self.tables.swap_remove(slot);
            } else if table.best == rank {
                table.recompute_best();
            }
        }
        self.rules.remove(index);
        self.ranks.remove(index);
        self.sort_tables();
        Ok(rule)
    }

    /// Replaces the rule at `index` (a removal and an insertion at the same place).
    pub fn replace(&mut self, index: usize, rule: Rule) -> Result<Rule, String> {
        rule.check()?;
        let old = self.remove(index)?;
        self.insert(index, rule)?;
        Ok(old)
    }

    /// Puts rule `index` into the first table (best first) that can hash it without
    /// overfilling its bucket, or into a new table cut to the rule's own lengths.
    fn place(&mut self, index: usize) {
        let (rule, rank) = (self.rules[index], self.ranks[index]);
        let fits = self.tables.iter().position(|t| {
            t.accepts(&rule) && t.buckets.get(&t.bucket_key(rule.src, rule.dst)).map_or(0, |b| b.len()) < BUCKET_LIMIT
        });
        let slot = fits.unwrap_or_else(|| {
            let cut = |len: u8| if len == 128 { 128 } else { len - len % LENGTH_STEP };
            let wanted = (cut(rule.src_len), cut(rule.dst_len));
            // An identical tuple may exist with a full bucket: rules that share their masked
            // prefixes cannot be spread by hashing, so they share the bucket.
            self.tables.iter().position(|t| (t.src_len, t.dst_len) == wanted).unwrap_or_else(|| {
                self.tables.push(TupleTable::new(wanted.0, wanted.1));
                self.tables.len() - 1
            })
        });
        let table = &mut self.tables[slot];
        // Buckets are shared with clones of the table: an edit builds the bucket anew.
        let slot = table.buckets.entry(table.bucket_key(rule.src, rule.dst)).or_insert_with(|| Vec::new().into());
        let mut bucket = slot.to_vec();
        let at = bucket.partition_point(|(r, _)| *r < rank);
        bucket.insert(at, (rank, rule));
        *slot = bucket.into();
        table.rules += 1;
        table.best = table.best.min(rank);
    }

    fn sort_tables(&mut self) {
        self.tables.sort_by_key(|t| t.best);
    }
}

/// Parses a ClassBench rule file (`@src/len dst/len sp : sp dp : dp proto/mask flags/mask`).
pub fn parse_classbench(text: &str) -> Result<Vec<Rule>, (usize, String)> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(number, line)| classbench_rule(line).map_err(|why| (number + 1, why)))
        .collect()
}

fn classbench_rule(line: &str) -> Result<Rule, String> {
    let fields: Vec<&str> = line.trim().trim_start_matches('@').split('\t').map(str::trim).collect();
    if fields.len() < 5 {
        return Err(format!("expected 5 tab-separated fields, found {}", fields.len()));
    }
    let (src, src_len) = ipv4_prefix(fields[0])?;
    let (dst, dst_len) = ipv4_prefix(fields[1])?;
    let (proto, proto_mask) = fields[4].split_once('/').ok_or("protocol is not VALUE/MASK")?;
    let rule = Rule {
        src,
        src_len,
        dst,
        dst_len,
        src_ports: port_range(fields[2])?,
        dst_ports: port_range(fields[3])?,
        proto: hex_u8(proto)?,
        proto_mask: hex_u8(proto_mask)?,
        dscp: 0,
        dscp_mask: 0,
    };
    rule.check()?;
    Ok(rule)
}

/// An IPv4 prefix as an IPv4-mapped 128-bit prefix.
fn ipv4_prefix(text: &str) -> Result<(u128, u8), String> {
    let (address, len) = text.split_once('/').ok_or_else(|| format!("'{text}' is not ADDRESS/LENGTH"))?;
    let address: std::net::Ipv4Addr = address.parse().map_err(|_| format!("'{address}' is not an IPv4 address"))?;
    let len: u8 = len.parse().ok().filter(|&l| l <= 32).ok_or_else(|| format!("'{len}' is not a prefix length"))?;
    Ok((ipv4_mapped(u32::from(address)), 96 + len))
}

pub fn ipv4_mapped(address: u32) -> u128 {
    (0xffffu128 << 32) | u128::from(address)
}

fn port_range(text: &str) -> Result<(u16, u16), String> {
    let (lo, hi) = text.split_once(':').ok_or_else(|| format!("'{text}' is not LO : HI"))?;
    let port = |s: &str| s.trim().parse::<u16>().map_err(|_| format!("'{}' is not a port", s.trim()));
    Ok((port(lo)?, port(hi)?))
}

fn hex_u8(text: &str) -> Result<u8, String> {
    u8::from_str_radix(text.trim().trim_start_matches("0x").trim_start_matches("0X"), 16)
        .map_err(|_| format!("'{text}' is not a hex byte"))
}

#[cfg(test)]
mod tests;
