//! Build script: where rustc finds libaethercl.so, and the README's Rust example for tests/readme.rs.
use std::env;
use std::fs;
use std::path::PathBuf;

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let checkout = manifest_dir.join("../..");

    // AETHERCL_LIB_DIR names the folder holding libaethercl.so; without it, the checkout's
    // build folder. The rpath lets this package's tests and examples run without
    // LD_LIBRARY_PATH (a dependent program gets the search path, not the rpath: README).
    println!("cargo:rerun-if-env-changed=AETHERCL_LIB_DIR");
    let lib_dir = env::var_os("AETHERCL_LIB_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| checkout.join("build"));
    println!("cargo:rustc-link-search=native={}", lib_dir.display());
    if env::var("CARGO_CFG_TARGET_OS").map_or(false, |os| os != "windows") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib_dir.display());
    }

    // The README's example, verbatim, so the test that runs it cannot drift from the text.
    let readme = checkout.join("README.md");
    println!("cargo:rerun-if-changed={}", readme.display());
    let text = fs::read_to_string(&readme).unwrap_or_else(|e| {
        panic!(
            "{}: {} (the crate builds inside the checkout)",
            readme.display(),
            e
        )
    });
    let example = readme_example(&text)
        .expect("README.md has no ```rust block under \"## Using the library from Rust\"");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets it"));
    fs::write(out.join("readme_example.rs"), example).expect("writing OUT_DIR/readme_example.rs");
}

/// The first ```rust block after the heading "## Using the library from Rust".
fn readme_example(text: &str) -> Option<String> {
    let section = &text[text.find("## Using the library from Rust")?..];
    let start = section.find("```rust\n")? + "```rust\n".len();
    let end = section[start..].find("\n```")?;
    Some(section[start..start + end + 1].to_string())
}
