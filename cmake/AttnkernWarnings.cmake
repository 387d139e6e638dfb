# Warnings on for everything the project compiles (AK_WERROR makes them fatal).
function(ak_enable_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic
    $<$<BOOL:${AK_WERROR}>:-Werror>)
endfunction()
