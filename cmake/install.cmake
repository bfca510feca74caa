# Install rules: the header, the library with its SONAME and client-name links, the ABI manifest,
# the CMake package (AetherCL::aethercl with a version file) and a relocatable pkg-config file.
include(CMakePackageConfigHelpers)

set(AETHERCL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/AetherCL)
set(AETHERCL_MANIFEST_DIR ${CMAKE_INSTALL_DATADIR}/aethercl)

install(TARGETS driver EXPORT AetherCLTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_COMPONENT Development
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Development
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/aethercl DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT Development)
install(FILES ${AETHERCL_MANIFEST} DESTINATION ${AETHERCL_MANIFEST_DIR})

# The names existing clients load live in their own folder, libdir/aethercl/, so a system lib
# folder gets no file called driver.so; each is a relative link to the SONAME, and the manifest
# sits beside them as it does in the build folder.
if(WIN32)
  install(FILES $<TARGET_FILE:driver> DESTINATION ${CMAKE_INSTALL_BINDIR}
          RENAME simulated_driver.dll)
else()
  set(_client_dir ${CMAKE_INSTALL_LIBDIR}/aethercl)
  file(RELATIVE_PATH _to_libdir /${_client_dir} /${CMAKE_INSTALL_LIBDIR})
  string(REGEX REPLACE "/$" "" _to_libdir "${_to_libdir}")
  foreach(_name IN LISTS AETHERCL_CLIENT_NAMES)
    install(CODE "
      set(_dir \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${_client_dir}\")
      file(MAKE_DIRECTORY \"\${_dir}\")
      file(CREATE_LINK \"${_to_libdir}/libaethercl.so.${PROJECT_VERSION_MAJOR}\"
           \"\${_dir}/${_name}\" SYMBOLIC)
      message(STATUS \"Installing: \${_dir}/${_name} -> ${_to_libdir}/libaethercl.so.${PROJECT_VERSION_MAJOR}\")
      list(APPEND CMAKE_INSTALL_MANIFEST_FILES \"\${_dir}/${_name}\")")
  endforeach()
  install(FILES ${AETHERCL_MANIFEST} DESTINATION ${_client_dir})
endif()

# CMake package: find_package(AetherCL CONFIG) -> AetherCL::aethercl.
install(EXPORT AetherCLTargets NAMESPACE AetherCL:: DESTINATION ${AETHERCL_CMAKE_DIR}
        COMPONENT Development)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/AetherCLConfig.cmake.in
  ${PROJECT_BINARY_DIR}/package/AetherCLConfig.cmake
  INSTALL_DESTINATION ${AETHERCL_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR AETHERCL_MANIFEST_DIR)
# Symbols are only ever added (each ABI version is a new node), so any 0.x/1.x of the same major
# serves a program built against an older one.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/package/AetherCLConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/package/AetherCLConfig.cmake
              ${PROJECT_BINARY_DIR}/package/AetherCLConfigVersion.cmake
        DESTINATION ${AETHERCL_CMAKE_DIR} COMPONENT Development)

# pkg-config: prefix computed from the .pc file's own folder, so the tree can be moved.
set(_pc_dir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH AETHERCL_PC_TO_PREFIX /${_pc_dir} /)
string(REGEX REPLACE "/$" "" AETHERCL_PC_TO_PREFIX "${AETHERCL_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/aethercl.pc.in ${PROJECT_BINARY_DIR}/package/aethercl.pc
               @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/package/aethercl.pc DESTINATION ${_pc_dir}
        COMPONENT Development)
