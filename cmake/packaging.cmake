# Debian packages (make deb): CPack's DEB generator over the install rules.
#   libdlock<major>  the shared library (soname libdlock.so.<major>)
#   libdlock-dev     headers, static library, libdlock.so link, dlock.pc,
#                    the CMake package; depends on libdlock<major> = version
#   dlock            the dlock command (linked statically against libdlock)
#                    and its man page
#   python3-dlock    the Python binding (DLOCK_INSTALL_PYTHON): pure Python,
#                    architecture all, loads libdlock<major> through ctypes
# Run-time dependencies (libhiredis, libuv1, libssl) come from
# dpkg-shlibdeps, so they name the versions this machine builds against.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME dlock)
set(CPACK_PACKAGE_VENDOR "dlock")
set(CPACK_PACKAGE_CONTACT "dlock maintainers <dlock@localhost>")
# Each package's first description line is its own summary (set below).
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_DIRECTORY "${CMAKE_BINARY_DIR}/packages")
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL lib dev cli)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Names the library package after its soname, as Debian's policy asks.
set(_dlock_libpkg "libdlock${PROJECT_VERSION_MAJOR}")
set(CPACK_DEBIAN_LIB_PACKAGE_NAME "${_dlock_libpkg}")
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIB_DESCRIPTION
    "Redisson-compatible distributed locks for C (shared library)\n\
dlock brings Redisson's distributed locks and synchronizers (reentrant lock,\n\
fair lock, read-write lock, semaphores, count-down latch, multi-lock, RedLock)\n\
to C programs, on Redis, sharing locks with Java services that use Redisson.")
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libdlock-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# The headers need no other header; the static library needs the -dev
# packages of its dependencies to link.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "${_dlock_libpkg} (= ${PROJECT_VERSION}), libhiredis-dev, libuv1-dev, libssl-dev")
set(CPACK_DEBIAN_DEV_DESCRIPTION
    "Redisson-compatible distributed locks for C (development files)\n\
Headers (dlock.hpp for C++ too), static library, pkg-config file (dlock.pc) and CMake package\n\
(find_package(dlock), targets dlock::dlock and dlock::dlock_static).")
set(CPACK_DEBIAN_CLI_PACKAGE_NAME dlock)
set(CPACK_DEBIAN_CLI_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_CLI_DESCRIPTION
    "run a command under a Redisson-compatible distributed lock in Redis\n\
What flock(1) is for one machine, dlock is for many: it runs a command while\n\
holding a Redisson-compatible lock in Redis, and inspects locks, semaphores\n\
and latches.")
if(DLOCK_INSTALL_PYTHON)
  list(APPEND CPACK_COMPONENTS_ALL python)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-dlock)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_ARCHITECTURE all)
  # ctypes finds libdlock.so.<major> through the dynamic loader: this
  # version's calls, or a later minor's.
  set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "${_dlock_libpkg} (>= ${PROJECT_VERSION}), python3 (>= 3.8)")
  set(CPACK_DEBIAN_PYTHON_DESCRIPTION
      "Redisson-compatible distributed locks for Python (dlock)\n\
The dlock package: Redisson's reentrant, fair, fenced and read-write locks,\n\
semaphores, expirable permits, count-down latches, multi-locks, RedLock and\n\
leader election on Redis, for threads and asyncio, through libdlock.")
endif()
include(CPack)
