//! The AF_PACKET socket under the ring: made, configured and bound with plain `libc` calls.

use std::ffi::CString;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use crate::batch::linktype;
use crate::error::{CoreError, Result};

use super::{capture_error, Direction, KernelStats};

/// An AF_PACKET raw socket (the whole frame, link header included).
pub(super) struct PacketSocket {
    fd: OwnedFd,
}

impl PacketSocket {
    /// A socket that receives nothing until [`PacketSocket::bind`] (protocol 0), so the ring set
    /// up in between holds no packet of another device.
    pub(super) fn open() -> Result<Self> {
        // SAFETY: plain system call; the descriptor it returns is owned below.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(capture_error("cannot open an AF_PACKET socket (capturing needs CAP_NET_RAW, in practice root)", io::Error::last_os_error()));
        }
        // SAFETY: `fd` is a fresh descriptor nothing else owns.
        Ok(PacketSocket { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    pub(super) fn raw(&self) -> libc::c_int {
        self.fd.as_raw_fd()
    }

    /// Sets socket option `name` at `level` to `value`; `what` names it in the error.
    pub(super) fn set_option<T>(&self, level: libc::c_int, name: libc::c_int, value: &T, what: &str) -> Result<()> {
        // SAFETY: `value` points at a live `T` of the size passed.
        let result = unsafe { libc::setsockopt(self.raw(), level, name, (value as *const T).cast(), size_of::<T>() as libc::socklen_t) };
        if result < 0 {
            return Err(capture_error(&format!("cannot set {what} on the AF_PACKET socket"), io::Error::last_os_error()));
        }
        Ok(())
    }

    /// Cuts every packet to `snaplen` bytes with a one-instruction classic BPF filter (`ret
    /// #snaplen`), as libpcap does: TPACKET_V3 has no snap length of its own.
    pub(super) fn set_snaplen(&self, snaplen: u32) -> Result<()> {
        let mut accept = [libc::sock_filter { code: (libc::BPF_RET | libc::BPF_K) as u16, jt: 0, jf: 0, k: snaplen }];
        let program = libc::sock_fprog { len: 1, filter: accept.as_mut_ptr() };
        self.set_option(libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &program, "the snap length filter")
    }

    /// Leaves the device's outgoing packets out of the ring when only incoming ones are wanted.
    pub(super) fn set_direction(&self, direction: Direction) -> Result<()> {
        match direction {
            Direction::Incoming => {
                self.set_option(libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &1 as &libc::c_int, "PACKET_IGNORE_OUTGOING (Linux 4.20 or later)")
            }
            Direction::Both | Direction::Outgoing => Ok(()),
        }
    }

    /// The device's index and the link type of its frames, from its name (in the socket's
    /// namespace).
    pub(super) fn device(&self, dev: &str, netns: Option<&str>) -> Result<(libc::c_int, u16)> {
        let mut request = interface_request(dev)?;
        let missing = |err: io::Error| match err.raw_os_error() {
            Some(libc::ENODEV) => capture_error(&format!("no device '{dev}'{}", in_namespace(netns)), err),
            _ => capture_error(&format!("cannot look up device '{dev}'{}", in_namespace(netns)), err),
        };
        self.ioctl(libc::SIOCGIFINDEX, &mut request).map_err(missing)?;
        // SAFETY: SIOCGIFINDEX filled the union's index.
        let index = unsafe { request.ifr_ifru.ifru_ifindex };
        self.ioctl(libc::SIOCGIFHWADDR, &mut request).map_err(missing)?;
        // SAFETY: SIOCGIFHWADDR filled the union's hardware address.
        let hardware = unsafe { request.ifr_ifru.ifru_hwaddr.sa_family };
        Ok((index, link_type(dev, hardware)?))
    }

    fn ioctl(&self, request: libc::c_ulong, interface: &mut libc::ifreq) -> io::Result<()> {
        // SAFETY: both requests read the name and write into `interface`, which lives meanwhile.
        match unsafe { libc::ioctl(self.raw(), request as _, interface as *mut libc::ifreq) } {
            0.. => Ok(()),
            _ => Err(io::Error::last_os_error()),
        }
    }

    /// Starts receiving every protocol from device `index` only.
    pub(super) fn bind(&self, index: libc::c_int, dev: &str) -> Result<()> {
        // SAFETY: an all-zero sockaddr_ll is valid; the fields that matter are set next.
        let mut address: libc::sockaddr_ll = unsafe { zeroed() };
        address.sll_family = libc::AF_PACKET as u16;
        address.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        address.sll_ifindex = index;
        // SAFETY: `address` is a sockaddr_ll of the length passed.
        let result = unsafe { libc::bind(self.raw(), (&address as *const libc::sockaddr_ll).cast(), size_of::<libc::sockaddr_ll>() as libc::socklen_t) };
        if result < 0 {
            return Err(capture_error(&format!("cannot bind the AF_PACKET socket to '{dev}'"), io::Error::last_os_error()));
        }
        Ok(())
    }

    /// What the kernel counted since the previous call (reading resets its counters).
    pub(super) fn take_stats(&self) -> Result<KernelStats> {
        // SAFETY: all-zero is a valid tpacket_stats_v3.
        let mut stats: libc::tpacket_stats_v3 = unsafe { zeroed() };
        let mut length = size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
        // SAFETY: `stats` has room for `length` bytes, and the kernel writes at most that.
        let result =
            unsafe { libc::getsockopt(self.raw(), libc::SOL_PACKET, libc::PACKET_STATISTICS, (&mut stats as *mut libc::tpacket_stats_v3).cast(), &mut length) };
        if result < 0 {
            return Err(capture_error("cannot read the ring's statistics (PACKET_STATISTICS)", io::Error::last_os_error()));
        }
        Ok(KernelStats { packets: u64::from(stats.tp_packets), drops: u64::from(stats.tp_drops), freezes: u64::from(stats.tp_freeze_q_cnt) })
    }

    /// Waits up to `timeout` for the kernel to hand a block over; an interrupted wait returns
    /// early (the caller looks at the ring again either way). An error the socket holds (its
    /// device went down or away) is returned, rather than waking the wait again and again.
    pub(super) fn wait(&self, timeout: Duration) -> io::Result<()> {
        let mut poll = libc::pollfd { fd: self.raw(), events: libc::POLLIN | libc::POLLERR, revents: 0 };
        let millis = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: one pollfd that lives through the call.
        if unsafe { libc::poll(&mut poll, 1, millis) } < 0 {
            let err = io::Error::last_os_error();
            return if err.kind() == io::ErrorKind::Interrupted { Ok(()) } else { Err(err) };
        }
        match poll.revents & libc::POLLERR {
            0 => Ok(()),
            _ => self.take_error(),
        }
    }

    /// The error the socket holds (`SO_ERROR`, which reading clears), if any.
    fn take_error(&self) -> io::Result<()> {
        let mut errno: libc::c_int = 0;
        let mut length = size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `errno` has room for the `length` bytes the kernel writes.
        let result = unsafe { libc::getsockopt(self.raw(), libc::SOL_SOCKET, libc::SO_ERROR, (&mut errno as *mut libc::c_int).cast(), &mut length) };
        match (result, errno) {
            (..0, _) => Err(io::Error::last_os_error()),
            (_, 0) => Ok(()),
            (_, errno) => Err(io::Error::from_raw_os_error(errno)),
        }
    }
}

/// `dev` as the kernel takes a device name, refused when it cannot be one.
pub(super) fn device_name(dev: &str) -> Result<CString> {
    let name = CString::new(dev).ok().filter(|name| !dev.is_empty() && name.as_bytes_with_nul().len() <= libc::IFNAMSIZ);
    name.ok_or_else(|| CoreError::InvalidArgument(format!("'{dev}' is not a device name (1 to {} bytes, no NUL)", libc::IFNAMSIZ - 1)))
}

/// `ifreq` naming `dev`.
fn interface_request(dev: &str) -> Result<libc::ifreq> {
    let name = device_name(dev)?;
    // SAFETY: an all-zero ifreq is valid.
    let mut request: libc::ifreq = unsafe { zeroed() };
    for (slot, byte) in request.ifr_name.iter_mut().zip(name.as_bytes()) {
        *slot = *byte as libc::c_char;
    }
    Ok(request)
}

/// The pcap link type of a device's frames: Ethernet for Ethernet-like devices and loopback
/// (whose frames carry an all-zero Ethernet header), raw IP for devices without a link header.
fn link_type(dev: &str, hardware: u16) -> Result<u16> {
    match hardware {
        libc::ARPHRD_ETHER | libc::ARPHRD_LOOPBACK => Ok(linktype::ETHERNET),
        libc::ARPHRD_NONE => Ok(linktype::RAW),
        other => Err(CoreError::InvalidArgument(format!(
            "device '{dev}' has link-layer type {other} (ARPHRD_*), which isolane cannot parse: it captures Ethernet, loopback and raw IP devices"
        ))),
    }
}

/// ` in network namespace 'x'`, or nothing for the caller's own namespace.
pub(super) fn in_namespace(netns: Option<&str>) -> String {
    netns.map(|name| format!(" in network namespace '{name}'")).unwrap_or_default()
}
