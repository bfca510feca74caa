//! Runs the Rust example of README.md ("Using the library from Rust") exactly as written there:
//! build.rs copies the block into OUT_DIR, so editing the README changes what this runs.
#![allow(dead_code)]

include!(concat!(env!("OUT_DIR"), "/readme_example.rs"));

#[test]
fn the_readme_example_runs() {
    main().expect("the README's Rust example failed");
}
