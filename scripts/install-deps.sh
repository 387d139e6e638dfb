#!/usr/bin/env bash
# Installs the Debian 12 packages attnkern needs that are not there yet.
#   install-deps.sh          build + tests (+ the other-language consumers; python3-onnx
#                            for the test of bench/ort_peer.py on its stand-in;
#                            python3-matplotlib for the walkthrough's heat map;
#                            python3-venv, -pip, -setuptools, -wheel to pip-install
#                            capi/python into a venv offline)
#   install-deps.sh --bench  also the benchmark peers (Google Benchmark, OpenBLAS, oneDNN) and
#                            gnuplot-nox (bench/chart.py draws the SGEMM chart with it)
#   install-deps.sh --clang  also Clang and its OpenMP runtime (scripts/test.sh --clang)
#   install-deps.sh --sanitize  also Clang's sanitizer runtimes (scripts/test.sh --sanitize, CI)
#   install-deps.sh --tsan   the same for ThreadSanitizer (scripts/test.sh --tsan, CI); libomp-dev
#                            brings libarcher.so, the OpenMP tool the TSan run loads
#   install-deps.sh --fuzz   also Clang's sanitizer and libFuzzer runtimes (scripts/fuzz.sh)
#   install-deps.sh --aarch64  also the AArch64 cross compiler and qemu-user
#                            (scripts/cross-aarch64.sh, CI); googletest: the sources
set -euo pipefail

want=(cmake g++ make pkg-config libxsimd-dev libgtest-dev python3 python3-numpy python3-onnx
      python3-matplotlib python3-venv python3-pip python3-setuptools python3-wheel golang-go)
# The Rust consumer test needs cargo: rustup's if present, else Debian's
# (rustc 1.63, the crate's rust-version).
if ! command -v cargo >/dev/null 2>&1 && [[ ! -x "${CARGO_HOME:-$HOME/.cargo}/bin/cargo" ]]; then
  want+=(cargo)
fi
if [[ "${1:-}" == "--bench" ]]; then
  # ocl-icd-opencl-dev: Debian's oneDNN is built with its OpenCL GPU runtime, so its CMake
  # package config calls find_package(OpenCL REQUIRED); apt only recommends the package, and
  # without it configuring the benchmark fails on a fresh machine.
  want+=(libbenchmark-dev libopenblas-dev libdnnl-dev ocl-icd-opencl-dev gnuplot-nox)
fi
case "${1:-}" in --clang | --sanitize | --tsan | --fuzz) want+=(clang libomp-dev) ;; esac
case "${1:-}" in
--sanitize | --tsan | --fuzz)
  # Debian 12's Clang is 14; its ASan/UBSan/TSan (and libFuzzer) runtimes are only
  # recommended by clang, which --no-install-recommends below leaves out.
  want+=(libclang-rt-14-dev)
  ;;
esac

if [[ "${1:-}" == "--aarch64" ]]; then
  want+=(g++-aarch64-linux-gnu qemu-user googletest)
fi

missing=()
for pkg in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
