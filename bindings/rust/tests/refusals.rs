//! Refused calls come back as Err with the library's status code and message (the message names
//! the function, the argument and the sizes), and the library keeps working afterwards.
use aethercl::{args, sys, Device, Error, Gemm};

const SOURCE: &str =
    "__kernel void scale(__global const float* a, __global float* c, float alpha, uint n) {
    size_t i = get_global_id(0); if (i < n) c[i] = alpha * a[i]; }";

fn expect_refusal<T: std::fmt::Debug>(
    result: Result<T, Error>,
    code: i32,
    parts: &[&str],
) -> Error {
    let error = result.expect_err("the call was accepted");
    assert_eq!(error.code(), code, "wrong status for {}", error);
    for part in parts {
        assert!(
            error.message().contains(part),
            "message lacks {:?}: {}",
            part,
            error.message()
        );
    }
    error
}

#[test]
fn devices_and_allocations() {
    expect_refusal(
        Device::new(100_000),
        sys::AETHERCL_NO_DEVICE,
        &["initialize_gpu", "gpu_index 100000", "out of range"],
    );
    let dev = Device::new(0).unwrap();
    let error = expect_refusal(
        dev.alloc::<f32>(0),
        sys::AETHERCL_INVALID_ARGUMENT,
        &["allocate_gpu_memory", "size is 0"],
    );
    assert_eq!(error.function(), "allocate_gpu_memory");
    assert_eq!(error.status_name(), "AETHERCL_INVALID_ARGUMENT");
    assert!(error
        .to_string()
        .starts_with("allocate_gpu_memory failed (AETHERCL_INVALID_ARGUMENT): "));
    let buffer = dev.alloc::<f32>(10).unwrap();
    expect_refusal(
        buffer.write(&[0.0; 11]),
        sys::AETHERCL_OUT_OF_RANGE,
        &["write_host_to_gpu_blocking", "44", "40 bytes"],
    );
    let mut out = [0.0f32; 4];
    expect_refusal(
        buffer.read_at(8, &mut out),
        sys::AETHERCL_OUT_OF_RANGE,
        &["read_gpu_to_host_blocking", "40 bytes"],
    );
    // Element offsets whose byte count overflows are refused before the call.
    expect_refusal(
        buffer.write_at(usize::MAX / 2, &[1.0]),
        sys::AETHERCL_INVALID_ARGUMENT,
        &["overflow"],
    );
    // Still working: a round trip after the refusals.
    buffer.write(&[7.0; 10]).unwrap();
    assert_eq!(buffer.read().unwrap(), vec![7.0; 10]);
}

#[test]
fn programs_kernels_and_launches() {
    let dev = Device::new(0).unwrap();
    expect_refusal(
        dev.program(
            "__kernel void f(__global float* x) { x[0] = undefined_thing; }",
            "",
        ),
        sys::AETHERCL_BUILD_FAILED,
        &["aethercl_program_create", "undefined_thing"],
    );
    expect_refusal(
        dev.program("__kernel void f() {}\0", ""),
        sys::AETHERCL_INVALID_ARGUMENT,
        &["NUL byte"],
    );
    let program = dev.program(SOURCE, "").unwrap();
    expect_refusal(
        program.kernel("missing"),
        sys::AETHERCL_INVALID_ARGUMENT,
        &["'missing'", "its kernels: scale"],
    );
    let kernel = program.kernel("scale").unwrap();
    drop(program); // the kernel outlives its program
    let (a, c) = (dev.alloc::<f32>(16).unwrap(), dev.alloc::<f32>(16).unwrap());
    expect_refusal(
        kernel.launch(None, &[16], None, &args![&a, &c, 2.0f64, 16u32]),
        sys::AETHERCL_INVALID_ARGUMENT,
        &["args[2].size = 8", "'alpha'", "float of 4 bytes"],
    );
    expect_refusal(
        kernel.launch(None, &[16], None, &args![&a, &c, 2.0f32]),
        sys::AETHERCL_INVALID_ARGUMENT,
        &["num_args = 3", "takes 4 arguments"],
    );
    expect_refusal(
        kernel.launch(None, &[16], None, &args![&a, 1.0f32, 2.0f32, 16u32]),
        sys::AETHERCL_INVALID_ARGUMENT,
        &["args[1] is a scalar", "'c'"],
    );
    expect_refusal(
        kernel.launch(None, &[16], Some(&[4, 4]), &args![&a, &c, 2.0f32, 16u32]),
        sys::AETHERCL_INVALID_ARGUMENT,
        &["local has 2 dimensions, global 1"],
    );
    a.write(&[1.0; 16]).unwrap();
    kernel
        .launch(None, &[16], None, &args![&a, &c, 2.0f32, 16u32])
        .unwrap();
    assert_eq!(c.read().unwrap(), vec![2.0; 16]);
}

#[test]
fn gemm_operands_are_checked() {
    let dev = Device::new(0).unwrap();
    let (a, b, c) = (
        dev.alloc::<f32>(9).unwrap(),
        dev.alloc::<f32>(9).unwrap(),
        dev.alloc::<f32>(5).unwrap(),
    );
    expect_refusal(
        Gemm::new(3, 3, 3).run(&dev, &a, &b, &c, None),
        sys::AETHERCL_OUT_OF_RANGE,
        &[
            "aethercl_gemm",
            "desc->c",
            "holds 20 bytes",
            "needs 36 bytes",
        ],
    );
    let mut bad = Gemm::new(3, 3, 3);
    bad.compute = 99;
    expect_refusal(
        bad.run(&dev, &a, &b, &a, None),
        sys::AETHERCL_INVALID_ARGUMENT,
        &["aethercl_gemm"],
    );
    // u32 has no dtype code: the library refuses the descriptor's dtype.
    let (x, y) = (dev.alloc::<u32>(9).unwrap(), dev.alloc::<u32>(9).unwrap());
    expect_refusal(
        Gemm::new(3, 3, 3).run(&dev, &x, &x, &y, None),
        sys::AETHERCL_INVALID_ARGUMENT,
        &["dtype"],
    );
}
