//! Times the parser on a capture held in memory: `cargo run --release --example parse_speed FILE [ROUNDS]`.
use isolane::parse::{parse_batch, PacketInfo, ParseConfig};
use std::time::Instant;

fn main() {
    let path = std::env::args().nth(1).expect("usage: parse_speed FILE [ROUNDS]");
    let rounds: usize = std::env::args().nth(2).and_then(|a| a.parse().ok()).unwrap_or(5);
    let size = std::fs::metadata(&path).expect("stat").len() as usize;
    let mut buffers = isolane::batch::PacketBuffers::default();
    for _ in 0..rounds {
        let start = Instant::now();
        buffers = isolane::pcap::read_all(std::fs::File::open(&path).expect("open"), size).expect("read");
        let seconds = start.elapsed().as_secs_f64();
        println!("read: {:.1} Mpps ({:.0} ms, {:.2} GB/s)", buffers.len() as f64 / seconds / 1e6, seconds * 1e3, size as f64 / seconds / 1e9);
    }
    let view = buffers.view();
    let mapped = unsafe { memmap2::Mmap::map(&std::fs::File::open(&path).unwrap()).unwrap() };
    for _ in 0..rounds {
        let start = Instant::now();
        let index = isolane::pcap::index(&mapped).expect("index");
        println!("index: {:.1} ms for {} packets", start.elapsed().as_secs_f64() * 1e3, index.len());
    }
    for _ in 0..rounds {
        let start = Instant::now();
        let mut out: Vec<PacketInfo> = isolane::memory::zeroed_vec(view.len());
        parse_batch(&view, &ParseConfig::default(), &[], &mut out, 1);
        let seconds = start.elapsed().as_secs_f64();
        println!("{:.1} Mpps ({} packets, {:.1} ns each)", view.len() as f64 / seconds / 1e6, view.len(), seconds * 1e9 / view.len() as f64);
    }
}
