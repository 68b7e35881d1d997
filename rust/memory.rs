//! Large buffers backed by transparent huge pages where the kernel allows it.
//!
//! Batches are large (a million records is 84 MB) and freshly allocated, and on virtual
//! machines a 4 KiB page fault costs microseconds: faulting the output in cost more than
//! parsing it. Asking for huge pages turns ~20,000 faults into ~40.
//!
//! Also the cache prefetch that lets a batch ask for several packets' tables at once, and
//! handing freed heap back to the kernel after a large passing structure.

use bytemuck::Zeroable;

/// Below this, huge pages cannot help (there is no whole 2 MiB page inside the buffer).
const HUGE_PAGE: usize = 2 << 20;

/// A zeroed vector of `len` elements whose memory is advised to use huge pages.
pub fn zeroed_vec<T: Zeroable + Clone>(len: usize) -> Vec<T> {
    // calloc of a large block maps fresh zero pages without touching them, so the advice
    // below comes before the first fault.
    let vec: Vec<T> = bytemuck::zeroed_vec(len);
    advise_huge_pages(vec.as_ptr().cast(), len * std::mem::size_of::<T>());
    vec
}

/// An empty vector with room for `capacity` bytes, advised to use huge pages.
pub fn byte_buffer(capacity: usize) -> Vec<u8> {
    with_capacity(capacity)
}

/// An empty vector with room for `capacity` elements, advised to use huge pages.
pub fn with_capacity<T>(capacity: usize) -> Vec<T> {
    let vec: Vec<T> = Vec::with_capacity(capacity);
    advise_huge_pages(vec.as_ptr().cast(), capacity * std::mem::size_of::<T>());
    vec
}

fn advise_huge_pages(start: *const u8, len: usize) {
    if len < 2 * HUGE_PAGE {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        let first = (start as usize).next_multiple_of(HUGE_PAGE);
        let end = (start as usize + len) / HUGE_PAGE * HUGE_PAGE;
        if end > first {
            // SAFETY: the range lies inside an allocation this process owns; MADV_HUGEPAGE
            // only changes how the kernel backs it, never its contents. Failure (no THP
            // support) leaves ordinary pages, which is fine.
            unsafe {
                libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE);
            }
        }
    }
}

/// Returns the heap's free pages to the kernel. After a large structure made of many small
/// allocations is freed (a parsed document), glibc keeps its pages: the process would stay as
/// large as at its peak. Costs microseconds when there is little to return.
pub fn release_free_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory of the allocator's own arenas to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Returns the free top of the calling thread's heap to the kernel, once what the thread
/// allocated is freed. glibc gives a thread an arena of its own and trims that arena's top only
/// when a chunk of 64 KiB or more is freed there; [`release_free_heap`] (`malloc_trim`) trims only
/// the main arena's top. Freeing such a chunk here makes glibc trim it.
pub fn release_thread_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    drop(std::hint::black_box(Vec::<u8>::with_capacity(TRIM_TRIGGER_BYTES)));
}

/// A chunk large enough for glibc to trim its arena when it is freed, and under the threshold at
/// which glibc maps a block of its own instead (128 KiB by default).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_TRIGGER_BYTES: usize = 96 << 10;

/// Starts loading the cache line of `value`; no effect where the target has no prefetch.
#[inline]
pub fn prefetch<T>(value: &T) {
    prefetch_line((value as *const T).cast());
}

/// Starts loading every cache line `value` spans (a value larger than a line, or one that
/// straddles two).
#[inline]
pub fn prefetch_whole<T>(value: &T) {
    const LINE: usize = 64;
    let (start, size) = ((value as *const T).cast::<u8>(), std::mem::size_of::<T>());
    let lines = (start as usize % LINE + size).div_ceil(LINE);
    for line in 0..lines {
        prefetch_line(start.wrapping_add(line * LINE));
    }
}

/// Starts loading the cache line of the byte at `at`, which need not be valid.
#[inline]
fn prefetch_line(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: SSE is part of x86_64, and a prefetch never faults (it reads no memory the
        // program sees), whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(at.cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

#[cfg(test)]
mod tests {
    #[test]
    fn buffers_are_usable_whatever_their_size() {
        for len in [0, 1, 4 << 20, (9 << 20) + 3] {
            let zeroed: Vec<u64> = super::zeroed_vec(len);
            assert!(zeroed.len() == len && zeroed.iter().all(|&v| v == 0));
            let mut bytes = super::byte_buffer(len);
            bytes.resize(len, 7);
            assert!(bytes.iter().all(|&b| b == 7));
        }
    }
}
