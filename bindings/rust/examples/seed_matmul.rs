//! The seed's matmul demo from Rust: load a matmul kernel, make buffers A and B from host data and
//! an empty C, dispatch a grid of work-groups, wait, read C back; then the same product through
//! the seed ABI's execute_matmul_on_gpu, both checked against the CPU.
//!
//!     cargo run --example seed_matmul [gpu_index] [N]
use aethercl::{args, Device};

const SOURCE: &str = "
__kernel void matmul(__global const float* a, __global const float* b, __global float* c, int n) {
  int col = get_global_id(0), row = get_global_id(1);
  if (row >= n || col >= n) return;
  float acc = 0.0f;
  for (int p = 0; p < n; ++p) acc += a[row * n + p] * b[p * n + col];
  c[row * n + col] = acc;
}";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut argv = std::env::args().skip(1);
    let index = argv.next().map_or(Ok(0), |s| s.parse())?;
    let n: usize = argv.next().map_or(Ok(64), |s| s.parse())?;
    let dev = Device::new(index)?; // gpu = GPU()
    let kernel = dev.program(SOURCE, "")?.kernel("matmul")?; // gpu.load_spirv("matmul.spv")
    let data_a: Vec<f32> = (0..n * n).map(|i| (i % 17) as f32 / 16.0).collect();
    let data_b: Vec<f32> = (0..n * n).map(|i| (i % 13) as f32 / 8.0 - 0.75).collect();
    let (a, b) = (dev.buffer_from(&data_a)?, dev.buffer_from(&data_b)?); // gpu.buffer(data)
    let c = dev.alloc::<f32>(n * n)?; // gpu.buffer(size=N*N)
    let group = 8usize;
    let groups = (n + group - 1) / group; // dispatch(kernel, A, B, C, groups=(g, g, 1))
    kernel.launch(
        None,
        &[groups * group, groups * group],
        Some(&[group, group]),
        &args![&a, &b, &c, n as i32],
    )?;
    dev.synchronize()?; // gpu.wait()
    let result = c.read()?; // C.read()
    let seed = dev.alloc::<f32>(n * n)?;
    dev.matmul(&a, &b, &seed, 1, n, n, n)?;
    let seed_result = seed.read()?;
    let mut worst = 0.0f64;
    for i in 0..n {
        for j in 0..n {
            let want: f64 = (0..n)
                .map(|p| data_a[i * n + p] as f64 * data_b[p * n + j] as f64)
                .sum();
            worst = worst.max((result[i * n + j] as f64 - want).abs());
            worst = worst.max((seed_result[i * n + j] as f64 - want).abs());
        }
    }
    // Products of multiples of 1/16 and 1/8 below 2: float32 sums of n such terms stay exact up
    // to n = 512, so both products must equal the reference there.
    println!(
        "matmul {}x{}: kernel and execute_matmul_on_gpu, largest difference from the CPU {:e}",
        n, n, worst
    );
    if worst > 1e-4 {
        return Err("matmul result differs from the CPU".into());
    }
    Ok(())
}
