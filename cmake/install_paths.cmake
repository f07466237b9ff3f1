# cmake/install_paths.cmake: run by `cmake --install` (cmake/install.cmake)
# before the files are copied. Writes into ZTIER_GEN_DIR the files that name
# absolute install paths, from CMAKE_INSTALL_PREFIX as it is at install time:
#   ztier.service  dist/ztier.service with @ZTIER_BINDIR@ and
#                  @ZTIER_SYSCONFDIR@ replaced
#   ztier.pc       cmake/ztier.pc.in
# The ZTIER_INSTALL_*DIR variables are GNUInstallDirs' (relative or absolute).

# The absolute form of the GNUInstallDirs folder `dir`, into `out`.
function(ztier_absolute out dir)
  if(IS_ABSOLUTE "${dir}")
    set(${out} "${dir}" PARENT_SCOPE)
  else()
    set(${out} "${CMAKE_INSTALL_PREFIX}/${dir}" PARENT_SCOPE)
  endif()
endfunction()

ztier_absolute(ZTIER_BINDIR "${ZTIER_INSTALL_BINDIR}")
ztier_absolute(ZTIER_SYSCONFDIR "${ZTIER_INSTALL_SYSCONFDIR}")
ztier_absolute(ZTIER_LIBDIR "${ZTIER_INSTALL_LIBDIR}")
ztier_absolute(ZTIER_INCLUDEDIR "${ZTIER_INSTALL_INCLUDEDIR}")
set(ZTIER_PREFIX "${CMAKE_INSTALL_PREFIX}")

configure_file("${ZTIER_SOURCE_DIR}/dist/ztier.service"
               "${ZTIER_GEN_DIR}/ztier.service" @ONLY)
configure_file("${ZTIER_SOURCE_DIR}/cmake/ztier.pc.in"
               "${ZTIER_GEN_DIR}/ztier.pc" @ONLY)
