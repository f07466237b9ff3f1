# cmake/install.cmake: the rules of `make install` (`cmake --install BUILD`),
# under GNUInstallDirs, relative to the prefix given at install time
# (`cmake --install BUILD --prefix PREFIX`, DESTDIR in the environment):
#
#   bin/ztier                              the tool
#   ${ZTIER_SYSTEMD_UNITDIR}/ztier.service the unit, @ZTIER_BINDIR@ and
#                                          @ZTIER_SYSCONFDIR@ made absolute
#   etc/ztier/ztier.conf.example           dist/ztier.conf (a user's
#                                          etc/ztier/ztier.conf is untouched)
#   include/ztier/*.h                      the public headers (each engine
#                                          layer's src/LAYER/include/ztier/)
#   lib/libztier.a                         the engine (ztier_core), no nbd/ctl
#   lib/pkgconfig/ztier.pc                 pkg-config (static: --static)
#   lib/cmake/ztier/                       find_package(ztier): ztier::ztier
#   share/man/man8/ztier.8, man5/ztier.conf.5
#   share/doc/ztier/                       README.md, ztier.conf.example
#
# Files that hold absolute paths (the unit, ztier.pc) are written at install
# time (cmake/install_paths.cmake), so a --prefix given then is the one they
# name. With a relative CMAKE_INSTALL_SYSCONFDIR (the default, "etc") the
# configuration lives under the prefix; packagers for /usr pass
# -DCMAKE_INSTALL_SYSCONFDIR=/etc, and the unit follows.
# testing/install/install_test.sh checks all of this.
include(CMakePackageConfigHelpers)

set(ZTIER_PACKAGE_VERSION 0.1.0)
set(ZTIER_SYSTEMD_UNITDIR "lib/systemd/system" CACHE STRING
    "Where the systemd unit goes (relative: under the install prefix)")
set(ZTIER_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/ztier")
set(_gen "${PROJECT_BINARY_DIR}/install-gen")

install(TARGETS ztier RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

install(TARGETS ztier_core EXPORT ztierTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
# Each engine layer's installed API, src/LAYER/include/ztier/, into one
# include/ztier/.
foreach(layer IN LISTS ZTIER_ENGINE_LAYERS)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/src/${layer}/include/ztier
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
          FILES_MATCHING PATTERN "*.h")
endforeach()
install(EXPORT ztierTargets NAMESPACE ztier:: DESTINATION ${ZTIER_CMAKEDIR})
# liburing is a dependency only of a build with ZTIER_URING.
if(ZTIER_URING)
  set(ZTIER_URING_DEP "URING:liburing")
  set(_ztier_pc_uring "liburing ")
else()
  set(ZTIER_URING_DEP "")
  set(_ztier_pc_uring "")
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ztierConfig.cmake.in
  ${_gen}/ztierConfig.cmake INSTALL_DESTINATION ${ZTIER_CMAKEDIR})
write_basic_package_version_file(${_gen}/ztierConfigVersion.cmake
  VERSION ${ZTIER_PACKAGE_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${_gen}/ztierConfig.cmake ${_gen}/ztierConfigVersion.cmake
        DESTINATION ${ZTIER_CMAKEDIR})

# The unit and ztier.pc, from the install-time prefix (runs before the
# install(FILES) below, which copy what it wrote).
install(CODE "
  set(ZTIER_SOURCE_DIR \"${PROJECT_SOURCE_DIR}\")
  set(ZTIER_GEN_DIR \"${_gen}\")
  set(ZTIER_VERSION \"${ZTIER_PACKAGE_VERSION}\")
  set(ZTIER_PC_URING \"${_ztier_pc_uring}\")
  set(ZTIER_INSTALL_BINDIR \"${CMAKE_INSTALL_BINDIR}\")
  set(ZTIER_INSTALL_SYSCONFDIR \"${CMAKE_INSTALL_SYSCONFDIR}\")
  set(ZTIER_INSTALL_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
  set(ZTIER_INSTALL_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
  include(\"${PROJECT_SOURCE_DIR}/cmake/install_paths.cmake\")
")
install(FILES ${_gen}/ztier.service DESTINATION ${ZTIER_SYSTEMD_UNITDIR})
install(FILES ${_gen}/ztier.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(FILES ${PROJECT_SOURCE_DIR}/dist/ztier.conf
        DESTINATION ${CMAKE_INSTALL_SYSCONFDIR}/ztier
        RENAME ztier.conf.example)
install(FILES ${PROJECT_SOURCE_DIR}/dist/ztier.conf
        DESTINATION ${CMAKE_INSTALL_DOCDIR}
        RENAME ztier.conf.example)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES ${PROJECT_SOURCE_DIR}/docs/man/ztier.8
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)
install(FILES ${PROJECT_SOURCE_DIR}/docs/man/ztier.conf.5
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man5)
