//! Heap memory the process keeps free: given back to the system on request.
//!
//! Rust's allocator on Linux is the C library's `malloc`. glibc keeps freed chunks for reuse
//! and returns memory to the system only from the top of its heap (above
//! `M_TRIM_THRESHOLD`), so after a burst of small allocations freed in any order the resident
//! set stays at its peak. [`give_back_free_memory`] asks it to return every whole free page.

/// Asks the C allocator to give the memory it holds free back to the system: glibc's
/// `malloc_trim(0)`, which releases the top of every arena and every whole free page inside
/// them (`MADV_DONTNEED`). It walks the arenas, so its cost grows with the heap: call it after
/// freeing much, not per frame. Returns whether memory was given back; with another C library
/// it does nothing and returns `false`.
pub fn give_back_free_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim only walks the allocator's own arenas under their locks; any
        // pad is valid.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// The resident set size of this process, bytes (`VmRSS` of `/proc/self/status`).
pub fn resident_bytes() -> std::io::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .and_then(|kb| kb.trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .ok_or_else(|| std::io::Error::other("/proc/self/status has no VmRSS line"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_buffers_freed_in_any_order_come_back_to_the_system() {
        // 64 MiB in 2 KiB buffers (the emulator's pool for 1.4 KB frames), freed except one
        // in 64, so no large stretch is free at the top of the heap.
        let mut buffers: Vec<Vec<u8>> = (0..32 * 1024).map(|_| vec![1u8; 2000]).collect();
        let peak = resident_bytes().unwrap();
        let mut kept = Vec::new();
        for (i, b) in buffers.drain(..).enumerate() {
            if i % 64 == 0 {
                kept.push(b);
            }
        }
        drop(buffers);
        let freed = resident_bytes().unwrap();
        give_back_free_memory();
        let after = resident_bytes().unwrap();
        assert!(
            after + 40 * 1024 * 1024 < peak,
            "RSS {peak} at the peak, {freed} once freed, {after} after giving back"
        );
        assert_eq!(kept.len(), 512);
    }
}
