# `cmake --install` installs the C++ client library, its public headers
# (include/harnessd: client, protocol, rpc and what they include) and a
# CMake package, so another project can
#   find_package(harnessd CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE harnessd::client)
# It also installs the harnessd and harness executables.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set_target_properties(harnessd_client PROPERTIES EXPORT_NAME client)
set_target_properties(harnessd_wire PROPERTIES EXPORT_NAME wire)
set_target_properties(harnessd_boost PROPERTIES EXPORT_NAME boost_impl)
set_target_properties(harnessd_options PROPERTIES EXPORT_NAME options)

install(TARGETS harnessd_client harnessd_wire harnessd_boost harnessd_options
  EXPORT harnessdTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/harnessd DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS harnessd harness RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

set(HARNESSD_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/harnessd)
install(EXPORT harnessdTargets NAMESPACE harnessd:: DESTINATION ${HARNESSD_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/harnessdConfig.cmake.in
  ${PROJECT_BINARY_DIR}/harnessdConfig.cmake INSTALL_DESTINATION ${HARNESSD_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/harnessdConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/harnessdConfig.cmake ${PROJECT_BINARY_DIR}/harnessdConfigVersion.cmake
  DESTINATION ${HARNESSD_CMAKE_DIR})
