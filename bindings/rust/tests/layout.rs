//! Every struct of the header has the C compiler's size, alignment and field offsets in Rust, and
//! the C scalar widths the declarations assume hold: compiles and runs the generated tests/layout.c
//! with the system C compiler (CC, default cc) and compares its lines with src/sys_layout.rs.
use std::path::PathBuf;
use std::process::Command;

fn c_layout() -> Vec<String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let program = out_dir.join("aethercl_layout");
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let status = Command::new(&compiler)
        .arg("-std=c11")
        .arg("-I")
        .arg(root.join("../../include"))
        .arg(root.join("tests/layout.c"))
        .arg("-o")
        .arg(&program)
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {:?}: {}", compiler, e));
    assert!(status.success(), "{} failed on tests/layout.c", compiler);
    let output = Command::new(&program)
        .output()
        .expect("running the layout program");
    assert!(output.status.success());
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn every_struct_has_the_c_layout() {
    let c = c_layout();
    let rust = aethercl::sys_layout::layout_lines();
    assert!(
        c.len() > 100,
        "the C program printed only {} lines",
        c.len()
    );
    let differing: Vec<String> = c
        .iter()
        .zip(rust.iter())
        .filter(|(c, r)| c != r)
        .map(|(c, r)| format!("C: {}  Rust: {}", c, r))
        .collect();
    assert!(
        differing.is_empty(),
        "layouts differ:\n{}",
        differing.join("\n")
    );
    assert_eq!(c.len(), rust.len(), "the two programs list different facts");
}

#[test]
fn the_gemm_descriptor_starts_with_its_size() {
    // The struct_size convention: the first field, a size_t, at offset 0.
    let lines = aethercl::sys_layout::layout_lines();
    assert!(lines.contains(&"aethercl_gemm_desc.struct_size offset 0".to_string()));
    assert!(lines.contains(&format!("size_t size {}", std::mem::size_of::<usize>())));
}
