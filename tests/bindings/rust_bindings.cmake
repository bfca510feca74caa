# ctest rust_bindings (cmake -P): `cargo test --offline` of bindings/rust (struct layouts against
# the C compiler, refusals and their messages, numerics against references computed in Rust,
# README.md's Rust example), then its three examples, against the library in LIB_DIR. Cargo's
# home and target folders live in the build folder, so nothing is written to ~ or the checkout.
# Without cargo the test is skipped with the reason (ctest's SKIP_REGULAR_EXPRESSION), except
# with CI=true, where a missing toolchain fails it.
# Inputs: SOURCE_DIR, BUILD_DIR, LIB_DIR, C_COMPILER.
cmake_minimum_required(VERSION 3.25)

# Debian's toolchain first: the crate promises to build with its rustc 1.63, and a newer rustup
# toolchain earlier in PATH would hide a break. AETHERCL_CARGO names another cargo.
if(DEFINED ENV{AETHERCL_CARGO})
  set(_cargo $ENV{AETHERCL_CARGO})
else()
  find_program(_cargo cargo PATHS /usr/bin NO_DEFAULT_PATH)
  if(NOT _cargo)
    find_program(_cargo cargo)
  endif()
endif()
if(NOT _cargo OR NOT EXISTS "${_cargo}")
  set(_why "cargo not found (tools/aethercl setup installs Debian's rustc and cargo)")
  if("$ENV{CI}" STREQUAL "true")
    message(FATAL_ERROR "${_why}; CI=true: a missing toolchain is a failure, not a skip")
  endif()
  message("AETHERCL-SKIP: ${_why}")
  return()
endif()
# The rustc beside that cargo, so cargo does not pick another one from PATH.
get_filename_component(_bin ${_cargo} DIRECTORY)
set(_rustc_env "")
if(EXISTS ${_bin}/rustc)
  set(_rustc_env RUSTC=${_bin}/rustc)
endif()

set(_env ${CMAKE_COMMAND} -E env CARGO_HOME=${BUILD_DIR}/cargo-home
    CARGO_TARGET_DIR=${BUILD_DIR}/rust-target AETHERCL_LIB_DIR=${LIB_DIR} CC=${C_COMPILER}
    ${_rustc_env})
set(_manifest --manifest-path ${SOURCE_DIR}/bindings/rust/Cargo.toml)

function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE _code)
  if(NOT _code EQUAL 0)
    list(JOIN ARGN " " _command)
    message(FATAL_ERROR "failed (${_code}): ${_command}")
  endif()
endfunction()

step(${_env} ${_cargo} --version)
step(${_env} ${_bin}/rustc --version)
step(${_env} ${_cargo} test --offline ${_manifest})
foreach(_example vector_add gemm seed_matmul)
  step(${_env} ${_cargo} run --offline --quiet ${_manifest} --example ${_example})
endforeach()
