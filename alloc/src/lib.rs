//! Settings of mimalloc, the allocator the `muster` binary links.
//!
//! The `mimalloc` crate offers the allocator but none of its options; they
//! are set here through mimalloc's C API (`libmimalloc-sys`). This is the
//! only crate of the workspace that allows unsafe code, one call at a time.

/// `mi_option_purge_delay`: its position in mimalloc's `mi_option_e`
/// (`mimalloc.h`, the same in mimalloc 2 and 3); the Rust bindings do not
/// name it.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Has mimalloc return freed memory to the system at once, not after its
/// default delay (a second in mimalloc 3). A long-running process that
/// frees most of what each cycle of work allocates keeps each cycle's peak
/// resident otherwise. An operator's `MIMALLOC_PURGE_DELAY`, which mimalloc
/// reads itself, is left alone.
pub fn return_freed_memory_at_once() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        #[allow(unsafe_code)]
        // SAFETY: `mi_option_set` stores an integer option; mimalloc reads
        // this one whenever it decides to purge, from any thread.
        unsafe {
            libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0)
        };
    }
}

/// How long mimalloc waits before it returns freed memory, in milliseconds
/// (0: at once; -1: never).
pub fn purge_delay_ms() -> std::ffi::c_long {
    #[allow(unsafe_code)]
    // SAFETY: `mi_option_get` reads an integer option.
    unsafe {
        libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The option set is mimalloc's purge delay: before, it holds that
    /// option's default (1000 ms in mimalloc 3, 10 ms in mimalloc 2), which
    /// the options beside it do not hold; after, 0.
    #[test]
    fn freed_memory_is_returned_at_once() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        let before = purge_delay_ms();
        assert!(
            before == 1000 || before == 10,
            "option {MI_OPTION_PURGE_DELAY} is not mimalloc's purge delay: it holds {before}"
        );
        return_freed_memory_at_once();
        assert_eq!(purge_delay_ms(), 0);
    }
}
