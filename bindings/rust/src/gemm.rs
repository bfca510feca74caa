//! General matrix products through aethercl_gemm, its descriptor filled from typed buffers.
use crate::buffer::{Buffer, Element};
use crate::device::Device;
use crate::error::{check, to_int, Error, Result};
use crate::stream::Stream;
use crate::sys;
use std::os::raw::{c_int, c_longlong};

/// C[b] (m x n) = alpha * op(A[b]) op(B[b]) + beta * C[b] for b < batch, row-major (the header's
/// aethercl_gemm_desc). Leading dimensions and strides of `None` are those of packed operands.
#[derive(Debug, Clone, PartialEq)]
pub struct Gemm {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub batch: usize,
    pub trans_a: bool,
    pub trans_b: bool,
    pub alpha: f32,
    pub beta: f32,
    pub lda: Option<usize>,
    pub ldb: Option<usize>,
    pub ldc: Option<usize>,
    pub stride_a: Option<usize>,
    pub stride_b: Option<usize>,
    pub stride_c: Option<usize>,
    /// A compute mode, `sys::AETHERCL_COMPUTE_*` (default: the device's matmul precision).
    pub compute: c_int,
}

impl Gemm {
    /// C = A B of packed m x k and k x n operands, one batch item, alpha 1, beta 0.
    pub fn new(m: usize, n: usize, k: usize) -> Gemm {
        Gemm {
            m,
            n,
            k,
            batch: 1,
            trans_a: false,
            trans_b: false,
            alpha: 1.0,
            beta: 0.0,
            lda: None,
            ldb: None,
            ldc: None,
            stride_a: None,
            stride_b: None,
            stride_c: None,
            compute: sys::AETHERCL_COMPUTE_DEFAULT,
        }
    }

    /// Enqueues the product on `stream` (None: the default stream) of `device`. The library
    /// checks every element touched against the buffers and refuses with the field's name.
    pub fn run<T: Element>(
        &self,
        device: &Device,
        a: &Buffer<T>,
        b: &Buffer<T>,
        c: &Buffer<T>,
        stream: Option<&Stream>,
    ) -> Result<()> {
        const F: &str = "aethercl_gemm";
        let (a_cols, b_cols) = (
            if self.trans_a { self.m } else { self.k },
            if self.trans_b { self.k } else { self.n },
        );
        let (a_rows, b_rows) = (
            if self.trans_a { self.k } else { self.m },
            if self.trans_b { self.n } else { self.k },
        );
        let lda = self.lda.unwrap_or_else(|| a_cols.max(1));
        let ldb = self.ldb.unwrap_or_else(|| b_cols.max(1));
        let ldc = self.ldc.unwrap_or_else(|| self.n.max(1));
        let stride = |given: Option<usize>, rows: usize, ld: usize| -> Result<c_longlong> {
            let value = given
                .or_else(|| rows.checked_mul(ld))
                .ok_or_else(|| overflow(F))?;
            c_longlong::try_from(value).map_err(|_| overflow(F))
        };
        let desc = sys::aethercl_gemm_desc {
            struct_size: std::mem::size_of::<sys::aethercl_gemm_desc>(),
            trans_a: c_int::from(self.trans_a),
            trans_b: c_int::from(self.trans_b),
            m: to_int(F, "m", self.m)?,
            n: to_int(F, "n", self.n)?,
            k: to_int(F, "k", self.k)?,
            batch: to_int(F, "batch", self.batch)?,
            stride_a: stride(self.stride_a, a_rows, lda)?,
            stride_b: stride(self.stride_b, b_rows, ldb)?,
            stride_c: stride(self.stride_c, self.m, ldc)?,
            lda: to_int(F, "lda", lda)?,
            ldb: to_int(F, "ldb", ldb)?,
            ldc: to_int(F, "ldc", ldc)?,
            alpha: self.alpha,
            beta: self.beta,
            a: a.as_raw(),
            offset_a: 0,
            dtype_a: T::DTYPE,
            b: b.as_raw(),
            offset_b: 0,
            dtype_b: T::DTYPE,
            c: c.as_raw(),
            offset_c: 0,
            dtype_c: T::DTYPE,
            compute: self.compute,
        };
        let stream = stream.map_or(std::ptr::null_mut(), Stream::as_raw);
        // SAFETY: desc is a complete descriptor read once during the call; handles are tokens.
        check(F, unsafe {
            sys::aethercl_gemm(device.index(), &desc, stream)
        })
    }
}

fn overflow(function: &'static str) -> Error {
    Error::refused(
        function,
        sys::AETHERCL_INVALID_ARGUMENT,
        format!("{}: a batch stride overflows", function),
    )
}
