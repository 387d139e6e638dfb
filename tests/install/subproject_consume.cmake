# Script for the subproject_consume test (cmake -P): configure the project in
# subproject/ with no build type, build its two programs (and so attnkern
# from SOURCE_DIR), run them.
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGV}\n${out}\n${err}")
  endif()
endfunction()

file(REMOVE_RECURSE ${CONSUMER_BUILD})
run(${CMAKE_COMMAND} -S ${CONSUMER_SRC} -B ${CONSUMER_BUILD} -DATTNKERN_SOURCE_DIR=${SOURCE_DIR}
    -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
run(${CMAKE_COMMAND} --build ${CONSUMER_BUILD} --parallel 2
    --target subproject_shared subproject_static)
run(${CONSUMER_BUILD}/subproject_shared)
run(${CONSUMER_BUILD}/subproject_static)
message(STATUS "attnkern built and consumed as a FetchContent subproject")
