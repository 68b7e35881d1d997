use super::*;
use crate::yaml::load;

fn vocabulary() -> Vocabulary {
    Vocabulary {
        protocols: [("tcp", 6), ("udp", 17), ("icmp", 1)].into_iter().map(|(name, number)| (name.to_owned(), number)).collect(),
        dscps: [("ef", 46), ("cs1", 8)].into_iter().map(|(name, number)| (name.to_owned(), number)).collect(),
        port_protocols: vec![6, 17],
        max_expansion: 64,
    }
}

/// The rule written in `yaml` (a flow mapping), if plain.
fn read(yaml: &str) -> Option<PlainRule> {
    plain_rule(&load(yaml).expect("test YAML is valid"), &vocabulary())
}

fn allow() -> PlainRule {
    PlainRule { allow: true, class: None, src: None, dst: None, src_ports: None, dst_ports: None, proto: None, dscp: None, name: None }
}

#[test]
fn a_typical_rule_reads_as_python_holds_it() {
    let rule = read("{dst: 10.1.2.3/32, dst_ports: 443, proto: tcp, action: allow}").unwrap();
    let dst = (10u64 << 24 | 1 << 16 | 2 << 8 | 3) << 8 | 32;
    assert_eq!(rule, PlainRule { dst: Some(dst), dst_ports: Some(vec![(443, 443)]), proto: Some(vec![6]), ..allow() });
}

#[test]
fn every_plain_key_is_read() {
    let rule = read("{name: web, action: allow, class: gold, src: 10.0.0.0/8, dst: any, src_ports: '1000-2000', dst_ports: [80, '8000-8080', [81, 90]], proto: [udp, tcp, 6], dscp: [ef, 8, cs1]}").unwrap();
    assert_eq!(rule.name.as_deref(), Some("web"));
    assert_eq!(rule.class.as_deref(), Some("gold"));
    assert_eq!(rule.src, Some(10 << 32 | 8));
    assert_eq!(rule.dst, None, "any matches anything");
    assert_eq!(rule.src_ports, Some(vec![(1000, 2000)]));
    assert_eq!(rule.dst_ports, Some(vec![(80, 90), (8000, 8080)]), "sorted and merged, adjacent ranges too");
    assert_eq!(rule.proto, Some(vec![6, 17]));
    assert_eq!(rule.dscp, Some(vec![8, 46]));
}

#[test]
fn the_whole_port_space_matches_any_port() {
    assert_eq!(read("{action: drop, dst_ports: '0-65535'}"), Some(PlainRule { allow: false, ..allow() }));
    assert_eq!(read("{action: drop, dst_ports: ['0-100', [101, 65535]]}"), Some(PlainRule { allow: false, ..allow() }));
    assert_eq!(read("{action: drop, src_ports: '0080-00090'}").unwrap().src_ports, Some(vec![(80, 90)]), "leading zeros in a port text");
}

#[test]
fn what_python_reports_or_reads_its_own_way_is_left_to_it() {
    for rule in [
        "{dst: 10.0.0.1/24, action: allow}",            // host bits
        "{dst: 10.0.0.01, action: allow}",              // a leading zero
        "{dst: 10.0.0.0/08, action: allow}",            // a leading zero in the length
        "{dst: 10.0.0.0/33, action: allow}",            // too long
        "{dst: 10.0.0.256, action: allow}",             // not an octet
        "{dst: 10.0.0, action: allow}",                 // three octets
        "{dst: 10.0.0.0.0, action: allow}",             // five
        "{dst: 'fd00::/64', action: allow}",            // IPv6: Python's
        "{dst: ' 10.0.0.0/8', action: allow}",          // spaces
        "{dst: 167772160, action: allow}",              // a number
        "{action: allow, class: gold, description: x}", // a key Python reads
        "{action: allow, ethertype: arp}",
        "{action: allow, colour: red}", // an unknown key
        "{dst: 10.0.0.0/8}",            // no action
        "{action: Allow}",
        "{action: drop, class: gold}",      // a class for a drop rule
        "{action: allow, class: café}",     // not ASCII
        "{action: allow, name: \"a\\tb\"}", // a control character
        "{action: allow, name: 1}",
        "{action: allow, dst_ports: []}",
        "{action: allow, dst_ports: 65536}",
        "{action: allow, dst_ports: -1}",
        "{action: allow, dst_ports: '90-80'}",
        "{action: allow, dst_ports: '80-'}",
        "{action: allow, dst_ports: [[90, 80]]}",
        "{action: allow, dst_ports: [[80, 90, 100]]}",
        "{action: allow, dst_ports: true}",
        "{action: allow, dst_ports: 80.0}",
        "{action: allow, proto: []}",
        "{action: allow, proto: TCP}",
        "{action: allow, proto: 256}",
        "{action: allow, dscp: 64}",
        "{action: allow, dscp: tcp}",
        "{action: allow, proto: icmp, dst_ports: 80}", // icmp has no ports
        "{action: allow, proto: [tcp, udp], dscp: [1, 2, 3, 4, 5, 6, 7, 8], dst_ports: [1, 3, 5, 7, 9]}", // 2 * 8 * 5 = 80 table rules
        "[action, allow]",
    ] {
        assert_eq!(read(rule), None, "{rule}");
    }
    assert!(read("{action: allow, proto: [tcp, udp], dscp: [1, 2, 3, 4, 5, 6, 7, 8], dst_ports: [1, 3, 5, 7]}").is_some(), "64 table rules: at the limit");
    assert!(read("{action: allow, proto: icmp, dst_ports: '0-65535'}").is_none(), "ports given, even if every port");
}

#[test]
fn a_tenants_rules_are_read_each_on_its_own() {
    let item = load("{name: a, rules: [{action: allow}, {action: nope}, {action: drop, dst: 10.0.0.0/8}]}").unwrap();
    let rules = plain_rules(&item, &vocabulary()).unwrap();
    assert_eq!(rules, vec![Some(allow()), None, Some(PlainRule { allow: false, dst: Some(10 << 32 | 8), ..allow() })]);
    assert_eq!(plain_rules(&load("{name: a}").unwrap(), &vocabulary()), None);
    assert_eq!(plain_rules(&load("{name: a, rules: {action: allow}}").unwrap(), &vocabulary()), None);
    assert_eq!(plain_rules(&load("[1]").unwrap(), &vocabulary()), None);
}

#[test]
fn a_rule_compiles_into_its_table_rules_in_order() {
    let rule = read("{src: 10.0.0.0/8, proto: [tcp, udp], dscp: ef, dst_ports: [80, 443], action: allow}").unwrap();
    let rules = rule.table_rules();
    let shown: Vec<_> = rules.iter().map(|r| (r.proto, r.proto_mask, r.dscp, r.dscp_mask, r.dst_ports, r.src_ports)).collect();
    assert_eq!(
        shown,
        vec![
            (6, 255, 46, 63, (80, 80), (0, 65535)),
            (6, 255, 46, 63, (443, 443), (0, 65535)),
            (17, 255, 46, 63, (80, 80), (0, 65535)),
            (17, 255, 46, 63, (443, 443), (0, 65535)),
        ]
    );
    assert!(rules.iter().all(|r| r.src == 0xFFFF_0A00_0000 && r.src_len == 104 && (r.dst, r.dst_len) == (0, 0)));
    assert_eq!(read("{action: drop}").unwrap().table_rules(), vec![crate::classify::Rule::ANY]);
}
