# Script for the install_and_consume test (cmake -P). The consumers use the
# compilers the library was built with and, where the test passes them
# (OTHER_C_COMPILER, OTHER_CXX_COMPILER), those of the other family too: a
# Clang-built libattnkern.a calls libomp (__kmpc_*), which a GCC consumer's
# -fopenmp does not bring, so its package files name the runtime themselves.
include(${CMAKE_CURRENT_LIST_DIR}/run_or_fail.cmake)

file(REMOVE_RECURSE ${PREFIX})
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX})
foreach(f include/attnkern.h lib/libattnkern.so lib/libattnkern.a
          lib/cmake/attnkern/attnkernConfig.cmake lib/pkgconfig/attnkern.pc
          lib/pkgconfig/attnkern-static.pc)
  if(NOT EXISTS ${PREFIX}/${f})
    message(FATAL_ERROR "install is missing ${f}")
  endif()
endforeach()
# pkg-config, as a Makefile-based C project would use it: the shared library,
# and the static one with --static (its Libs.private: the OpenMP runtime) or
# through the attnkern-static module.
find_program(PKG_CONFIG pkg-config REQUIRED)
set(ENV{PKG_CONFIG_PATH} ${PREFIX}/lib/pkgconfig)
function(pkg_config_flags out module)
  execute_process(COMMAND ${PKG_CONFIG} ${ARGN} ${module} OUTPUT_VARIABLE flags
                  RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pkg-config does not know ${module}")
  endif()
  separate_arguments(flags UNIX_COMMAND "${flags}")
  set(${out} "${flags}" PARENT_SCOPE)
endfunction()
pkg_config_flags(shared_flags attnkern --cflags --libs)
pkg_config_flags(static_flags attnkern --static --cflags --libs)
# -lattnkern would pick the .so next to the .a: name the archive itself.
list(TRANSFORM static_flags REPLACE "^-lattnkern$" "${PREFIX}/lib/libattnkern.a")
# attnkern-static.pc does that itself.
pkg_config_flags(archive_flags attnkern-static --cflags --libs)
if(NOT archive_flags MATCHES "/libattnkern\\.a")
  message(FATAL_ERROR "pkg-config's attnkern-static does not name libattnkern.a: ${archive_flags}")
endif()

# consume(<tag> <C compiler> <C++ compiler>): every consumer built and run.
function(consume tag cc cxx)
  set(build ${CONSUMER_BUILD}${tag})
  file(REMOVE_RECURSE ${build} ${build}-c)
  run(${CMAKE_COMMAND} -S ${CONSUMER_SRC} -B ${build} -DCMAKE_PREFIX_PATH=${PREFIX}
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=${cc} -DCMAKE_CXX_COMPILER=${cxx})
  run(${CMAKE_COMMAND} --build ${build})
  run(${build}/consumer_shared)
  run(${build}/consumer_static)
  if(CMAKE_HOST_SYSTEM_NAME STREQUAL "Linux")
    run(${build}/consumer_loader ${PREFIX}/lib)
    run(${build}/consumer_plugin_host)
    # The plugin exports its own function and none of the embedded ak_*.
    find_program(NM nm REQUIRED)
    execute_process(COMMAND ${NM} -D --defined-only ${build}/libconsumer_plugin.so
                    OUTPUT_VARIABLE plugin_syms RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0 OR NOT plugin_syms MATCHES "plugin_softmax_ok")
      message(FATAL_ERROR "nm found no plugin_softmax_ok in the plugin:\n${plugin_syms}")
    endif()
    if(plugin_syms MATCHES " ak_")
      message(FATAL_ERROR "the plugin re-exports attnkern's symbols:\n${plugin_syms}")
    endif()
  endif()
  # A project in C alone (find_package must not need C++ there).
  run(${CMAKE_COMMAND} -S ${CONSUMER_SRC}/../consumer_c -B ${build}-c
      -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=${cc})
  run(${CMAKE_COMMAND} --build ${build}-c)
  run(${build}-c/consumer_c_shared)
  run(${build}-c/consumer_c_static)
  run(${cc} -std=c99 ${CONSUMER_SRC}/consumer.c ${shared_flags} -Wl,-rpath,${PREFIX}/lib -lm
      -o ${build}/consumer_pkgconfig)
  run(${build}/consumer_pkgconfig)
  # The two static links have no rpath: had they taken the .so, they
  # could not start.
  run(${cc} -std=c99 ${CONSUMER_SRC}/consumer.c ${static_flags} -lm
      -o ${build}/consumer_pkgconfig_static)
  run(${build}/consumer_pkgconfig_static)
  run(${cc} -std=c99 ${CONSUMER_SRC}/consumer.c ${archive_flags} -lm
      -o ${build}/consumer_pkgconfig_archive)
  run(${build}/consumer_pkgconfig_archive)
endfunction()

consume("" ${C_COMPILER} ${CXX_COMPILER})
if(OTHER_C_COMPILER AND OTHER_CXX_COMPILER)
  consume(-other ${OTHER_C_COMPILER} ${OTHER_CXX_COMPILER})
  message(STATUS "consumed by ${OTHER_C_COMPILER} / ${OTHER_CXX_COMPILER} as well")
endif()
message(STATUS "installed package consumed through find_package and pkg-config")
