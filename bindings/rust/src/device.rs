//! Devices: initialisation, information, synchronisation, and the library-wide calls.
use crate::buffer::{Buffer, Element};
use crate::error::{c_string, check, text_out, to_int, Error, Result};
use crate::program::Program;
use crate::stream::{Event, Stream};
use crate::sys;
use std::ffi::CStr;
use std::os::raw::c_int;

/// An initialised device of the visible list (initialize_gpu). Cheap to copy: the device lives
/// until [`shutdown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Device {
    index: c_int,
}

impl Device {
    /// Number of visible OpenCL devices (aethercl_device_count); 0 when there is none.
    pub fn count() -> usize {
        // SAFETY: no arguments.
        unsafe { sys::aethercl_device_count() }.max(0) as usize
    }

    /// Initialises device `index` (idempotent): context, queue, memory pool.
    pub fn new(index: usize) -> Result<Device> {
        let index = to_int("initialize_gpu", "gpu_index", index)?;
        // SAFETY: plain int argument.
        check("initialize_gpu", unsafe { sys::initialize_gpu(index) })?;
        Ok(Device { index })
    }

    /// The gpu_index every call of this device passes.
    pub fn index(&self) -> c_int {
        self.index
    }

    /// The device's JSON description (aethercl_device_info).
    pub fn info(&self) -> Result<String> {
        // SAFETY: the buffer and its capacity come from text_out and match.
        text_out("aethercl_device_info", |buffer, capacity| unsafe {
            sys::aethercl_device_info(self.index, buffer, capacity)
        })
    }

    /// The memory pool's JSON statistics (aethercl_memory_stats).
    pub fn memory_stats(&self) -> Result<String> {
        // SAFETY: as for info.
        text_out("aethercl_memory_stats", |buffer, capacity| unsafe {
            sys::aethercl_memory_stats(self.index, buffer, capacity)
        })
    }

    /// Waits for every stream of the device and reports deferred device errors.
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: plain int argument.
        check("aethercl_synchronize", unsafe {
            sys::aethercl_synchronize(self.index)
        })
    }

    /// A buffer of `len` elements, contents undefined; tagged with T's dtype where it has one.
    pub fn alloc<T: Element>(&self, len: usize) -> Result<Buffer<T>> {
        Buffer::new(*self, len)
    }

    /// A buffer holding a copy of `data`.
    pub fn buffer_from<T: Element>(&self, data: &[T]) -> Result<Buffer<T>> {
        let buffer = Buffer::new(*self, data.len())?;
        buffer.write(data)?;
        Ok(buffer)
    }

    /// Builds a program from OpenCL C source; a build failure carries the compiler's log.
    pub fn program(&self, source: &str, options: &str) -> Result<Program> {
        const F: &str = "aethercl_program_create";
        let source = c_string(F, "source", source)?;
        let options = c_string(F, "options", options)?;
        Program::from_source(*self, &source, &options)
    }

    /// A new stream; `timing` makes its events record device times (AETHERCL_STREAM_TIMING).
    pub fn stream(&self, timing: bool) -> Result<Stream> {
        Stream::new(
            *self,
            if timing {
                sys::AETHERCL_STREAM_TIMING
            } else {
                0
            },
        )
    }

    /// An event at the current end of the device's default stream.
    pub fn record_event(&self) -> Result<Event> {
        Event::record(*self, std::ptr::null_mut())
    }

    /// The seed product c[b] = a[b] x b[b] (execute_matmul_on_gpu): a is batch x m x k, b is
    /// k x n (shared by the batch), c is batch x m x n, float32 row-major.
    pub fn matmul(
        &self,
        a: &Buffer<f32>,
        b: &Buffer<f32>,
        c: &Buffer<f32>,
        batch: usize,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<()> {
        const F: &str = "execute_matmul_on_gpu";
        let (batch, m) = (to_int(F, "B", batch)?, to_int(F, "M", m)?);
        let (n, k) = (to_int(F, "N", n)?, to_int(F, "K", k)?);
        // SAFETY: the handles are tokens the library validates.
        check(F, unsafe {
            sys::execute_matmul_on_gpu(
                self.index,
                a.as_raw(),
                b.as_raw(),
                c.as_raw(),
                batch,
                m,
                n,
                k,
            )
        })
    }
}

/// The library's version string (aethercl_version).
pub fn version() -> String {
    // SAFETY: returns a static string.
    unsafe { CStr::from_ptr(sys::aethercl_version()) }
        .to_string_lossy()
        .into_owned()
}

/// The ABI version the loaded library implements; at least `sys::AETHERCL_ABI_VERSION` for a
/// library that has every function this crate declares.
pub fn abi_version() -> c_int {
    // SAFETY: no arguments.
    unsafe { sys::aethercl_abi_version() }
}

/// Waits for all work and releases every device, buffer, program and stream (shutdown_driver).
/// Tokens made before stay invalid: later calls with them are refused, drops of their owners do
/// nothing.
pub fn shutdown() {
    // SAFETY: no arguments; harmless when nothing is initialised.
    unsafe { sys::shutdown_driver() }
}

#[allow(dead_code)]
fn _assert_error_is_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<Error>();
    check::<Device>();
}
