# Script for the subproject_consume test (cmake -P): configure the project in
# subproject/ with no build type, build its two programs (and so attnkern
# from SOURCE_DIR, with the instruction sets ISAS besides scalar), run them.
include(${CMAKE_CURRENT_LIST_DIR}/run_or_fail.cmake)

file(REMOVE_RECURSE ${CONSUMER_BUILD})
run(${CMAKE_COMMAND} -S ${CONSUMER_SRC} -B ${CONSUMER_BUILD} -DATTNKERN_SOURCE_DIR=${SOURCE_DIR}
    "-DAK_ISAS=${ISAS}"
    -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
run(${CMAKE_COMMAND} --build ${CONSUMER_BUILD} --parallel 2
    --target subproject_shared subproject_static)
run(${CONSUMER_BUILD}/subproject_shared)
run(${CONSUMER_BUILD}/subproject_static)
message(STATUS "attnkern built and consumed as a FetchContent subproject")
