//! Working inside another network namespace for a moment. `setns(CLONE_NEWNET)` moves only the
//! calling thread, and a socket keeps the namespace it was made in: so the thread enters the
//! namespace, makes and binds its socket, and comes back.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::error::{CoreError, Result};

use super::capture_error;

/// Where `ip netns` keeps its namespaces' handles.
const NAMED_NAMESPACES: &str = "/run/netns";

/// Runs `work` with the calling thread in network namespace `netns` (an `ip netns` name; None:
/// where the thread already is), then returns the thread to its own namespace.
pub(super) fn within<T>(netns: Option<&str>, work: impl FnOnce() -> Result<T>) -> Result<T> {
    let Some(name) = netns else { return work() };
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(CoreError::InvalidArgument(format!("'{name}' is not a network namespace name (see ip netns list)")));
    }
    let target = File::open(Path::new(NAMED_NAMESPACES).join(name)).map_err(|err| match err.kind() {
        io::ErrorKind::NotFound => capture_error(&format!("no network namespace '{name}' (see ip netns list)"), err),
        _ => capture_error(&format!("cannot open network namespace '{name}'"), err),
    })?;
    let home = File::open("/proc/thread-self/ns/net").map_err(|err| capture_error("cannot open this thread's network namespace", err))?;
    enter(&target).map_err(|err| capture_error(&format!("cannot enter network namespace '{name}' (that needs CAP_SYS_ADMIN, in practice root)"), err))?;
    let outcome = work();
    enter(&home).map_err(|err| capture_error(&format!("cannot come back from network namespace '{name}' to this thread's own"), err))?;
    outcome
}

fn enter(namespace: &File) -> io::Result<()> {
    // SAFETY: plain system call on a descriptor that lives through it.
    match unsafe { libc::setns(namespace.as_raw_fd(), libc::CLONE_NEWNET) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}
