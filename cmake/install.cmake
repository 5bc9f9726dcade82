# Installation and packaging: `cmake --install build --prefix P` puts the library (with SONAME), the public
# headers, the `systolic` command, the docs, a CMake package (find_package(systolic 0.1), target
# systolic::systolic) and systolic.pc under P; `cpack` (scripts/package) makes Debian packages of it.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(SYSTOLIC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/systolic)
get_target_property(SYSTOLIC_LIBRARY_TYPE systolic TYPE)

# A program installed outside the system's library directories finds the library beside it ($ORIGIN); Debian
# packages (prefix /usr) carry no run path.
if(NOT CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set_target_properties(systolic_cli PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
endif()

install(TARGETS systolic EXPORT systolicTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
if(TARGET systolic_cuda_libraries)  # linked privately: a static library's users link it too
  install(TARGETS systolic_cuda_libraries EXPORT systolicTargets)
endif()
install(TARGETS systolic_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/systolic DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(FILES ${PROJECT_BINARY_DIR}/include/systolic/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/systolic
        COMPONENT dev)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR}
        COMPONENT cli)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT cli)

install(EXPORT systolicTargets NAMESPACE systolic:: DESTINATION ${SYSTOLIC_CMAKE_DIR} COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/systolicConfig.cmake.in
  ${PROJECT_BINARY_DIR}/systolicConfig.cmake INSTALL_DESTINATION ${SYSTOLIC_CMAKE_DIR})
# 0.x: a minor version may break the API, so 0.1 accepts 0.1.* only.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/systolicConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/systolicConfig.cmake ${PROJECT_BINARY_DIR}/systolicConfigVersion.cmake
        DESTINATION ${SYSTOLIC_CMAKE_DIR} COMPONENT dev)

# pkg-config: a static library lists what it links privately.
set(SYSTOLIC_PC_PRIVATE "")
if(SYSTOLIC_LIBRARY_TYPE STREQUAL "STATIC_LIBRARY")
  set(SYSTOLIC_PC_PRIVATE "Requires.private: hdf5 libcurl libarchive libcrypto zlib libjpeg\nLibs.private: -ldnnl -fopenmp -lpthread")
endif()
# Relocatable: the prefix is found from the .pc file's own place, so `cmake --install --prefix P` works anywhere.
file(RELATIVE_PATH SYSTOLIC_PC_TO_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" SYSTOLIC_PC_TO_PREFIX "${SYSTOLIC_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/systolic.pc.in ${PROJECT_BINARY_DIR}/systolic.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/systolic.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

# Debian packages (cpack -G DEB in the build folder; scripts/package): libsystolicX.Y (the shared library),
# libsystolic-dev (headers, CMake package, pkg-config) and systolic (the command and the docs). dpkg-shlibdeps
# computes the runtime Depends.
# Each package carries the license as Debian's /usr/share/doc/PACKAGE/copyright.
foreach(pair "runtime;libsystolic${SYSTOLIC_SOVERSION}" "dev;libsystolic-dev" "cli;systolic")
  list(GET pair 0 component)
  list(GET pair 1 package)
  install(FILES ${PROJECT_SOURCE_DIR}/cmake/copyright DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${package}
          COMPONENT ${component})
endforeach()

set(CPACK_PACKAGE_NAME systolic)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_VENDOR "systolic developers")
set(CPACK_PACKAGE_CONTACT "systolic developers <systolic@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Keras-style neural networks in C++: train on CPUs and GPUs, read and write Keras files")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev cli)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The command links libsystolic from the other package: dpkg-shlibdeps finds it in the build folder (the
# dependency on it is stated below).
# A CUDA build links NVIDIA's libraries, which no Debian package provides: dpkg-shlibdeps finds them where the
# toolkit is and names no package for them (the CUDA toolkit and cuDNN must be installed from NVIDIA).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR})
if(SYSTOLIC_HAS_CUDA)
  foreach(library ${CUDNN_LIBRARY} ${CUBLASLT_LIBRARY} ${CUBLAS_LIBRARY} ${NCCL_LIBRARY})
    get_filename_component(dir "${library}" DIRECTORY)
    list(APPEND CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS "${dir}")
  endforeach()
  list(APPEND CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS "${CUDAToolkit_LIBRARY_DIR}")
  list(REMOVE_DUPLICATES CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS)
endif()
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libsystolic${SYSTOLIC_SOVERSION})
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libsystolic-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "libsystolic${SYSTOLIC_SOVERSION} (= ${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE}), libfmt-dev, nlohmann-json3-dev")
set(CPACK_DEBIAN_CLI_PACKAGE_NAME systolic)
set(CPACK_DEBIAN_CLI_PACKAGE_DEPENDS "libsystolic${SYSTOLIC_SOVERSION} (= ${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE})")
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION "systolic's shared library")
set(CPACK_COMPONENT_DEV_DESCRIPTION "systolic's headers, CMake package and pkg-config file")
set(CPACK_COMPONENT_CLI_DESCRIPTION "the systolic command: train, evaluate and predict with Keras models")
include(CPack)
