//! Errors: the status code and message a failed call leaves (aethercl_last_error_code /
//! aethercl_last_error), or a refusal of the safe layer itself before any call.
use crate::sys;
use std::ffi::CStr;
use std::fmt;
use std::os::raw::{c_int, c_void};
use std::ptr::NonNull;

/// A failed call: which function, its status code (one of `sys::AETHERCL_*`) and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    function: &'static str,
    code: c_int,
    message: String,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The calling thread's last error of the library, blamed on `function`.
    pub(crate) fn last(function: &'static str) -> Error {
        // SAFETY: both calls take no arguments; the message is a NUL-terminated string the library
        // owns until the thread's next call, copied here at once.
        let (code, message) = unsafe {
            let text = sys::aethercl_last_error();
            let message = if text.is_null() {
                String::new()
            } else {
                CStr::from_ptr(text).to_string_lossy().into_owned()
            };
            (sys::aethercl_last_error_code(), message)
        };
        Error {
            function,
            code,
            message,
        }
    }

    /// A refusal of the safe layer (an argument the C ABI cannot even express), made before any
    /// call.
    pub(crate) fn refused(function: &'static str, code: c_int, message: String) -> Error {
        Error {
            function,
            code,
            message,
        }
    }

    /// The C function (or safe-layer method) that failed.
    pub fn function(&self) -> &'static str {
        self.function
    }

    /// The status code: `sys::AETHERCL_INVALID_ARGUMENT`, `sys::AETHERCL_OUT_OF_RANGE`, ...
    pub fn code(&self) -> c_int {
        self.code
    }

    /// The status code's name from the library ("AETHERCL_OUT_OF_RANGE").
    pub fn status_name(&self) -> String {
        // SAFETY: aethercl_status_name returns a static string for any int.
        unsafe { CStr::from_ptr(sys::aethercl_status_name(self.code)) }
            .to_string_lossy()
            .into_owned()
    }

    /// The library's message: names the function, the argument and the sizes involved.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} failed ({}): {}",
            self.function,
            self.status_name(),
            self.message
        )
    }
}

impl std::error::Error for Error {}

/// Ok for the ABI's success value 1, the last error otherwise.
pub(crate) fn check(function: &'static str, result: c_int) -> Result<()> {
    if result == 1 {
        Ok(())
    } else {
        Err(Error::last(function))
    }
}

/// The token, or the last error for NULL.
pub(crate) fn check_token(function: &'static str, token: *mut c_void) -> Result<NonNull<c_void>> {
    NonNull::new(token).ok_or_else(|| Error::last(function))
}

/// A size the C ABI takes as int, or a refusal naming it.
pub(crate) fn to_int(function: &'static str, what: &str, value: usize) -> Result<c_int> {
    c_int::try_from(value).map_err(|_| {
        Error::refused(
            function,
            sys::AETHERCL_INVALID_ARGUMENT,
            format!("{}: {} = {} does not fit a C int", function, what, value),
        )
    })
}

/// Text for a `const char*` parameter, or a refusal when it holds a NUL byte.
pub(crate) fn c_string(
    function: &'static str,
    what: &str,
    text: &str,
) -> Result<std::ffi::CString> {
    std::ffi::CString::new(text).map_err(|_| {
        Error::refused(
            function,
            sys::AETHERCL_INVALID_ARGUMENT,
            format!("{}: {} contains a NUL byte", function, what),
        )
    })
}

/// The whole text of a function with aethercl_device_info's buffer rules (sized first).
pub(crate) fn text_out(
    function: &'static str,
    call: impl Fn(*mut std::os::raw::c_char, usize) -> usize,
) -> Result<String> {
    let length = call(std::ptr::null_mut(), 0);
    if length == 0 {
        return Err(Error::last(function));
    }
    let mut bytes = vec![0u8; length + 1];
    if call(bytes.as_mut_ptr().cast(), bytes.len()) == 0 {
        return Err(Error::last(function));
    }
    bytes.truncate(length);
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
