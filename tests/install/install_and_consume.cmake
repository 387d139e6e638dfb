# Script for the install_and_consume test (cmake -P). The consumers use the
# compilers the library was built with: libattnkern.a needs the OpenMP
# runtime of its own compiler (GCC's libgomp, Clang's libomp), which a
# consumer's -fopenmp links only when the two agree.
include(${CMAKE_CURRENT_LIST_DIR}/run_or_fail.cmake)

file(REMOVE_RECURSE ${PREFIX} ${CONSUMER_BUILD} ${CONSUMER_BUILD}-c)
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX})
foreach(f include/attnkern.h lib/libattnkern.so lib/libattnkern.a
          lib/cmake/attnkern/attnkernConfig.cmake lib/pkgconfig/attnkern.pc)
  if(NOT EXISTS ${PREFIX}/${f})
    message(FATAL_ERROR "install is missing ${f}")
  endif()
endforeach()
run(${CMAKE_COMMAND} -S ${CONSUMER_SRC} -B ${CONSUMER_BUILD} -DCMAKE_PREFIX_PATH=${PREFIX}
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
run(${CMAKE_COMMAND} --build ${CONSUMER_BUILD})
run(${CONSUMER_BUILD}/consumer_shared)
run(${CONSUMER_BUILD}/consumer_static)
if(CMAKE_HOST_SYSTEM_NAME STREQUAL "Linux")
  run(${CONSUMER_BUILD}/consumer_plugin_host)
  # The plugin exports its own function and none of the embedded ak_*.
  find_program(NM nm REQUIRED)
  execute_process(COMMAND ${NM} -D --defined-only ${CONSUMER_BUILD}/libconsumer_plugin.so
                  OUTPUT_VARIABLE plugin_syms RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT plugin_syms MATCHES "plugin_softmax_ok")
    message(FATAL_ERROR "nm found no plugin_softmax_ok in the plugin:\n${plugin_syms}")
  endif()
  if(plugin_syms MATCHES " ak_")
    message(FATAL_ERROR "the plugin re-exports attnkern's symbols:\n${plugin_syms}")
  endif()
endif()
# A project in C alone (find_package must not need C++ there).
run(${CMAKE_COMMAND} -S ${CONSUMER_SRC}/../consumer_c -B ${CONSUMER_BUILD}-c
    -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=${C_COMPILER})
run(${CMAKE_COMMAND} --build ${CONSUMER_BUILD}-c)
run(${CONSUMER_BUILD}-c/consumer_c_shared)
run(${CONSUMER_BUILD}-c/consumer_c_static)
# pkg-config, as a Makefile-based C project would use it.
find_program(PKG_CONFIG pkg-config REQUIRED)
set(ENV{PKG_CONFIG_PATH} ${PREFIX}/lib/pkgconfig)
execute_process(COMMAND ${PKG_CONFIG} --cflags --libs attnkern OUTPUT_VARIABLE flags
                RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config does not know attnkern")
endif()
separate_arguments(flags UNIX_COMMAND "${flags}")
run(${C_COMPILER} -std=c99 ${CONSUMER_SRC}/consumer.c ${flags} -Wl,-rpath,${PREFIX}/lib
    -lm -o ${CONSUMER_BUILD}/consumer_pkgconfig)
run(${CONSUMER_BUILD}/consumer_pkgconfig)
message(STATUS "installed package consumed through find_package and pkg-config")
