//! Version, instruction set and thread configuration.

use crate::{c_string, check, sys, Error, Result, Status};
use std::ffi::CString;
use std::marker::PhantomData;
use std::os::raw::c_int;

/// "MAJOR.MINOR.PATCH" of the library loaded.
pub fn version() -> String {
    unsafe { c_string(sys::ak_version()) }
}

/// `AK_ABI_VERSION` of the library loaded; this crate speaks [`sys::AK_ABI_VERSION`].
pub fn abi_version() -> i32 {
    unsafe { sys::ak_abi_version() }
}

/// Every instruction-set name the library knows, best first.
pub const ISAS: [&str; 5] = ["avx512", "avx2", "sse2", "neon", "scalar"];

/// The instruction set in use.
pub fn isa() -> String {
    unsafe { c_string(sys::ak_get_isa()) }
}

/// Forces an instruction set (process-wide); `None` picks the best one.
pub fn set_isa(name: Option<&str>) -> Result<()> {
    let name = match name {
        None => None,
        Some(n) => Some(CString::new(n).map_err(|_| {
            Error::new(Status::BadArgument, format!("set_isa: {:?} contains a NUL byte", n))
        })?),
    };
    check(unsafe { sys::ak_set_isa(name.as_ref().map_or(std::ptr::null(), |c| c.as_ptr())) })
}

/// Whether `set_isa(name)` would succeed on this machine; changes nothing.
/// A name with a NUL byte is not supported.
pub fn isa_supported(name: Option<&str>) -> bool {
    match name {
        None => unsafe { sys::ak_isa_supported(std::ptr::null()) == 1 },
        Some(n) => match CString::new(n) {
            Ok(c) => unsafe { sys::ak_isa_supported(c.as_ptr()) == 1 },
            Err(_) => false,
        },
    }
}

/// The names in [`ISAS`] this machine supports, best first. Changes
/// nothing: the instruction set in use stays as it is (also for threads
/// running kernels meanwhile). Never fails; a `Result` for compatibility.
pub fn available_isas() -> Result<Vec<&'static str>> {
    Ok(ISAS.iter().copied().filter(|n| isa_supported(Some(n))).collect())
}

/// Threads per call (process-wide); 0 = the OpenMP default.
pub fn set_num_threads(n: usize) -> Result<()> {
    let n = thread_count("set_num_threads", n)?;
    check(unsafe { sys::ak_set_num_threads(n) })
}

/// n as the C API's int, or BadArgument naming the setter.
fn thread_count(setter: &str, n: usize) -> Result<c_int> {
    c_int::try_from(n)
        .map_err(|_| Error::new(Status::BadArgument, format!("{}: {} is too many", setter, n)))
}

/// The thread count a call from this thread would use now.
pub fn num_threads() -> usize {
    unsafe { sys::ak_get_num_threads() }.max(0) as usize
}

/// Threads per call for calls made from the calling thread only, overriding
/// `set_num_threads` there; 0 = follow the process-wide count again. Worker
/// threads of an engine's own set 1 (no OpenMP pool per worker).
pub fn set_num_threads_local(n: usize) -> Result<()> {
    let n = thread_count("set_num_threads_local", n)?;
    check(unsafe { sys::ak_set_num_threads_local(n) })
}

/// The calling thread's own count (0 if it follows the process-wide one).
pub fn num_threads_local() -> usize {
    unsafe { sys::ak_get_num_threads_local() }.max(0) as usize
}

/// Sets the calling thread's own count (`set_num_threads_local`) until the
/// guard is dropped, which puts back the count the thread had before:
/// `let _threads = attnkern::threads_local(1)?;`. The guard stays on the
/// thread that made it (it is not `Send`).
pub fn threads_local(n: usize) -> Result<ThreadsLocalGuard> {
    let before = num_threads_local();
    set_num_threads_local(n)?;
    Ok(ThreadsLocalGuard { before, _same_thread: PhantomData })
}

/// Returned by `threads_local`; restores the thread's previous count on drop.
#[must_use = "the count reverts as soon as the guard is dropped"]
pub struct ThreadsLocalGuard {
    before: usize,
    _same_thread: PhantomData<*const ()>,
}

impl Drop for ThreadsLocalGuard {
    fn drop(&mut self) {
        // A count the library returned before: setting it again cannot fail.
        let _ = set_num_threads_local(self.before);
    }
}

/// Frees the scratch buffers every thread keeps between calls (calls running
/// meanwhile keep theirs; the next call allocates anew).
pub fn release_scratch() {
    unsafe { sys::ak_release_scratch() }
}
