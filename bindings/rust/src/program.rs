//! Your own kernels: programs built from OpenCL C, kernels, and launches with typed arguments.
use crate::buffer::{Buffer, Element};
use crate::device::Device;
use crate::error::{c_string, check, check_token, text_out, to_int, Error, Result};
use crate::stream::Stream;
use crate::sys;
use std::ffi::CStr;
use std::marker::PhantomData;
use std::mem::size_of;
use std::os::raw::c_void;
use std::ptr::NonNull;

/// A built program (aethercl_program_create), destroyed on drop; kernels made from it outlive it.
#[derive(Debug)]
pub struct Program {
    device: Device,
    handle: NonNull<c_void>,
}

// SAFETY: tokens are validated by the library, whose calls are thread-safe.
unsafe impl Send for Program {}
unsafe impl Sync for Program {}

impl Program {
    pub(crate) fn from_source(device: Device, source: &CStr, options: &CStr) -> Result<Program> {
        const F: &str = "aethercl_program_create";
        // SAFETY: NUL-terminated strings that live across the call.
        let handle = check_token(F, unsafe {
            sys::aethercl_program_create(device.index(), source.as_ptr(), options.as_ptr())
        })?;
        Ok(Program { device, handle })
    }

    /// The kernel called `name`; a missing one is refused with the list of the program's kernels.
    pub fn kernel(&self, name: &str) -> Result<Kernel> {
        const F: &str = "aethercl_kernel_create";
        let c_name = c_string(F, "name", name)?;
        // SAFETY: a live program token and a NUL-terminated name.
        let handle = check_token(F, unsafe {
            sys::aethercl_kernel_create(self.handle.as_ptr(), c_name.as_ptr())
        })?;
        Ok(Kernel {
            device: self.device,
            handle,
            name: name.to_string(),
        })
    }

    /// The device binary with its checked header, for reloading without compiling.
    pub fn binary(&self) -> Result<Vec<u8>> {
        const F: &str = "aethercl_program_binary";
        // SAFETY: NULL out sizes it; then out has capacity writable bytes.
        let size =
            unsafe { sys::aethercl_program_binary(self.handle.as_ptr(), std::ptr::null_mut(), 0) };
        if size == 0 {
            return Err(Error::last(F));
        }
        let mut bytes = vec![0u8; size];
        let written = unsafe {
            sys::aethercl_program_binary(self.handle.as_ptr(), bytes.as_mut_ptr().cast(), size)
        };
        if written == 0 {
            return Err(Error::last(F));
        }
        Ok(bytes)
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: a token this owner made; a refusal (after shutdown) changes nothing.
        unsafe { sys::aethercl_program_destroy(self.handle.as_ptr()) };
    }
}

/// A kernel token (aethercl_kernel_create), destroyed on drop; launches already issued still run.
#[derive(Debug)]
pub struct Kernel {
    device: Device,
    handle: NonNull<c_void>,
    name: String,
}

// SAFETY: one kernel token may be launched from many threads at once (header).
unsafe impl Send for Kernel {}
unsafe impl Sync for Kernel {}

/// One argument of [`Kernel::launch`]: a buffer, a scalar (its bytes copied), or local memory.
/// Made with `From` (`(&buffer).into()`, `2.0f32.into()`), [`Arg::local`], or the [`args!`]
/// macro.
#[derive(Debug, Clone)]
pub struct Arg<'a> {
    kind: std::os::raw::c_int,
    size: usize,
    buffer: *mut c_void,
    scalar: [u8; 8],
    _borrow: PhantomData<&'a ()>,
}

impl<'a> Arg<'a> {
    /// `bytes` of __local memory.
    pub fn local_bytes(bytes: usize) -> Arg<'static> {
        Arg {
            kind: sys::AETHERCL_ARG_LOCAL,
            size: bytes,
            buffer: std::ptr::null_mut(),
            scalar: [0; 8],
            _borrow: PhantomData,
        }
    }

    /// __local memory for `count` elements of T.
    pub fn local<T: Element>(count: usize) -> Arg<'static> {
        Arg::local_bytes(count.saturating_mul(size_of::<T>()))
    }

    /// A scalar of T, passed by value with T's size (the launch checks it against the parameter).
    pub fn scalar<T: Element>(value: T) -> Arg<'static> {
        let mut scalar = [0u8; 8];
        let size = size_of::<T>();
        // SAFETY: every Element is at most 8 bytes of plain data.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (&value as *const T).cast::<u8>(),
                scalar.as_mut_ptr(),
                size,
            )
        };
        Arg {
            kind: sys::AETHERCL_ARG_SCALAR,
            size,
            buffer: std::ptr::null_mut(),
            scalar,
            _borrow: PhantomData,
        }
    }
}

impl<'a, T: Element> From<&'a Buffer<T>> for Arg<'a> {
    fn from(buffer: &'a Buffer<T>) -> Arg<'a> {
        Arg {
            kind: sys::AETHERCL_ARG_BUFFER,
            size: 0,
            buffer: buffer.as_raw(),
            scalar: [0; 8],
            _borrow: PhantomData,
        }
    }
}

macro_rules! scalar_arg {
    ($($t:ty),*) => {
        $(impl From<$t> for Arg<'static> {
            fn from(value: $t) -> Arg<'static> { Arg::scalar(value) }
        })*
    };
}
scalar_arg!(f32, f64, i8, u8, i16, u16, i32, u32, i64, u64);

/// A kernel's argument list: `args![&a, &b, 2.0f32, n as u32, Arg::local::<f32>(64)]`.
#[macro_export]
macro_rules! args {
    ($($arg:expr),* $(,)?) => { [$($crate::Arg::from($arg)),*] };
}

impl Kernel {
    /// The __kernel function's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The kernel's JSON description: arguments, work-group limits (aethercl_kernel_info).
    pub fn info(&self) -> Result<String> {
        // SAFETY: buffer and capacity come from text_out and match.
        text_out("aethercl_kernel_info", |buffer, capacity| unsafe {
            sys::aethercl_kernel_info(self.handle.as_ptr(), buffer, capacity)
        })
    }

    /// Launches over `global` (1 to 3 dimensions) with work-groups of `local` (None: the runtime
    /// picks) on `stream` (None: the device's default stream). Counts, kinds and scalar sizes are
    /// checked against the kernel by the library; the call returns once the launch is issued.
    pub fn launch(
        &self,
        stream: Option<&Stream>,
        global: &[usize],
        local: Option<&[usize]>,
        args: &[Arg<'_>],
    ) -> Result<()> {
        const F: &str = "aethercl_launch";
        if let Some(local) = local {
            if local.len() != global.len() {
                return Err(Error::refused(
                    F,
                    sys::AETHERCL_INVALID_ARGUMENT,
                    format!(
                        "{}: local has {} dimensions, global {}",
                        F,
                        local.len(),
                        global.len()
                    ),
                ));
            }
        }
        let raw: Vec<sys::aethercl_arg> = args
            .iter()
            .map(|arg| sys::aethercl_arg {
                kind: arg.kind,
                size: arg.size,
                value: if arg.kind == sys::AETHERCL_ARG_SCALAR {
                    arg.scalar.as_ptr().cast()
                } else {
                    arg.buffer as *const c_void
                },
            })
            .collect();
        let work_dim = to_int(F, "work_dim", global.len())?;
        let num_args = to_int(F, "num_args", raw.len())?;
        let stream = stream.map_or(std::ptr::null_mut(), Stream::as_raw);
        // SAFETY: global/local hold work_dim entries, raw holds num_args arguments whose scalar
        // pointers point into `args`, alive across the call (the library copies scalars).
        check(F, unsafe {
            sys::aethercl_launch(
                self.device.index(),
                self.handle.as_ptr(),
                stream,
                work_dim,
                global.as_ptr(),
                local.map_or(std::ptr::null(), <[usize]>::as_ptr),
                num_args,
                raw.as_ptr(),
            )
        })
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        // SAFETY: a token this owner made.
        unsafe { sys::aethercl_kernel_destroy(self.handle.as_ptr()) };
    }
}
