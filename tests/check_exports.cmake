# Script for the exported_symbols and static_symbols tests (cmake -P).
#
# Default: the shared library must export the C API (ak_*) and nothing else.
#
# STATIC=ON: every global symbol that libattnkern.a defines must be the C API,
# live in the library's own C++ namespace `attnkern`, or be an instantiation
# of the standard library's or xsimd's templates or a compiler helper. A
# static library cannot hide its internals from the program that links it,
# so a short or common namespace (it was `ak` before) can silently collide
# with the user's own code: two inline functions of the same mangled name
# and the linker keeps one.
if(STATIC)
  set(nm_args --defined-only -g)
else()
  set(nm_args -D --defined-only)
endif()
execute_process(COMMAND ${NM} ${nm_args} ${LIB} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm failed on ${LIB}")
endif()
string(REGEX MATCHALL "[^\n]+" lines "${out}")
set(count 0)
foreach(line IN LISTS lines)
  # Skip an archive's member headers ("name.o:") and keep the symbol name.
  if(NOT line MATCHES "^[0-9a-fA-F]* *[A-Za-z] ")
    continue()
  endif()
  string(REGEX REPLACE "^.* " "" sym "${line}")
  # An exception table's reference to a type: judge the type's name.
  string(REGEX REPLACE "^DW\\.ref\\." "" sym "${sym}")
  # (_ZZ...: an entity local to a function of namespace attnkern, _ZZZ... one
  # local to a local lambda, as unoptimized builds leave out of line.)
  if(sym MATCHES "^ak_" OR (STATIC AND sym MATCHES "^_Z(Z)*N(K)?8attnkern"))
    math(EXPR count "${count} + 1")
  elseif(STATIC AND (sym MATCHES "^_ZN(K)?St" OR sym MATCHES "^_ZSt"
                     OR sym MATCHES "^_ZN(K)?9__gnu_cxx" OR sym MATCHES "^_ZN(K)?5xsimd"
                     OR sym MATCHES "^_ZT[VISH]N?(K)?St" OR sym STREQUAL "__gxx_personality_v0"
                     OR sym STREQUAL "__clang_call_terminate"
                     OR sym STREQUAL ".gomp_critical_user_.reduction.var"))
    # Template instantiations of the standard library and of xsimd (weak; an
    # unoptimized or sanitizer build leaves some of xsimd's out of line, each
    # named for its instruction set) and compiler helpers (the same in every
    # object that has them; the last is Clang's lock for OpenMP reductions).
  elseif(STATIC)
    message(FATAL_ERROR "global symbol outside ak_* and namespace attnkern: ${sym}")
  else()
    message(FATAL_ERROR "exported symbol outside the C API: ${sym}")
  endif()
endforeach()
if(count LESS 18)
  message(FATAL_ERROR "only ${count} ak_* (or attnkern::) symbols in ${LIB}")
endif()
if(STATIC)
  message(STATUS "${count} global symbols of our own, all ak_* or attnkern::")
else()
  message(STATUS "${count} symbols exported, all ak_*")
endif()
