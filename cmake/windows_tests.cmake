# Windows cross build: only the conformance program (run under Wine by tools/aethercl windows);
# the unit tests and Python suites need a native build.
include(${PROJECT_SOURCE_DIR}/cmake/conformance.cmake)
