# run(<command> [args...]): runs a command from a cmake -P script and stops
# the script, with the command's output, when it fails. Shared by the
# install_and_consume and subproject_consume scripts.
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGV}\n${out}\n${err}")
  endif()
endfunction()
