# MinGW-w64 cross build: OpenCL, fmt and spdlog for Windows from the build machine's headers
# (fmt and spdlog are header-only here), and an OpenCL import library (OpenCL.dll) generated from
# the Khronos header's function declarations with dlltool. Provides the targets the native build
# gets from find_package: OpenCL::OpenCL, fmt::fmt-header-only, spdlog::spdlog_header_only.
set(AETHERCL_HOST_INCLUDE_DIR /usr/include CACHE PATH
    "Build machine's include folder holding CL/, fmt/ and spdlog/ (headers only are used)")
set(_deps ${PROJECT_BINARY_DIR}/windows-deps)
file(MAKE_DIRECTORY ${_deps}/include ${_deps}/lib)
# Only these three folders are exposed, never the host's libc headers.
foreach(_dir CL fmt spdlog)
  if(NOT EXISTS ${AETHERCL_HOST_INCLUDE_DIR}/${_dir})
    message(FATAL_ERROR "${AETHERCL_HOST_INCLUDE_DIR}/${_dir} is missing (install opencl-headers "
                        "libfmt-dev libspdlog-dev)")
  endif()
  file(CREATE_LINK ${AETHERCL_HOST_INCLUDE_DIR}/${_dir} ${_deps}/include/${_dir} SYMBOLIC)
endforeach()

# OpenCL.def: every function CL/cl.h declares (what any Windows ICD loader exports).
file(READ ${AETHERCL_HOST_INCLUDE_DIR}/CL/cl.h _cl_header)
string(REGEX MATCHALL "CL_API_CALL[ \t\r\n]+cl[A-Za-z0-9_]+[ \t\r\n]*\\(" _declarations "${_cl_header}")
set(_def "LIBRARY OpenCL.dll\nEXPORTS\n")
set(_seen "")
foreach(_declaration IN LISTS _declarations)
  string(REGEX REPLACE "CL_API_CALL[ \t\r\n]+(cl[A-Za-z0-9_]+).*" "\\1" _function "${_declaration}")
  if(NOT _function IN_LIST _seen)
    list(APPEND _seen ${_function})
    string(APPEND _def "  ${_function}\n")
  endif()
endforeach()
file(WRITE ${_deps}/OpenCL.def "${_def}")
string(REGEX REPLACE "gcc(-posix)?$" "dlltool" _dlltool_name "${CMAKE_C_COMPILER}")
find_program(AETHERCL_DLLTOOL NAMES ${_dlltool_name} x86_64-w64-mingw32-dlltool REQUIRED)
execute_process(COMMAND ${AETHERCL_DLLTOOL} -d ${_deps}/OpenCL.def -l ${_deps}/lib/libOpenCL.dll.a
                        -D OpenCL.dll
                RESULT_VARIABLE _dlltool_result)
if(NOT _dlltool_result EQUAL 0)
  message(FATAL_ERROR "dlltool could not make the OpenCL import library")
endif()
list(LENGTH _seen _count)
message(STATUS "OpenCL import library: ${_count} functions from CL/cl.h")

add_library(OpenCL::OpenCL UNKNOWN IMPORTED)
set_target_properties(OpenCL::OpenCL PROPERTIES IMPORTED_LOCATION ${_deps}/lib/libOpenCL.dll.a
                      INTERFACE_INCLUDE_DIRECTORIES ${_deps}/include)
add_library(fmt::fmt-header-only INTERFACE IMPORTED)
set_target_properties(fmt::fmt-header-only PROPERTIES
                      INTERFACE_INCLUDE_DIRECTORIES ${_deps}/include
                      INTERFACE_COMPILE_DEFINITIONS FMT_HEADER_ONLY=1)
add_library(spdlog::spdlog_header_only INTERFACE IMPORTED)
set_target_properties(spdlog::spdlog_header_only PROPERTIES
                      INTERFACE_INCLUDE_DIRECTORIES ${_deps}/include
                      INTERFACE_LINK_LIBRARIES fmt::fmt-header-only)
