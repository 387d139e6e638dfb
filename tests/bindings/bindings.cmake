# The language bindings tested as a user installs them, each by running its
# sh block of the README's "Bindings" section (run_readme_bindings.py):
#
#   bindings_install  cmake --install of this build into a prefix under the
#                     build directory (the fixture of the three below)
#   bindings_python   a venv, pip install ./capi/python, its tests
#   bindings_rust     cargo test --offline --locked in capi/rust, the library
#                     found through pkg-config
#   bindings_go       go test ./... in capi/go (#cgo pkg-config: attnkern)
#
# Included by capi/examples/CMakeLists.txt, which has found the Python
# (AK_BINDINGS_PYTHON) and set the layout probe's environment. A missing
# toolchain skips its test here, with a message, instead of failing.

set(AK_BINDINGS_DIR "${CMAKE_CURRENT_BINARY_DIR}/bindings")
set(AK_BINDINGS_RUN "${AK_BINDINGS_PYTHON}" "${PROJECT_SOURCE_DIR}/tests/bindings/run_readme_bindings.py"
    "${PROJECT_SOURCE_DIR}/README.md" "${PROJECT_SOURCE_DIR}" "${PROJECT_BINARY_DIR}"
    "${AK_BINDINGS_DIR}")

function(ak_bindings_test name block)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "TIMEOUT" "ENVIRONMENT")
  add_test(NAME ${name} COMMAND ${AK_BINDINGS_RUN} ${block}
           WORKING_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}")
  set_tests_properties(${name} PROPERTIES
    ENVIRONMENT "AK_LAYOUT_PROBE=$<TARGET_FILE:ak_abi_layout>;AK_BINDINGS_CMAKE=${CMAKE_COMMAND};PYTHONDONTWRITEBYTECODE=1;${arg_ENVIRONMENT}"
    TIMEOUT ${arg_TIMEOUT}
    LABELS "bindings")
  if(NOT block STREQUAL "install")
    set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED ak_bindings_prefix)
  endif()
endfunction()

# The install copies this build's library, header, CMake and pkg-config
# files; the tests that use them must see the library as built now.
ak_bindings_test(bindings_install install TIMEOUT 120)
set_tests_properties(bindings_install PROPERTIES FIXTURES_SETUP ak_bindings_prefix)

# A venv with pip in it (Debian: python3-venv), and setuptools and wheel to
# build with (pip builds without isolation: offline, nothing is downloaded).
execute_process(COMMAND "${AK_BINDINGS_PYTHON}" -c "import venv, ensurepip, setuptools, wheel"
                RESULT_VARIABLE _ak_venv_rc OUTPUT_QUIET ERROR_QUIET)
if(_ak_venv_rc EQUAL 0)
  ak_bindings_test(bindings_python python TIMEOUT 600
    ENVIRONMENT "AK_EXPECT_PACKAGE_UNDER=${AK_BINDINGS_DIR}/venv"
                "AK_EXPECT_LIBRARY_FROM=the system loader")
else()
  message(STATUS "attnkern bindings: ${AK_BINDINGS_PYTHON} lacks venv, ensurepip, setuptools or "
                 "wheel (Debian: python3-venv python3-setuptools python3-wheel): bindings_python "
                 "is not registered")
endif()

# The Rust and Go packages find the library through the pkg-config program.
find_program(AK_PKG_CONFIG pkg-config)
if(NOT AK_PKG_CONFIG)
  message(STATUS "attnkern bindings: pkg-config not found: bindings_rust and bindings_go "
                 "are not registered")
  return()
endif()

find_program(AK_CARGO cargo HINTS "$ENV{CARGO_HOME}/bin" "$ENV{HOME}/.cargo/bin")
if(AK_CARGO)
  message(STATUS "attnkern bindings: bindings_rust uses ${AK_CARGO}")
  # rustup's cargo proxy finds rustc itself; a plain cargo next to rustc needs
  # that directory on PATH.
  get_filename_component(_ak_cargo_dir "${AK_CARGO}" DIRECTORY)
  ak_bindings_test(bindings_rust rust TIMEOUT 900
    ENVIRONMENT "CARGO_TARGET_DIR=${CMAKE_CURRENT_BINARY_DIR}/rust-target"
                "CARGO_TERM_COLOR=never")
  ak_example_env_mod(bindings_rust PATH path_list_append "${_ak_cargo_dir}")
else()
  message(STATUS "attnkern bindings: cargo not found: bindings_rust is not registered")
endif()

find_program(AK_GO go)
if(AK_GO)
  message(STATUS "attnkern bindings: bindings_go uses ${AK_GO}")
  get_filename_component(_ak_go_dir "${AK_GO}" DIRECTORY)
  # Hermetic and offline: no module downloads, no toolchain switch, caches in
  # this build directory; the header and library come from pkg-config.
  ak_bindings_test(bindings_go go TIMEOUT 900
    ENVIRONMENT "CGO_ENABLED=1"
                "CC=${CMAKE_C_COMPILER}"
                "GOCACHE=${CMAKE_CURRENT_BINARY_DIR}/go-cache"
                "GOPATH=${CMAKE_CURRENT_BINARY_DIR}/gopath"
                "GOFLAGS=-mod=mod" "GOPROXY=off" "GOSUMDB=off" "GOTOOLCHAIN=local"
                "GOWORK=off" "GOENV=off" "GO111MODULE=on")
  ak_example_env_mod(bindings_go PATH path_list_prepend "${_ak_go_dir}")
else()
  message(STATUS "attnkern bindings: go not found: bindings_go is not registered")
endif()
