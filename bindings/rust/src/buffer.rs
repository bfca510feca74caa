//! Owned device buffers of a plain element type: typed reads and writes, freed on drop.
use crate::device::Device;
use crate::error::{c_string, check, check_token, Error, Result};
use crate::sys;
use std::marker::PhantomData;
use std::mem::size_of;
use std::os::raw::{c_int, c_void};
use std::ptr::NonNull;

/// Element types a buffer may hold: plain numbers, any bit pattern valid.
///
/// # Safety
/// Implementors must be `Copy` types without padding for which every bit pattern is a value.
pub unsafe trait Element: Copy + Default + Send + Sync + 'static {
    /// The aethercl_dtype code (`sys::AETHERCL_F32`, ...), or -1 where the ABI has none.
    const DTYPE: c_int;
}

macro_rules! element {
    ($($t:ty => $dtype:expr),*) => {
        $(unsafe impl Element for $t { const DTYPE: c_int = $dtype; })*
    };
}
element!(f32 => sys::AETHERCL_F32, f64 => sys::AETHERCL_F64, i32 => sys::AETHERCL_I32,
         i64 => sys::AETHERCL_I64, i8 => sys::AETHERCL_I8, u8 => sys::AETHERCL_U8,
         u16 => -1, i16 => -1, u32 => -1, u64 => -1);

/// `len` elements of T in device memory (allocate_gpu_memory), freed on drop (free_gpu_memory).
/// Kernels may write a buffer they take by shared reference: device memory is not Rust memory,
/// and the library orders every access on its stream.
#[derive(Debug)]
pub struct Buffer<T: Element> {
    device: Device,
    handle: NonNull<c_void>,
    len: usize,
    _element: PhantomData<T>,
}

// SAFETY: the handle is a token the library validates; every call is thread-safe.
unsafe impl<T: Element> Send for Buffer<T> {}
unsafe impl<T: Element> Sync for Buffer<T> {}

fn byte_span<T>(function: &'static str, offset: usize, len: usize) -> Result<(usize, usize)> {
    let bytes = |count: usize| count.checked_mul(size_of::<T>());
    match (bytes(offset), bytes(len)) {
        (Some(offset), Some(size)) => Ok((offset, size)),
        _ => Err(Error::refused(
            function,
            sys::AETHERCL_INVALID_ARGUMENT,
            format!(
                "{}: {} elements at element offset {} overflow size_t",
                function, len, offset
            ),
        )),
    }
}

impl<T: Element> Buffer<T> {
    pub(crate) fn new(device: Device, len: usize) -> Result<Buffer<T>> {
        const F: &str = "allocate_gpu_memory";
        let (_, size) = byte_span::<T>(F, 0, len)?;
        // SAFETY: plain arguments; the library refuses size 0 and impossible sizes.
        let handle = check_token(F, unsafe { sys::allocate_gpu_memory(device.index(), size) })?;
        let buffer = Buffer {
            device,
            handle,
            len,
            _element: PhantomData,
        };
        if T::DTYPE >= 0 {
            // SAFETY: a live token of this device and a known dtype code.
            let tagged = unsafe {
                sys::aethercl_buffer_set_dtype(device.index(), handle.as_ptr(), T::DTYPE)
            };
            check("aethercl_buffer_set_dtype", tagged)?;
        }
        Ok(buffer)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no elements (never: the library refuses empty allocations).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device it lives on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The raw token, for the functions of [`crate::sys`]; valid while `self` lives.
    pub fn as_raw(&self) -> *mut c_void {
        self.handle.as_ptr()
    }

    /// Writes `data` to the first `data.len()` elements (blocking; longer data is refused).
    pub fn write(&self, data: &[T]) -> Result<()> {
        self.write_at(0, data)
    }

    /// Writes `data` starting at element `offset`.
    pub fn write_at(&self, offset: usize, data: &[T]) -> Result<()> {
        const F: &str = "write_host_to_gpu_blocking";
        let (offset, size) = byte_span::<T>(F, offset, data.len())?;
        // SAFETY: data is size readable bytes; the library checks the span against the buffer.
        check(F, unsafe {
            sys::write_host_to_gpu_blocking(
                self.device.index(),
                self.as_raw(),
                offset,
                size,
                data.as_ptr().cast(),
            )
        })
    }

    /// Every element, after all work issued before on the device (read_gpu_to_host_blocking
    /// synchronises).
    pub fn read(&self) -> Result<Vec<T>> {
        let mut out = vec![T::default(); self.len];
        self.read_at(0, &mut out)?;
        Ok(out)
    }

    /// Reads `out.len()` elements starting at element `offset`.
    pub fn read_at(&self, offset: usize, out: &mut [T]) -> Result<()> {
        const F: &str = "read_gpu_to_host_blocking";
        let (offset, size) = byte_span::<T>(F, offset, out.len())?;
        // SAFETY: out is size writable bytes of a type valid for any bits; the span is checked.
        check(F, unsafe {
            sys::read_gpu_to_host_blocking(
                self.device.index(),
                self.as_raw(),
                offset,
                size,
                out.as_mut_ptr().cast(),
            )
        })
    }

    /// Sets every byte to `value` (aethercl_memset on the default stream).
    pub fn fill_bytes(&self, value: u8) -> Result<()> {
        const F: &str = "aethercl_memset";
        let (_, size) = byte_span::<T>(F, 0, self.len)?;
        // SAFETY: a live token; the whole buffer.
        check(F, unsafe {
            sys::aethercl_memset(
                self.device.index(),
                self.as_raw(),
                0,
                size,
                c_int::from(value),
                std::ptr::null_mut(),
            )
        })
    }

    /// Copies all of `source` (same length) into this buffer on the device (aethercl_copy).
    pub fn copy_from(&self, source: &Buffer<T>) -> Result<()> {
        const F: &str = "aethercl_copy";
        let (_, size) = byte_span::<T>(F, 0, source.len)?;
        // SAFETY: live tokens; the library checks both spans and refuses overlap.
        check(F, unsafe {
            sys::aethercl_copy(
                self.device.index(),
                self.as_raw(),
                0,
                source.as_raw(),
                0,
                size,
                std::ptr::null_mut(),
            )
        })
    }

    /// A label shown in memory statistics and bound reports.
    pub fn set_label(&self, label: &str) -> Result<()> {
        const F: &str = "aethercl_set_buffer_label";
        let label = c_string(F, "label", label)?;
        // SAFETY: a live token and a NUL-terminated string the library copies.
        check(F, unsafe {
            sys::aethercl_set_buffer_label(self.device.index(), self.as_raw(), label.as_ptr())
        })
    }
}

impl<T: Element> Drop for Buffer<T> {
    fn drop(&mut self) {
        // SAFETY: freeing a token is always safe: stale ones (after shutdown) are no-ops, and the
        // memory returns to the pool only after the work already issued on it.
        unsafe { sys::free_gpu_memory(self.device.index(), self.as_raw()) }
    }
}
