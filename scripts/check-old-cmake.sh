#!/usr/bin/env bash
# Configures, builds and runs the whole test suite with CMake 3.18, the
# oldest version CMakeLists.txt accepts (Debian 11's), so that a feature of a
# later CMake cannot slip in unnoticed. apt fetches bullseye's cmake,
# cmake-data and libjsoncpp24 from Debian's signed archive into a scratch
# directory (its own lists and an empty package status): nothing is
# installed. Not part of CI (a second full build); run by hand after
# touching a CMakeLists.txt or a .cmake file.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

apt_dir="$work/apt"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
: >"$apt_dir/status"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg]" \
  "http://deb.debian.org/debian bullseye main" >"$apt_dir/sources.list"
apt_opts=(-o Dir::Etc::SourceList="$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o Dir::State::Lists="$apt_dir/lists" -o Dir::State::status="$apt_dir/status"
          -o Dir::Cache="$apt_dir/cache" -o Debug::NoLocking=1
          -o APT::Sandbox::User="$(id -un)")
apt-get "${apt_opts[@]}" update -qq
(cd "$work" && apt-get "${apt_opts[@]}" download -qq cmake cmake-data libjsoncpp24)
for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$work/root"; done

# That cmake links libjsoncpp.so.24 (bookworm has .so.25). It stays on the
# loader path for the whole run, since tests run CMake again (the install
# and subproject tests).
export LD_LIBRARY_PATH="$work/root/usr/lib/$(gcc -print-multiarch)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cmake="$work/root/usr/bin/cmake"
ctest="$work/root/usr/bin/ctest"
version=$("$cmake" --version | head -1)
echo "== $version"
case "$version" in *" 3.18."*) ;; *) echo "expected CMake 3.18, got: $version" >&2; exit 1 ;; esac

"$cmake" -S . -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DAK_WERROR=ON >/dev/null
"$cmake" --build "$work/build" -j"$(nproc)"
(cd "$work/build" && "$ctest" -j"$(nproc)" --output-on-failure)
echo "check-old-cmake: CMake 3.18 configures, builds and passes the whole suite"
