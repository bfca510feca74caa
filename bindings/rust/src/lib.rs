//! AetherCL from Rust: the raw C ABI ([`sys`], generated from abi/driver.abi and the header by
//! tools/gen_abi.py) and a safe layer over it: [`Device`], owned typed [`Buffer`]s, [`Program`]s
//! and [`Kernel`]s launched with typed [`Arg`]s, [`Stream`]s and [`Event`]s, GEMM through
//! [`Gemm`], captured and replayed [`Graph`]s, and every failure as an [`Error`] carrying the
//! status code and the library's message.
//!
//! Every owner releases its token on drop. The library validates every token, so a token used
//! after [`shutdown`] (or a buffer dropped after it) is refused or ignored, never undefined
//! behaviour.

pub mod sys;
#[doc(hidden)]
pub mod sys_layout;

mod buffer;
mod device;
mod error;
mod gemm;
mod graph;
mod program;
mod stream;

pub use buffer::{Buffer, Element};
pub use device::{abi_version, shutdown, version, Device};
pub use error::{Error, Result};
pub use gemm::Gemm;
pub use graph::{Graph, GraphInfo};
pub use program::{Arg, Kernel, Program};
pub use stream::{Event, Stream};
