# The C conformance program (tests/windows/conformance.c) against the library of this build:
# conformance.exe next to driver.dll in a MinGW build (run under Wine by tools/aethercl windows),
# a native `conformance` program plus its ctest in a Linux build (the reference run).
include(${PROJECT_SOURCE_DIR}/cmake/abi_def.cmake)
aethercl_write_name_header(${AETHERCL_MANIFEST} ${PROJECT_BINARY_DIR}/generated/manifest_names.h)
add_executable(conformance ${PROJECT_SOURCE_DIR}/tests/windows/conformance.c)
target_include_directories(conformance PRIVATE ${PROJECT_BINARY_DIR}/generated)
target_link_libraries(conformance PRIVATE driver aethercl_warnings ${CMAKE_DL_LIBS})
set_target_properties(conformance PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR})
if(WIN32)
  target_link_options(conformance PRIVATE -static)
endif()
