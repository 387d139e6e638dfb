# Script for the static_symbols test (cmake -P): every global symbol that
# libattnkern.a defines must be the C API (ak_*), live in the library's own C++
# namespace `attnkern`, or be an instantiation of the standard library's
# templates that every C++ object carries. A static library cannot hide its
# internals from the program that links it, so a short or common namespace
# (it was `ak` before) can silently collide with the user's own code: two
# inline functions of the same mangled name and the linker keeps one.
execute_process(COMMAND ${NM} --defined-only -g ${LIB} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm failed on ${LIB}")
endif()
string(REGEX MATCHALL "[^\n]+" lines "${out}")
set(own 0)
foreach(line IN LISTS lines)
  # Skip the archive's member headers ("name.o:") and keep the symbol name.
  if(NOT line MATCHES "^[0-9a-fA-F]* *[A-Za-z] ")
    continue()
  endif()
  string(REGEX REPLACE "^.* " "" sym "${line}")
  # An exception table's reference to a type: judge the type's name.
  string(REGEX REPLACE "^DW\\.ref\\." "" sym "${sym}")
  if(sym MATCHES "^ak_" OR sym MATCHES "^_ZN(K)?8attnkern" OR sym MATCHES "^_ZZN(K)?8attnkern")
    math(EXPR own "${own} + 1")
  elseif(sym MATCHES "^_ZN(K)?St" OR sym MATCHES "^_ZSt" OR sym MATCHES "^_ZN(K)?9__gnu_cxx"
         OR sym MATCHES "^_ZN(K)?5xsimd"
         OR sym MATCHES "^_ZT[VISH]N?(K)?St" OR sym STREQUAL "__gxx_personality_v0"
         OR sym STREQUAL "__clang_call_terminate"
         OR sym STREQUAL ".gomp_critical_user_.reduction.var")
    # Template instantiations of the standard library and of xsimd (weak; an
    # unoptimized or sanitizer build leaves some of xsimd's out of line, each
    # named for its instruction set) and compiler helpers (the same in every
    # object that has them; the last is Clang's lock for OpenMP reductions).
  else()
    message(FATAL_ERROR "global symbol outside ak_* and namespace attnkern: ${sym}")
  endif()
endforeach()
if(own LESS 18)
  message(FATAL_ERROR "only ${own} ak_* / attnkern:: symbols found: is ${LIB} the static library?")
endif()
message(STATUS "${own} global symbols, all ak_* or attnkern::")
