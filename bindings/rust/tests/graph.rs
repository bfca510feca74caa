//! Graph: work captured on a stream, replayed on fresh inputs with the results of running it
//! eagerly; blocking calls refused while capturing (the capture goes on); a failed recording
//! discards its graph; info; a graph outliving its stream's other work.
use aethercl::{args, sys, Device, Graph};
use std::sync::{Mutex, MutexGuard};

/// A capture of the default stream records every thread's work on it (cargo runs tests on
/// threads): the tests of this file run one at a time.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

const SOURCE: &str = "__kernel void axpy(__global const float* x, __global float* y, float a,
    uint n) { size_t i = get_global_id(0); if (i < n) y[i] = a * x[i] + y[i]; }";
const N: usize = 1003; // not a multiple of any work-group size

#[test]
fn replays_read_the_current_inputs() {
    let _serial = one_at_a_time();
    let dev = Device::new(0).unwrap();
    let program = dev.program(SOURCE, "").unwrap();
    let axpy = program.kernel("axpy").unwrap();
    let stream = dev.stream(false).unwrap();
    let x = dev.alloc::<f32>(N).unwrap();
    let y = dev.alloc::<f32>(N).unwrap();
    y.write(&vec![0.0f32; N]).unwrap();
    let graph = Graph::capture(dev, Some(&stream), || {
        // Two launches: y = 2x, then y = 2x + 0.5x.
        axpy.launch(Some(&stream), &[N], None, &args![&x, &y, 2.0f32, N as u32])?;
        axpy.launch(Some(&stream), &[N], None, &args![&x, &y, 0.5f32, N as u32])
    })
    .unwrap();
    assert_eq!(y.read().unwrap(), vec![0.0f32; N], "capturing ran the work");
    let info = graph.info().unwrap();
    assert_eq!((info.device, info.nodes, info.kernels), (0, 2, 2), "{:?}", info);
    assert!(info.bytes_held >= 0);
    for round in 1..=3 {
        let xs: Vec<f32> = (0..N).map(|i| (i % 17) as f32 - round as f32).collect();
        x.write(&xs).unwrap();
        y.write(&vec![1.0f32; N]).unwrap();
        // The writes ran on the default stream: streams are ordered only by events.
        stream.wait_event(&dev.record_event().unwrap()).unwrap();
        graph.launch(Some(&stream)).unwrap();
        stream.synchronize().unwrap();
        let got = y.read().unwrap();
        for (i, (&g, &v)) in got.iter().zip(&xs).enumerate() {
            assert_eq!(g, 1.0 + 2.0 * v + 0.5 * v, "round {} element {}", round, i);
        }
    }
    graph.launch(None).unwrap(); // the default stream of the same device
    dev.synchronize().unwrap();
}

#[test]
fn blocking_calls_are_refused_while_capturing() {
    let _serial = one_at_a_time();
    let dev = Device::new(0).unwrap();
    let buffer = dev.alloc::<f32>(16).unwrap();
    let mut refusal = None;
    let graph = Graph::capture(dev, None, || {
        refusal = Some(buffer.write(&[1.0f32; 16]).expect_err("a blocking write was accepted"));
        buffer.fill_bytes(0) // recorded: the capture went on
    })
    .unwrap();
    let error = refusal.unwrap();
    assert_eq!(error.code(), sys::AETHERCL_INVALID_ARGUMENT, "{}", error);
    assert!(error.message().contains("captur"), "{}", error.message());
    assert_eq!(graph.info().unwrap().nodes, 1);
    buffer.write(&[7.0f32; 16]).unwrap();
    graph.launch(None).unwrap();
    assert_eq!(buffer.read().unwrap(), vec![0.0f32; 16]);
}

#[test]
fn a_failed_recording_returns_its_error_and_no_graph() {
    let _serial = one_at_a_time();
    let dev = Device::new(0).unwrap();
    let buffer = dev.alloc::<f32>(4).unwrap();
    let error = Graph::capture(dev, None, || {
        buffer.fill_bytes(0)?;
        buffer.read().map(|_| ())
    })
    .expect_err("the recording failed");
    assert_eq!(error.code(), sys::AETHERCL_INVALID_ARGUMENT, "{}", error);
    // The capture was ended: the default stream runs work again.
    buffer.write(&[3.0f32; 4]).unwrap();
    assert_eq!(buffer.read().unwrap(), vec![3.0f32; 4]);
}
