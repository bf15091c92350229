# `cmake --install build --prefix P`: the public headers, the static libraries of every layer,
# rocedp.pc (pkg-config) and a CMake package (find_package(rocedp) -> rocedp::rocedp).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ROCEDP_LIBRARIES rocedp_control rocedp_dataplane rocedp_pmd rocedp_rc rocedp_wire rocedp_config)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/rocedp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp")
install(TARGETS rocedp rocedp_headers ${ROCEDP_LIBRARIES} EXPORT rocedpTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT rocedpTargets NAMESPACE rocedp:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rocedp)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/rocedpConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/rocedpConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rocedp)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/rocedpConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/rocedpConfig.cmake ${CMAKE_BINARY_DIR}/rocedpConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rocedp)

# pkg-config: the libraries are static, so what they need goes into the .private fields
# (`pkg-config --static --libs rocedp`). DPDK's own libdpdk.pc lists static DPDK archives under
# --static, so its shared link line goes into Libs.private as configured here instead; libpcap
# is named there too (its .pc asks --static for libsystemd/dbus, which Debian ships without
# their static-link symlinks).
list(JOIN DPDK_LDFLAGS " " ROCEDP_PC_DPDK_LIBS)
set(ROCEDP_PC_LIBS "")
foreach(lib ${ROCEDP_LIBRARIES})
  string(REPLACE "rocedp_" "-lrocedp_" flag ${lib})
  string(APPEND ROCEDP_PC_LIBS " ${flag}")
endforeach()
configure_file(${CMAKE_SOURCE_DIR}/cmake/rocedp.pc.in ${CMAKE_BINARY_DIR}/rocedp.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/rocedp.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
