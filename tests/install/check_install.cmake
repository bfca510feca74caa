# ctest install_downstream (cmake -P): installs the build into a fresh prefix, moves the prefix
# (the packages must be relocatable), then builds and runs tests/install/consumer through
# find_package(AetherCL) and through pkg-config, and checks that a program linked the way old
# clients link (-l:driver.so) records the SONAME. With SUBPROJECT=1 it builds the consumer with
# the checkout as a subproject instead (FULL_SUBPROJECT=1 also links and runs it). With CPP=1 it
# builds and runs the C++17 consumer of aethercl.hpp (tests/install/consumer_cpp) and README.md's
# C++ example, extracted verbatim, against the moved prefix instead.
# Inputs: BUILD_DIR, SOURCE_DIR, WORK_DIR, C_COMPILER (CXX_COMPILER for CPP=1), GENERATOR.
cmake_minimum_required(VERSION 3.25)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE _code OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
  if(NOT _code EQUAL 0)
    list(JOIN ARGN " " _command)
    message(FATAL_ERROR "failed (${_code}): ${_command}\n${_out}")
  endif()
  set(LAST_OUTPUT "${_out}" PARENT_SCOPE)
endfunction()

set(_consumer ${SOURCE_DIR}/tests/install/consumer)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

if(SUBPROJECT)
  # Configure and generate the consumer with the checkout inside it, then compile consumer.c,
  # which sees the header only through AetherCL::aethercl's usage requirements. Linking would
  # build the whole library a second time (about 9 minutes on 2 cores), so it is left to
  # FULL_SUBPROJECT=1 (README: "As a subproject").
  run(${CMAKE_COMMAND} -S ${_consumer} -B ${WORK_DIR}/sub-build -G ${GENERATOR}
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=${C_COMPILER} -DAETHERCL_SOURCE_DIR=${SOURCE_DIR})
  if(FULL_SUBPROJECT)
    run(${CMAKE_COMMAND} --build ${WORK_DIR}/sub-build --target consumer)
    run(${WORK_DIR}/sub-build/consumer)
  else()
    set(_object consumer.c.o)
    if(GENERATOR MATCHES "Ninja")
      set(_object CMakeFiles/consumer.dir/consumer.c.o)
    endif()
    run(${CMAKE_COMMAND} --build ${WORK_DIR}/sub-build --target ${_object})
    set(LAST_OUTPUT "configured, consumer.c compiled against AetherCL::aethercl")
  endif()
  string(STRIP "${LAST_OUTPUT}" LAST_OUTPUT)
  message(STATUS "subproject: ${LAST_OUTPUT}")
  file(REMOVE_RECURSE ${WORK_DIR})
  return()
endif()

# Install, then move the tree: nothing may remember the first prefix.
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/first)
file(RENAME ${WORK_DIR}/first ${WORK_DIR}/prefix)
set(_prefix ${WORK_DIR}/prefix)
file(GLOB_RECURSE _pc ${_prefix}/*/aethercl.pc)
get_filename_component(_pc_dir "${_pc}" DIRECTORY)

if(CPP)
  # The first ```cpp block under "## Using the library from C++", as written there.
  file(READ ${SOURCE_DIR}/README.md _readme)
  string(FIND "${_readme}" "## Using the library from C++" _at)
  if(_at EQUAL -1)
    message(FATAL_ERROR "README.md has no section \"Using the library from C++\"")
  endif()
  string(SUBSTRING "${_readme}" ${_at} -1 _section)
  string(REGEX MATCH "```cpp\n(.*)" _ "${_section}")
  string(FIND "${CMAKE_MATCH_1}" "\n```" _end)
  if(NOT CMAKE_MATCH_1 OR _end EQUAL -1)
    message(FATAL_ERROR "README.md's C++ section has no ```cpp block")
  endif()
  string(SUBSTRING "${CMAKE_MATCH_1}" 0 ${_end} _example)
  file(WRITE ${WORK_DIR}/readme_example.cpp "${_example}\n")
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/consumer_cpp -B ${WORK_DIR}/cpp-build
      -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
      -DCMAKE_PREFIX_PATH=${_prefix} -DREADME_EXAMPLE=${WORK_DIR}/readme_example.cpp)
  run(${CMAKE_COMMAND} --build ${WORK_DIR}/cpp-build)
  run(${WORK_DIR}/cpp-build/consumer_cpp)
  string(STRIP "${LAST_OUTPUT}" LAST_OUTPUT)
  message(STATUS "${LAST_OUTPUT}")
  run(${WORK_DIR}/cpp-build/readme_example)
  message(STATUS "README.md's C++ example: built and ran (exit 0)")
  file(REMOVE_RECURSE ${WORK_DIR})
  return()
endif()

# 1. CMake package.
run(${CMAKE_COMMAND} -S ${_consumer} -B ${WORK_DIR}/cmake-build -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_PREFIX_PATH=${_prefix})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/cmake-build)
run(${WORK_DIR}/cmake-build/consumer)
string(STRIP "${LAST_OUTPUT}" LAST_OUTPUT)
  message(STATUS "find_package: ${LAST_OUTPUT}")

# 2. pkg-config (the README's link line).
find_program(PKG_CONFIG pkg-config REQUIRED)
set(_pkg ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${_pc_dir} ${PKG_CONFIG})
run(${_pkg} --cflags --libs aethercl)
separate_arguments(_flags UNIX_COMMAND "${LAST_OUTPUT}")
run(${_pkg} --variable=libdir aethercl)
string(STRIP "${LAST_OUTPUT}" _libdir)
if(NOT EXISTS ${_libdir}/libaethercl.so)
  message(FATAL_ERROR "pkg-config's libdir '${_libdir}' has no libaethercl.so")
endif()
run(${C_COMPILER} ${_consumer}/consumer.c ${_flags} -Wl,-rpath,${_libdir}
    -o ${WORK_DIR}/consumer-pkgconfig)
run(${WORK_DIR}/consumer-pkgconfig)
string(STRIP "${LAST_OUTPUT}" LAST_OUTPUT)
  message(STATUS "pkg-config: ${LAST_OUTPUT}")

# 3. An old client's link line: -l:driver.so from the client-name folder records the SONAME.
run(${C_COMPILER} ${_consumer}/consumer.c -I${_prefix}/include -L${_libdir}/aethercl -l:driver.so
    -Wl,-rpath,${_libdir} -o ${WORK_DIR}/consumer-driver-so)
run(readelf -d ${WORK_DIR}/consumer-driver-so)
string(REGEX MATCH "NEEDED\\)[^\n]*\\[libaethercl\\.so\\.[0-9]+\\]" _needed "${LAST_OUTPUT}")
if(NOT _needed)
  message(FATAL_ERROR "a program linked with -l:driver.so does not record the SONAME:\n${LAST_OUTPUT}")
endif()
run(${WORK_DIR}/consumer-driver-so)
string(STRIP "${LAST_OUTPUT}" LAST_OUTPUT)
  message(STATUS "-l:driver.so: ${LAST_OUTPUT}")
file(REMOVE_RECURSE ${WORK_DIR})
