//! Hand-built packets through every branch of the parser, plus a property test that any
//! byte string parses without panicking.

use super::*;
use proptest::prelude::*;

fn ethernet(ethertype: u16, vlans: &[(u16, u16)]) -> Vec<u8> {
    let mut frame = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
    for &(tpid, id) in vlans {
        frame.extend_from_slice(&tpid.to_be_bytes());
        frame.extend_from_slice(&id.to_be_bytes());
    }
    frame.extend_from_slice(&ethertype.to_be_bytes());
    frame
}

fn ipv4(proto: u8, src: [u8; 4], dst: [u8; 4], payload: &[u8]) -> Vec<u8> {
    let total = (20 + payload.len()) as u16;
    let mut header = vec![0x45, 0xb8, 0, 0, 0, 1, 0, 0, 64, proto, 0, 0];
    header[2..4].copy_from_slice(&total.to_be_bytes());
    header.extend_from_slice(&src);
    header.extend_from_slice(&dst);
    header.extend_from_slice(payload);
    header
}

fn ipv6(next: u8, src: [u8; 16], dst: [u8; 16], payload: &[u8]) -> Vec<u8> {
    let mut header = vec![0x60 | 0x0b, 0x80, 0, 0, 0, 0, next, 64];
    header[4..6].copy_from_slice(&(payload.len() as u16).to_be_bytes());
    header.extend_from_slice(&src);
    header.extend_from_slice(&dst);
    header.extend_from_slice(payload);
    header
}

fn l4(src_port: u16, dst_port: u16, payload: &[u8]) -> Vec<u8> {
    let mut header = Vec::new();
    header.extend_from_slice(&src_port.to_be_bytes());
    header.extend_from_slice(&dst_port.to_be_bytes());
    header.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    header.extend_from_slice(&[0, 0]);
    header.extend_from_slice(payload);
    header
}

fn vxlan(flags: u8, vni: u32, inner: &[u8]) -> Vec<u8> {
    let mut header = vec![flags, 0, 0, 0];
    header.extend_from_slice(&(vni << 8).to_be_bytes());
    header.extend_from_slice(inner);
    header
}

fn mapped(v4: [u8; 4]) -> [u8; 16] {
    let mut addr = [0u8; 16];
    addr[10] = 0xff;
    addr[11] = 0xff;
    addr[12..].copy_from_slice(&v4);
    addr
}

fn inner_tcp_frame() -> Vec<u8> {
    let mut frame = ethernet(0x0800, &[]);
    frame.extend(ipv4(6, [10, 0, 0, 1], [10, 0, 0, 2], &l4(1234, 80, &[0; 12])));
    frame
}

fn vxlan_packet(vni: u32, inner: &[u8]) -> Vec<u8> {
    let mut packet = ethernet(0x0800, &[(0x8100, 42)]);
    packet.extend(ipv4(17, [192, 0, 2, 1], [192, 0, 2, 2], &l4(40000, 4789, &vxlan(0x08, vni, inner))));
    packet
}

fn parse(packet: &[u8]) -> PacketInfo {
    parse_packet(packet, packet.len() as u32, linktype::ETHERNET, &ParseConfig::default())
}

#[test]
fn vxlan_inner_five_tuple() {
    let info = parse(&vxlan_packet(0xabcdef, &inner_tcp_frame()));
    assert_eq!(info.status, Status::Ok as u8);
    assert_eq!(info.tunnel, Tunnel::Vxlan as u8);
    assert_eq!({ info.vni }, 0xabcdef);
    assert_eq!({ info.vlan }, 42);
    assert_eq!(info.outer_src, mapped([192, 0, 2, 1]));
    assert_eq!(info.src, mapped([10, 0, 0, 1]));
    assert_eq!(info.dst, mapped([10, 0, 0, 2]));
    assert_eq!((info.proto, { info.src_port }, { info.dst_port }), (6, 1234, 80));
    assert_eq!((info.ip_version, info.dscp, info.is_fragment, { info.ethertype }), (4, 0xb8 >> 2, 0, 0x0800));
}

#[test]
fn plain_udp_describes_outer_packet() {
    let mut packet = ethernet(0x0800, &[]);
    packet.extend(ipv4(17, [1, 2, 3, 4], [5, 6, 7, 8], &l4(53, 5353, &[1, 2, 3])));
    let info = parse(&packet);
    assert_eq!((info.status, info.tunnel, { info.vni }, { info.vlan }), (0, 0, -1, -1));
    assert_eq!(info.src, info.outer_src);
    assert_eq!(({ info.src_port }, { info.dst_port }), (53, 5353));
}

#[test]
fn vxlan_port_is_configurable() {
    let mut packet = ethernet(0x0800, &[]);
    packet.extend(ipv4(17, [1, 1, 1, 1], [2, 2, 2, 2], &l4(1, 8472, &vxlan(0x08, 7, &inner_tcp_frame()))));
    assert_eq!(parse(&packet).tunnel, Tunnel::None as u8);
    let config = ParseConfig { vxlan_ports: PortSet::new(&[4789, 8472]), ..ParseConfig::default() };
    let info = parse_packet(&packet, packet.len() as u32, linktype::ETHERNET, &config);
    assert_eq!(({ info.vni }, { info.dst_port }), (7, 80));
}

#[test]
fn vxlan_without_i_flag_is_malformed() {
    let info = parse(&vxlan_packet(5, &inner_tcp_frame()).iter().enumerate().map(|(i, &b)| if i == 46 { 0 } else { b }).collect::<Vec<_>>());
    assert_eq!((info.status, info.tunnel, { info.vni }), (Status::Malformed as u8, 1, -1));
}

#[test]
fn vxlan_gbp_flags_are_accepted() {
    let mut packet = ethernet(0x0800, &[]);
    let mut header = vxlan(0x88, 99, &inner_tcp_frame());
    header[2..4].copy_from_slice(&0x1234u16.to_be_bytes()); // group policy id
    packet.extend(ipv4(17, [1, 1, 1, 1], [2, 2, 2, 2], &l4(1, 4789, &header)));
    let info = parse(&packet);
    assert_eq!((info.status, { info.vni }, { info.dst_port }), (0, 99, 80));
}

#[test]
fn geneve_with_options_and_ip_payload() {
    let inner = ipv4(17, [10, 9, 9, 9], [10, 8, 8, 8], &l4(7, 9, &[]));
    let mut geneve = vec![0x02, 0x00, 0x08, 0x00, 0x12, 0x34, 0x56, 0x00];
    geneve.extend_from_slice(&[0x01, 0x02, 0x03, 0x01, 0xaa, 0xbb, 0xcc, 0xdd]); // one 4-byte option
    geneve.extend(inner);
    let mut packet = ethernet(0x86dd, &[]);
    packet.extend(ipv6(17, [0xfe; 16], [0xfd; 16], &l4(1, 6081, &geneve)));
    let info = parse(&packet);
    assert_eq!((info.status, info.tunnel, { info.vni }), (0, Tunnel::Geneve as u8, 0x123456));
    assert_eq!((info.outer_src, info.src), ([0xfe; 16], mapped([10, 9, 9, 9])));
    assert_eq!((info.ip_version, { info.src_port }, { info.dst_port }), (4, 7, 9));
}

#[test]
fn geneve_unknown_version_or_protocol_is_unsupported() {
    for header in [[0x40u8, 0, 0x65, 0x58, 0, 0, 1, 0], [0x00, 0, 0x88, 0x47, 0, 0, 1, 0]] {
        let mut packet = ethernet(0x0800, &[]);
        packet.extend(ipv4(17, [1, 1, 1, 1], [2, 2, 2, 2], &l4(1, 6081, &header)));
        assert_eq!(parse(&packet).status, Status::Unsupported as u8);
    }
    // A payload of an unknown protocol type keeps it as the tenant frame's EtherType.
    let mut packet = ethernet(0x0800, &[]);
    packet.extend(ipv4(17, [1, 1, 1, 1], [2, 2, 2, 2], &l4(1, 6081, &[0x00, 0, 0x88, 0x47, 0, 0, 1, 0])));
    assert_eq!({ parse(&packet).ethertype }, 0x8847);
}

#[test]
fn inner_arp_is_unsupported_but_keeps_vni() {
    let mut arp = ethernet(0x0806, &[]);
    arp.extend_from_slice(&[0; 28]);
    let info = parse(&vxlan_packet(300, &arp));
    assert_eq!((info.status, { info.vni }, info.ip_version, { info.ethertype }), (Status::Unsupported as u8, 300, 0, 0x0806));
    assert_eq!(info.src, [0; 16]);
}

#[test]
fn qinq_records_outermost_vlan() {
    let mut packet = ethernet(0x0800, &[(0x88a8, 0x2000 | 100), (0x8100, 200)]);
    packet.extend(ipv4(6, [1, 1, 1, 1], [2, 2, 2, 2], &l4(1, 2, &[0; 12])));
    let info = parse(&packet);
    assert_eq!((info.status, { info.vlan }, { info.dst_port }, { info.ethertype }), (0, 100, 2, 0x0800));
}

#[test]
fn ipv4_options_are_skipped() {
    let mut ip = ipv4(17, [1, 1, 1, 1], [2, 2, 2, 2], &[]);
    ip[0] = 0x46;
    ip.extend_from_slice(&[1, 1, 1, 0]); // NOP NOP NOP EOL
    ip.extend(l4(11, 22, &[]));
    let total = ip.len() as u16;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    let mut packet = ethernet(0x0800, &[]);
    packet.extend(ip);
    let info = parse(&packet);
    assert_eq!((info.status, { info.src_port }, { info.dst_port }), (0, 11, 22));
}

#[test]
fn ipv6_extension_headers_are_walked() {
    let mut chain = vec![43, 0, 0, 0, 0, 0, 0, 0]; // hop-by-hop -> routing
    chain.extend_from_slice(&[60, 0, 0, 0, 0, 0, 0, 0]); // routing -> destination options
    chain.extend_from_slice(&[44, 0, 0, 0, 0, 0, 0, 0]); // destination options -> fragment
    chain.extend_from_slice(&[6, 0, 0, 0, 0, 0, 0, 1]); // first fragment (M set) -> TCP
    chain.extend(l4(443, 5555, &[0; 12]));
    let mut packet = ethernet(0x86dd, &[]);
    packet.extend(ipv6(0, [1; 16], [2; 16], &chain));
    let info = parse(&packet);
    assert_eq!((info.status, info.proto, info.is_fragment), (0, 6, 1));
    assert_eq!(({ info.src_port }, { info.dst_port }, info.dscp), (443, 5555, 0xb8 >> 2));
}

#[test]
fn ipv6_chain_cut_short_leaves_proto_unknown() {
    let mut chain = vec![60, 0, 0, 0, 0, 0, 0, 0]; // hop-by-hop -> destination options
    chain.extend_from_slice(&[6, 0, 0, 0, 0, 0, 0, 0]); // destination options -> TCP
    chain.extend(l4(1, 2, &[0; 12]));
    let mut packet = ethernet(0x86dd, &[]);
    packet.extend(ipv6(0, [1; 16], [2; 16], &chain));
    let cut = &packet[..14 + 40 + 10];
    let info = parse_packet(cut, packet.len() as u32, linktype::ETHERNET, &ParseConfig::default());
    assert_eq!((info.status, info.ip_version, info.proto), (Status::Truncated as u8, 6, 0));
    assert_eq!(parse(&packet).proto, 6);
}

#[test]
fn non_first_fragments_have_no_ports() {
    let mut ip = ipv4(17, [1, 1, 1, 1], [2, 2, 2, 2], &l4(1, 4789, &[0; 16]));
    ip[6..8].copy_from_slice(&0x00b9u16.to_be_bytes()); // offset 185 * 8
    let mut packet = ethernet(0x0800, &[]);
    packet.extend(ip);
    let info = parse(&packet);
    assert_eq!((info.status, info.tunnel, info.proto, info.is_fragment), (0, 0, 17, 1));
    assert_eq!(({ info.src_port }, { info.dst_port }), (0, 0));

    let mut v6 = vec![17, 0, 0x05, 0x08, 0, 0, 0, 1]; // fragment header: offset 161, next UDP
    v6.extend(l4(1, 2, &[]));
    let mut packet = ethernet(0x86dd, &[]);
    packet.extend(ipv6(44, [1; 16], [2; 16], &v6));
    let info = parse(&packet);
    assert_eq!((info.status, info.proto, info.is_fragment, { info.dst_port }), (0, 17, 1, 0));
}

#[test]
fn outer_first_fragment_still_reveals_tenant() {
    let mut packet = vxlan_packet(77, &inner_tcp_frame());
    packet[14 + 4 + 6] = 0x20; // MF on the outer header (after one VLAN tag)
    let info = parse(&packet);
    assert_eq!((info.status, { info.vni }, info.is_fragment, { info.dst_port }), (0, 77, 1, 80));
}

#[test]
fn truncation_at_every_byte_keeps_what_was_reached() {
    let packet = vxlan_packet(12, &inner_tcp_frame());
    let full = parse(&packet);
    for cut in 0..packet.len() {
        let info = parse_packet(&packet[..cut], packet.len() as u32, linktype::ETHERNET, &ParseConfig::default());
        let needed_everything = cut >= packet.len() - 16; // TCP ports end 16 bytes before the end
        if needed_everything {
            assert_eq!(info, full, "cut at {cut}");
        } else {
            assert_eq!(info.status, Status::Truncated as u8, "cut at {cut}");
        }
        if cut >= 18 + 20 {
            assert_eq!(info.outer_src, full.outer_src, "cut at {cut}");
        }
        if cut >= 18 + 20 + 8 + 8 {
            assert_eq!({ info.vni }, 12, "cut at {cut}");
        }
    }
}

#[test]
fn short_frame_captured_whole_is_malformed() {
    let packet = vxlan_packet(12, &inner_tcp_frame());
    let cut = &packet[..60];
    let info = parse_packet(cut, cut.len() as u32, linktype::ETHERNET, &ParseConfig::default());
    assert_eq!(info.status, Status::Malformed as u8);
}

#[test]
fn impossible_ip_headers_are_malformed() {
    let mut packet = ethernet(0x0800, &[]);
    packet.extend(ipv4(6, [1, 1, 1, 1], [2, 2, 2, 2], &l4(1, 2, &[])));
    let mut bad_ihl = packet.clone();
    bad_ihl[14] = 0x44;
    let mut bad_version = packet.clone();
    bad_version[14] = 0x55;
    let mut bad_total = packet.clone();
    bad_total[16..18].copy_from_slice(&10u16.to_be_bytes());
    for bad in [bad_ihl, bad_version, bad_total] {
        assert_eq!(parse(&bad).status, Status::Malformed as u8);
    }
}

#[test]
fn ethernet_padding_is_not_read_as_ports() {
    let mut packet = ethernet(0x0800, &[]);
    let mut ip = ipv4(6, [1, 1, 1, 1], [2, 2, 2, 2], &[]);
    ip[2..4].copy_from_slice(&20u16.to_be_bytes());
    packet.extend(ip);
    packet.extend_from_slice(&[0xff; 26]); // padding up to the Ethernet minimum
    let info = parse(&packet);
    assert_eq!(info.status, Status::Malformed as u8);
    assert_eq!(({ info.src_port }, { info.dst_port }), (0, 0));
}

#[test]
fn linux_cooked_and_raw_links() {
    let ip = ipv4(17, [1, 1, 1, 1], [2, 2, 2, 2], &l4(3, 4, &[]));
    let mut sll = vec![0, 0, 0, 1, 0, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x00];
    sll.extend_from_slice(&ip);
    let mut sll2 = vec![0x08, 0x00, 0, 0, 0, 0, 0, 1, 0, 1, 0, 6, 0, 0, 0, 0, 0, 0, 0, 0];
    sll2.extend_from_slice(&ip);
    let mut null = vec![2, 0, 0, 0];
    null.extend_from_slice(&ip);
    for (link, packet) in [(linktype::LINUX_SLL, sll), (linktype::LINUX_SLL2, sll2), (linktype::RAW, ip.clone()), (linktype::NULL, null)] {
        let info = parse_packet(&packet, packet.len() as u32, link, &ParseConfig::default());
        assert_eq!((info.status, { info.dst_port }, { info.vlan }, { info.ethertype }), (0, 4, -1, 0x0800), "link {link}");
    }
}

#[test]
fn batch_parse_matches_per_packet_parse_on_threads() {
    let mut buffers = crate::batch::PacketBuffers::default();
    for i in 0..20_000u32 {
        let packet = vxlan_packet(i % 1000, &inner_tcp_frame());
        let cut = packet.len() - (i as usize % 70);
        buffers.push(&packet[..cut], packet.len() as u32, i64::from(i), linktype::ETHERNET);
    }
    let view = buffers.view();
    let expected: Vec<_> = (0..view.len()).map(|i| parse_packet(view.packet(i), view.wire_lengths[i], 1, &ParseConfig::default())).collect();
    for threads in [1, 2, 3] {
        let mut out = vec![PacketInfo::zeroed(); view.len()];
        parse_batch(&view, &ParseConfig::default(), &[], &mut out, threads);
        assert_eq!(out, expected, "threads={threads}");
    }
}

fn mutated_packet() -> impl Strategy<Value = (Vec<u8>, u32)> {
    let templates = vec![vxlan_packet(1, &inner_tcp_frame()), {
        let mut p = ethernet(0x86dd, &[(0x8100, 1)]);
        p.extend(ipv6(17, [1; 16], [2; 16], &l4(1, 6081, &[0x01, 0, 0x65, 0x58, 0, 0, 9, 0, 0, 0, 0, 0])));
        p
    }];
    (proptest::sample::select(templates), proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8), any::<prop::sample::Index>()).prop_map(
        |(mut packet, flips, cut)| {
            for (at, value) in flips {
                let at = at.index(packet.len());
                packet[at] = value;
            }
            let wire = packet.len() as u32;
            packet.truncate(cut.index(packet.len() + 1));
            (packet, wire)
        },
    )
}

/// Mutations aimed at the bytes the fast path checks, so that both sides of every check occur.
fn fast_path_candidate() -> impl Strategy<Value = (Vec<u8>, u32)> {
    let interesting = vec![12, 13, 14, 16, 17, 20, 21, 23, 36, 37, 42, 62, 63, 64, 66, 67, 70, 71, 73, 84, 85, 86, 87];
    let mut udp_inner = ethernet(0x0800, &[]);
    udp_inner.extend(ipv4(17, [10, 1, 1, 1], [10, 2, 2, 2], &l4(5, 6, &[])));
    let mut outer = ethernet(0x0800, &[]);
    outer.extend(ipv4(17, [192, 0, 2, 1], [192, 0, 2, 2], &l4(40000, 4789, &vxlan(0x08, 7, &udp_inner))));
    (proptest::collection::vec((prop::sample::select(interesting), any::<u8>()), 0..4), 0usize..12, any::<bool>()).prop_map(move |(flips, cut, short_wire)| {
        let mut packet = outer.clone();
        for (at, value) in flips {
            packet[at] = value;
        }
        let wire = packet.len() as u32 + u32::from(short_wire);
        packet.truncate(packet.len() - cut);
        (packet, wire)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("ISOLANE_FUZZ_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(5_000)
    ))]

    #[test]
    fn fuzz_fast_path_agrees_with_general_parser((packet, wire) in fast_path_candidate()) {
        let config = ParseConfig::default();
        prop_assert_eq!(parse_packet(&packet, wire, 1, &config), parse_packet_general(&packet, wire, 1, &config));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("ISOLANE_FUZZ_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(2_000)
    ))]

    #[test]
    fn fuzz_any_bytes_parse_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256), link in prop::sample::select(vec![0u16, 1, 101, 108, 113, 276, 999]), wire in any::<u32>()) {
        let info = parse_packet(&bytes, wire, link, &ParseConfig::default());
        prop_assert!(info.status <= 3);
    }

    #[test]
    fn fuzz_mutated_tunnels_parse_without_panic((packet, wire) in mutated_packet()) {
        let info = parse_packet(&packet, wire, linktype::ETHERNET, &ParseConfig::default());
        prop_assert!(info.status <= 3);
        prop_assert!(info.tunnel <= 2);
        prop_assert!(info.vni >= -1 && info.vni < (1 << 24));
    }
}

#[test]
fn header_past_declared_length_is_malformed_even_in_a_short_capture() {
    let mut packet = vxlan_packet(12, &inner_tcp_frame());
    let outer_ip = 18;
    let declared = (20 + 8 + 8) as u16; // the outer IP packet claims to end right after VXLAN
    packet[outer_ip + 2..outer_ip + 4].copy_from_slice(&declared.to_be_bytes());
    let wire = packet.len() as u32;
    let cut = &packet[..outer_ip + declared as usize];
    let info = parse_packet(cut, wire, linktype::ETHERNET, &ParseConfig::default());
    assert_eq!((info.status, { info.vni }), (Status::Malformed as u8, 12));
}

#[test]
fn fast_path_takes_the_common_case_and_agrees() {
    let mut packet = ethernet(0x0800, &[]);
    packet.extend(ipv4(17, [192, 0, 2, 1], [192, 0, 2, 2], &l4(40000, 4789, &vxlan(0x08, 7, &inner_tcp_frame()))));
    let config = ParseConfig::default();
    let mut fast = PacketInfo::zeroed();
    assert!(vxlan_ipv4_fast_path(&packet, packet.len() as u32, &config, &mut fast), "the common case takes the fast path");
    assert_eq!(fast, parse_packet_general(&packet, packet.len() as u32, 1, &config));
    assert_eq!(({ fast.vni }, { fast.dst_port }), (7, 80));
}
