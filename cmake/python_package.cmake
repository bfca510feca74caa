# The Python package's native part, component "python" (left out of a plain cmake --install):
# aethercl/<library> (one real file under its SONAME; wheels hold no links), aethercl/driver.abi
# and aethercl/_version.py. `pip install .` (scikit-build-core, pyproject.toml) installs exactly
# this component into the wheel next to the package's Python files.
set(AETHERCL_PYTHON_PACKAGE_DIR aethercl CACHE STRING
    "Folder of the Python package, relative to the install prefix (the wheel's root for pip)")
if(WIN32)
  set(_python_library_name driver.dll)
else()
  set(_python_library_name libaethercl.so.${PROJECT_VERSION_MAJOR})
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/_version.py.in ${PROJECT_BINARY_DIR}/python/_version.py
               @ONLY)
install(FILES $<TARGET_FILE:driver> DESTINATION ${AETHERCL_PYTHON_PACKAGE_DIR}
        RENAME ${_python_library_name} COMPONENT python EXCLUDE_FROM_ALL
        PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ
                    WORLD_EXECUTE)
install(FILES ${AETHERCL_MANIFEST} ${PROJECT_BINARY_DIR}/python/_version.py
        DESTINATION ${AETHERCL_PYTHON_PACKAGE_DIR} COMPONENT python EXCLUDE_FROM_ALL)
