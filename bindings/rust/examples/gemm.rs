//! A general matrix product through aethercl_gemm from Rust: C = alpha * A^T B + beta * C on odd
//! sizes, compared with a float64 product computed here.
//!
//!     cargo run --example gemm [gpu_index]
use aethercl::{sys, Device, Gemm};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let index = std::env::args().nth(1).map_or(Ok(0), |s| s.parse())?;
    let dev = Device::new(index)?;
    let (m, n, k) = (45usize, 31usize, 67usize);
    // A is stored k x m (used transposed), B is k x n, C is m x n.
    let a: Vec<f32> = (0..k * m)
        .map(|i| ((i * 7 % 13) as f32 - 6.0) / 8.0)
        .collect();
    let b: Vec<f32> = (0..k * n)
        .map(|i| ((i * 5 % 11) as f32 - 5.0) / 4.0)
        .collect();
    let c0: Vec<f32> = (0..m * n).map(|i| (i % 3) as f32).collect();
    let (da, db, dc) = (
        dev.buffer_from(&a)?,
        dev.buffer_from(&b)?,
        dev.buffer_from(&c0)?,
    );
    let gemm = Gemm {
        trans_a: true,
        alpha: 0.5,
        beta: -1.0,
        compute: sys::AETHERCL_COMPUTE_FP32,
        ..Gemm::new(m, n, k)
    };
    gemm.run(&dev, &da, &db, &dc, None)?;
    let c = dc.read()?;
    let mut worst = 0.0f64;
    for i in 0..m {
        for j in 0..n {
            let sum: f64 = (0..k)
                .map(|p| a[p * m + i] as f64 * b[p * n + j] as f64)
                .sum();
            let want = 0.5 * sum - c0[i * n + j] as f64;
            worst = worst.max((c[i * n + j] as f64 - want).abs());
        }
    }
    // Inputs are multiples of 1/32 below 2 in magnitude, so every product and partial sum of at
    // most 67 terms is exact in float32: the result must match to the last bit of rounding.
    println!(
        "gemm {}x{}x{} (A transposed): largest difference from float64 {:e}",
        m, n, k, worst
    );
    if worst > 1e-5 {
        return Err("gemm result differs from the reference".into());
    }
    Ok(())
}
