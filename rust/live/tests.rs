//! Captures in the real kernel. Each test runs in a thread that moves into a fresh network
//! namespace of its own (`unshare(CLONE_NEWNET)` moves only the calling thread), brings its
//! loopback up and captures there; the namespace goes with the thread. They need root, and
//! return early saying so without it.

use std::mem::zeroed;
use std::net::UdpSocket;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::*;

/// A small ring, so that the tests do not pin 64 MiB each.
fn small_ring(direction: Direction) -> CaptureOptions {
    CaptureOptions { block_size: 64 << 10, blocks: 8, direction, ..CaptureOptions::default() }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("skipped: needs root (a network namespace and an AF_PACKET socket)");
    }
    root
}

/// Runs `test` in a thread of its own in a fresh network namespace whose loopback is up.
fn in_fresh_namespace<T: Send>(test: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| {
        let thread = scope.spawn(|| {
            // SAFETY: plain system call; it changes only this thread's namespace.
            assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0, "unshare: {}", io::Error::last_os_error());
            set_loopback(true);
            test()
        });
        thread.join().expect("the test thread panicked")
    })
}

/// Brings this namespace's loopback up or takes it down.
fn set_loopback(up: bool) {
    let socket = UdpSocket::bind("0.0.0.0:0").unwrap(); // any socket of this namespace takes the ioctls
                                                        // SAFETY: an all-zero ifreq is valid; the name and flags are set before use.
    let mut request: libc::ifreq = unsafe { zeroed() };
    request.ifr_name[..2].copy_from_slice(&[b'l' as libc::c_char, b'o' as libc::c_char]);
    let fd = std::os::fd::AsRawFd::as_raw_fd(&socket);
    // SAFETY: both requests read and write `request`, which outlives the calls.
    unsafe {
        assert_eq!(libc::ioctl(fd, libc::SIOCGIFFLAGS as _, &mut request as *mut libc::ifreq), 0);
        let flags = request.ifr_ifru.ifru_flags & !(libc::IFF_UP as libc::c_short);
        request.ifr_ifru.ifru_flags = if up { flags | libc::IFF_UP as libc::c_short } else { flags };
        assert_eq!(libc::ioctl(fd, libc::SIOCSIFFLAGS as _, &mut request as *mut libc::ifreq), 0, "{}", io::Error::last_os_error());
    }
}

/// Sends datagrams of `sizes` bytes to a listening socket on 127.0.0.1 (so that no ICMP
/// error adds packets), each payload filled with its index.
fn send_datagrams(sizes: &[usize]) {
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
    for (index, &size) in sizes.iter().enumerate() {
        sender.send_to(&vec![index as u8; size], sink.local_addr().unwrap()).unwrap();
    }
}

/// Batches until `expected` packets came or two seconds passed.
fn capture_until(capture: &mut LiveCapture, expected: usize) -> PacketBuffers {
    let mut all = PacketBuffers::default();
    let deadline = Instant::now() + Duration::from_secs(2);
    while all.len() < expected && Instant::now() < deadline {
        if let Some(batch) = capture.next_batch(Duration::from_millis(100)).unwrap() {
            for index in 0..batch.len() {
                let view = batch.view();
                all.push(view.packet(index), batch.wire_lengths[index], batch.timestamps_ns[index], batch.link_types[index]);
            }
        }
    }
    all
}

/// Ethernet (14, all zero on loopback) + IPv4 (20) + UDP (8) before the payload.
const HEADERS: usize = 42;

#[test]
fn captures_every_datagram_sent_on_loopback_with_its_length_bytes_and_time() {
    if !is_root() {
        return;
    }
    let sizes: Vec<usize> = (0..300).map(|i| 1 + (i * 37) % 1400).collect();
    let (packets, stats) = in_fresh_namespace(|| {
        let mut capture = LiveCapture::open("lo", None, &small_ring(Direction::Incoming)).unwrap();
        assert_eq!(capture.link_type(), crate::batch::linktype::ETHERNET);
        send_datagrams(&sizes);
        let packets = capture_until(&mut capture, sizes.len());
        (packets, capture.stats().unwrap())
    });
    assert_eq!(packets.len(), sizes.len());
    for (index, &size) in sizes.iter().enumerate() {
        let frame = packets.view().packet(index);
        assert_eq!((frame.len(), packets.wire_lengths[index] as usize), (HEADERS + size, HEADERS + size), "packet {}", index + 1);
        assert_eq!(&frame[12..14], &[0x08, 0x00], "packet {}: IPv4", index + 1);
        assert!(frame[HEADERS..].iter().all(|&byte| byte == index as u8), "packet {}: its own payload", index + 1);
    }
    assert!(packets.timestamps_ns.windows(2).all(|pair| pair[0] <= pair[1]), "the kernel's timestamps do not decrease");
    let now_ns = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as i64;
    assert!((now_ns - packets.timestamps_ns[0]).abs() < 60_000_000_000, "timestamps are the kernel's real time");
    assert_eq!(stats.kernel, KernelStats { packets: sizes.len() as u64, drops: 0, freezes: 0 });
    assert_eq!((stats.delivered, stats.skipped), (sizes.len() as u64, 0));
}

#[test]
fn loopback_shows_each_packet_twice_and_direction_chooses() {
    if !is_root() {
        return;
    }
    let sizes = [10usize; 20];
    for (direction, delivered, skipped) in [(Direction::Both, 40, 0), (Direction::Outgoing, 20, 20)] {
        let stats = in_fresh_namespace(|| {
            let mut capture = LiveCapture::open("lo", None, &small_ring(direction)).unwrap();
            send_datagrams(&sizes);
            assert_eq!(capture_until(&mut capture, delivered).len(), delivered, "{direction:?}");
            capture.stats().unwrap()
        });
        assert_eq!((stats.delivered, stats.skipped, stats.kernel.packets, stats.kernel.drops), (delivered as u64, skipped, 40, 0), "{direction:?}");
    }
}

#[test]
fn a_full_ring_drops_and_counts_what_it_drops() {
    if !is_root() {
        return;
    }
    let sent = 2000;
    let stats = in_fresh_namespace(|| {
        let options = CaptureOptions { block_size: 4096, blocks: 2, direction: Direction::Incoming, ..CaptureOptions::default() };
        let mut capture = LiveCapture::open("lo", None, &options).unwrap();
        send_datagrams(&[100; 2000]); // about 20 fit in a block: most are dropped
        while capture.next_batch(Duration::from_millis(100)).unwrap().is_some() {}
        capture.stats().unwrap()
    });
    assert!(stats.kernel.drops > 0 && stats.kernel.freezes > 0, "{stats:?}");
    assert_eq!(stats.delivered + stats.kernel.drops, sent as u64, "every packet is delivered or counted as dropped: {stats:?}");
    assert_eq!(stats.kernel.packets, sent as u64);
}

#[test]
fn waiting_with_nothing_to_capture_returns_none_after_the_timeout() {
    if !is_root() {
        return;
    }
    let (batch, waited) = in_fresh_namespace(|| {
        let mut capture = LiveCapture::open("lo", None, &small_ring(Direction::Both)).unwrap();
        let start = Instant::now();
        (capture.next_batch(Duration::from_millis(80)).unwrap(), start.elapsed())
    });
    assert!(batch.is_none());
    assert!(waited >= Duration::from_millis(80) && waited < Duration::from_secs(2), "{waited:?}");
}

#[test]
fn a_device_going_down_ends_the_wait_with_an_error_after_what_the_ring_held() {
    if !is_root() {
        return;
    }
    let (held, err, waited) = in_fresh_namespace(|| {
        let mut capture = LiveCapture::open("lo", None, &small_ring(Direction::Incoming)).unwrap();
        send_datagrams(&[10; 5]);
        std::thread::sleep(Duration::from_millis(50)); // the block retires (10 ms) with the five in it
        set_loopback(false);
        let held = capture.next_batch(Duration::from_secs(1)).unwrap().map_or(0, |batch| batch.len());
        let start = Instant::now();
        (held, capture.next_batch(Duration::from_secs(2)).err().unwrap(), start.elapsed())
    });
    assert_eq!(held, 5);
    assert_eq!(err.to_string(), "capturing on 'lo' stopped: Network is down");
    assert!(waited < Duration::from_secs(1), "the error ends the wait: {waited:?}");
}

#[test]
fn a_device_that_is_not_there_is_named() {
    if !is_root() {
        return;
    }
    let err = in_fresh_namespace(|| LiveCapture::open("isl-nope0", None, &small_ring(Direction::Both)).err().unwrap());
    assert_eq!(err.to_string(), "no device 'isl-nope0': No such device");
    assert!(matches!(err, CoreError::Capture { errno: Some(libc::ENODEV), .. }));
}

#[test]
fn names_and_options_that_cannot_work_are_refused_before_anything_opens() {
    let err = LiveCapture::open("a-name-far-too-long", None, &CaptureOptions::default()).err().unwrap();
    assert!(err.to_string().starts_with("'a-name-far-too-long' is not a device name (1 to 15 bytes"), "{err}");
    let err = LiveCapture::open("lo", Some("isl-no-such-ns"), &CaptureOptions::default()).err().unwrap();
    assert_eq!(err.to_string(), "no network namespace 'isl-no-such-ns' (see ip netns list): No such file or directory");
    let err = LiveCapture::open("lo", Some("../x"), &CaptureOptions::default()).err().unwrap();
    assert_eq!(err.to_string(), "'../x' is not a network namespace name (see ip netns list)");
    let odd = CaptureOptions { block_size: 5000, ..CaptureOptions::default() };
    let err = LiveCapture::open("lo", None, &odd).err().unwrap();
    assert!(err.to_string().starts_with("block_size must be a positive multiple of the page size"), "{err}");
    let none = CaptureOptions { blocks: 0, ..CaptureOptions::default() };
    assert!(LiveCapture::open("lo", None, &none).is_err());
    assert!(Direction::from_name("sideways").unwrap_err().to_string().contains("'both', 'in' or 'out'"));
    assert_eq!(Direction::from_name("in").unwrap(), Direction::Incoming);
}
