//! Your own kernel from Rust: build OpenCL C, make buffers, launch with typed arguments, read back
//! and compare; then show that a wrong scalar type is refused with the library's message.
//!
//!     cargo run --example vector_add [gpu_index]
use aethercl::{args, Device};

const SOURCE: &str = "
__kernel void vecadd(__global const float* a, __global const float* b, __global float* c,
                     float alpha, uint n) {
  size_t i = get_global_id(0);
  if (i < n) c[i] = alpha * a[i] + b[i];
}";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let index = std::env::args().nth(1).map_or(Ok(0), |s| s.parse())?;
    let dev = Device::new(index)?;
    let kernel = dev.program(SOURCE, "")?.kernel("vecadd")?;
    let n = 1000usize;
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..n).map(|i| 0.5 * i as f32).collect();
    let (da, db, dc) = (
        dev.buffer_from(&a)?,
        dev.buffer_from(&b)?,
        dev.alloc::<f32>(n)?,
    );
    dc.set_label("result")?;
    let alpha = 2.0f32;
    kernel.launch(
        None,
        &[n],
        Some(&[50]),
        &args![&da, &db, &dc, alpha, n as u32],
    )?;
    let c = dc.read()?;
    // Small integers and halves: every value is exact in float32, fused or not.
    let wrong = (0..n).filter(|&i| c[i] != alpha * a[i] + b[i]).count();
    println!(
        "vecadd over {} elements: {}",
        n,
        if wrong == 0 { "correct" } else { "WRONG" }
    );
    match kernel.launch(None, &[n], None, &args![&da, &db, &dc, 2.0f64, n as u32]) {
        Ok(()) => return Err("a double for a float parameter was accepted".into()),
        Err(e) => println!("refused as expected: {}", e),
    }
    if wrong != 0 {
        return Err(format!("{} wrong elements", wrong).into());
    }
    Ok(())
}
