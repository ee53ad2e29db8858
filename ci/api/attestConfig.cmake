# find_package(attest CONFIG): the imported target attest::attest (lib/libattest.a, include/, and
# bin/attest, the kernel host that serves plugins, named to the code through ATTEST_INSTALLED_EXECUTABLE).
include(CMakeFindDependencyMacro)
find_dependency(fmt)
find_dependency(rapidcheck)
find_dependency(OpenSSL)
find_dependency(Threads)
find_library(ATTEST_MPFR_LIBRARY mpfr REQUIRED)
find_library(ATTEST_GMP_LIBRARY gmp REQUIRED)
find_library(ATTEST_OPENBLAS_LIBRARY openblas REQUIRED)
get_filename_component(_attest_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET attest::attest)
  add_library(attest::attest STATIC IMPORTED)
  set_target_properties(attest::attest PROPERTIES
    IMPORTED_LOCATION "${_attest_prefix}/lib/libattest.a"
    INTERFACE_INCLUDE_DIRECTORIES "${_attest_prefix}/include"
    INTERFACE_COMPILE_FEATURES cxx_std_20
    INTERFACE_COMPILE_DEFINITIONS "ATTEST_INSTALLED_EXECUTABLE=\"${_attest_prefix}/bin/attest\""
    INTERFACE_LINK_LIBRARIES "fmt::fmt;rapidcheck;OpenSSL::Crypto;${ATTEST_MPFR_LIBRARY};${ATTEST_GMP_LIBRARY};${ATTEST_OPENBLAS_LIBRARY};${CMAKE_DL_LIBS};Threads::Threads")
endif()
set(ATTEST_EXECUTABLE "${_attest_prefix}/bin/attest")
