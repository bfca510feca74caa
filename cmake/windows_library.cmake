# driver.dll (Windows): exports exactly the manifest through a .def generated from
# abi/driver.abi; libstdc++, libgcc and winpthread are linked in, so the DLL needs only
# OpenCL.dll and the system DLLs. simulated_driver.dll is a copy (the name app.py loads).
include(${PROJECT_SOURCE_DIR}/cmake/abi_def.cmake)
set(AETHERCL_DEF_FILE ${PROJECT_BINARY_DIR}/generated/driver.def)
aethercl_write_def_file(${AETHERCL_MANIFEST} ${AETHERCL_DEF_FILE} driver.dll)
target_sources(driver PRIVATE ${AETHERCL_DEF_FILE})
set_target_properties(driver PROPERTIES OUTPUT_NAME driver PREFIX "" ARCHIVE_OUTPUT_NAME aethercl
                      LINK_DEPENDS ${AETHERCL_DEF_FILE})
target_link_options(driver PRIVATE -static -Wl,--no-undefined)
find_program(AETHERCL_OBJDUMP NAMES x86_64-w64-mingw32-objdump objdump REQUIRED)
add_custom_command(TARGET driver POST_BUILD
  COMMAND ${CMAKE_COMMAND} -DDLL=$<TARGET_FILE:driver> -DMANIFEST=${AETHERCL_MANIFEST}
          -DOBJDUMP=${AETHERCL_OBJDUMP} -P ${PROJECT_SOURCE_DIR}/cmake/check_dll_exports.cmake
  COMMAND ${CMAKE_COMMAND} -E copy $<TARGET_FILE:driver> ${PROJECT_BINARY_DIR}/simulated_driver.dll
  VERBATIM)
