//! Numerics against float64 references computed here, on odd sizes: aethercl_gemm (transposes,
//! batches, alpha and beta), the seed matmul, and a kernel of our own. Outputs are poisoned (NaN)
//! before each call and every output buffer has guard elements past its end that must survive.
use aethercl::{args, sys, Buffer, Device, Gemm};

const GUARD: usize = 7;
const SENTINEL: f32 = 12345.5;

/// A small deterministic generator (no crates): uniform values in [-1, 1).
struct Rng(u64);
impl Rng {
    fn values(&mut self, count: usize) -> Vec<f32> {
        (0..count)
            .map(|_| {
                self.0 = self
                    .0
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((self.0 >> 40) as f32) / (1u64 << 24) as f32 * 2.0 - 1.0
            })
            .collect()
    }
}

/// An output buffer of `len` elements plus guards: `initial` (None: NaN poison) then SENTINELs.
fn output(dev: &Device, len: usize, initial: Option<&[f32]>) -> Buffer<f32> {
    let buffer = dev.alloc::<f32>(len + GUARD).unwrap();
    let mut host = initial.map_or_else(|| vec![f32::NAN; len], <[f32]>::to_vec);
    host.extend(std::iter::repeat(SENTINEL).take(GUARD));
    buffer.write(&host).unwrap();
    buffer
}

/// The first len elements, after checking that the guards are intact.
fn result(buffer: &Buffer<f32>, len: usize) -> Vec<f32> {
    let mut all = buffer.read().unwrap();
    assert!(
        all[len..].iter().all(|&g| g == SENTINEL),
        "a guard element past the output was written"
    );
    all.truncate(len);
    all
}

/// Error bound of a float32 sum of k products accumulated in any order: k * 2^-24 * sum |terms|
/// (plus one rounding of alpha, beta and the result), doubled as a margin.
fn check_close(got: &[f32], want: &[f64], magnitude: &[f64], terms: usize, what: &str) {
    for (i, ((&g, &w), &s)) in got.iter().zip(want).zip(magnitude).enumerate() {
        let bound = 2.0 * (terms as f64 + 3.0) * 2f64.powi(-24) * s;
        assert!(
            !g.is_nan() && (g as f64 - w).abs() <= bound,
            "{}: element {}: {} vs {} (bound {:e})",
            what,
            i,
            g,
            w,
            bound
        );
    }
}

#[allow(clippy::too_many_arguments)]
fn gemm_case(
    dev: &Device,
    rng: &mut Rng,
    m: usize,
    n: usize,
    k: usize,
    batch: usize,
    trans_a: bool,
    trans_b: bool,
    alpha: f32,
    beta: f32,
) {
    let (a, b) = (rng.values(batch * m * k), rng.values(batch * k * n));
    let c0 = rng.values(batch * m * n);
    let a_at = |t: usize, i: usize, p: usize| {
        a[t * m * k + if trans_a { p * m + i } else { i * k + p }] as f64
    };
    let b_at = |t: usize, p: usize, j: usize| {
        b[t * k * n + if trans_b { j * k + p } else { p * n + j }] as f64
    };
    let (mut want, mut magnitude) = (vec![0.0; batch * m * n], vec![0.0; batch * m * n]);
    for t in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let (mut sum, mut abs) = (0.0, 0.0);
                for p in 0..k {
                    sum += a_at(t, i, p) * b_at(t, p, j);
                    abs += (a_at(t, i, p) * b_at(t, p, j)).abs();
                }
                let at = t * m * n + i * n + j;
                want[at] = alpha as f64 * sum + beta as f64 * c0[at] as f64;
                magnitude[at] = (alpha as f64).abs() * abs + (beta as f64 * c0[at] as f64).abs();
            }
        }
    }
    let (da, db) = (dev.buffer_from(&a).unwrap(), dev.buffer_from(&b).unwrap());
    // beta = 0 never reads C: a NaN poison there must not leak into the result.
    let dc = output(
        dev,
        batch * m * n,
        if beta == 0.0 { None } else { Some(&c0) },
    );
    let gemm = Gemm {
        batch,
        trans_a,
        trans_b,
        alpha,
        beta,
        compute: sys::AETHERCL_COMPUTE_FP32,
        ..Gemm::new(m, n, k)
    };
    gemm.run(dev, &da, &db, &dc, None).unwrap();
    let what = format!(
        "gemm m={} n={} k={} batch={} ta={} tb={}",
        m, n, k, batch, trans_a, trans_b
    );
    check_close(&result(&dc, batch * m * n), &want, &magnitude, k, &what);
}

#[test]
fn gemm_matches_a_float64_reference() {
    let dev = Device::new(0).unwrap();
    let mut rng = Rng(0x5eed);
    gemm_case(&dev, &mut rng, 37, 29, 53, 1, false, false, 1.0, 0.0);
    gemm_case(&dev, &mut rng, 17, 23, 31, 3, true, false, 0.75, -0.5);
    gemm_case(&dev, &mut rng, 9, 13, 11, 2, false, true, -1.25, 0.0);
    gemm_case(&dev, &mut rng, 5, 7, 1, 1, true, true, 2.0, 1.0);
}

#[test]
fn seed_matmul_matches_a_float64_reference() {
    let dev = Device::new(0).unwrap();
    let mut rng = Rng(0xa11ce);
    let (batch, m, n, k) = (2, 19, 21, 15);
    let (a, b) = (rng.values(batch * m * k), rng.values(k * n));
    let (mut want, mut magnitude) = (vec![0.0; batch * m * n], vec![0.0; batch * m * n]);
    for t in 0..batch {
        for i in 0..m {
            for j in 0..n {
                for p in 0..k {
                    let product = a[t * m * k + i * k + p] as f64 * b[p * n + j] as f64;
                    want[t * m * n + i * n + j] += product;
                    magnitude[t * m * n + i * n + j] += product.abs();
                }
            }
        }
    }
    let (da, db) = (dev.buffer_from(&a).unwrap(), dev.buffer_from(&b).unwrap());
    let dc = output(&dev, batch * m * n, None);
    dev.matmul(&da, &db, &dc, batch, m, n, k).unwrap();
    check_close(
        &result(&dc, batch * m * n),
        &want,
        &magnitude,
        k,
        "execute_matmul_on_gpu",
    );
}

#[test]
fn own_kernel_on_a_stream_matches_the_reference() {
    let dev = Device::new(0).unwrap();
    let source =
        "__kernel void axpy(__global const float* x, __global const float* y, __global float* z,
                                     float alpha, uint n) {
                    size_t i = get_global_id(0); if (i < n) z[i] = alpha * x[i] + y[i]; }";
    let kernel = dev.program(source, "").unwrap().kernel("axpy").unwrap();
    let mut rng = Rng(7);
    let n = 1001;
    let (x, y) = (rng.values(n), rng.values(n));
    let alpha = -0.625f32;
    let (dx, dy) = (dev.buffer_from(&x).unwrap(), dev.buffer_from(&y).unwrap());
    let dz = output(&dev, n, None);
    let stream = dev.stream(true).unwrap();
    // The writes above ran on the default stream: another stream must wait for them.
    stream.wait_event(&dev.record_event().unwrap()).unwrap();
    let start = stream.record().unwrap();
    kernel
        .launch(
            Some(&stream),
            &[n],
            None,
            &args![&dx, &dy, &dz, alpha, n as u32],
        )
        .unwrap();
    let end = stream.record().unwrap();
    end.synchronize().unwrap();
    assert!(end.query().unwrap());
    assert!(start.elapsed_ms(&end).unwrap() >= 0.0);
    let want: Vec<f64> = x
        .iter()
        .zip(&y)
        .map(|(&x, &y)| alpha as f64 * x as f64 + y as f64)
        .collect();
    // One product and one sum in float32 (or one fused rounding): two roundings at most.
    let magnitude: Vec<f64> = x
        .iter()
        .zip(&y)
        .map(|(&x, &y)| (alpha as f64 * x as f64).abs() + (y as f64).abs())
        .collect();
    check_close(&result(&dz, n), &want, &magnitude, 1, "axpy kernel");
    assert!(dev.memory_stats().unwrap().contains("live_buffers"));
    assert!(
        kernel.info().unwrap().contains("\"name\": \"axpy\"")
            || kernel.info().unwrap().contains("\"name\":\"axpy\"")
    );
}
