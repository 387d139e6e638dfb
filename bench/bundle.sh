#!/usr/bin/env bash
# Packs ak_bench, the shared libraries it loads (all but the C runtime's) and
# compare.py into one folder, so that the benchmark runs on a machine that
# lacks the Debian packages (same CPU architecture, a glibc at least as new):
#
#   bench/bundle.sh DIR [--tar]     # after bench/run.sh has built ak_bench
#   DIR/run.sh [ak_bench arguments...]            # on the other machine
#   python3 DIR/compare.py RESULTS.json           # its tables
#
# --tar also writes DIR.tar.xz (about 13 MB with oneDNN and OpenBLAS).
# AK_BENCH_BUILD_DIR: where ak_bench was built (default <repo>/build-bench).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="${AK_BENCH_BUILD_DIR:-$(dirname "$here")/build-bench}"
dir="${1:?usage: bench/bundle.sh DIR [--tar]}"
bin="$build/bench/ak_bench"
[ -x "$bin" ] || { echo "bundle.sh: no $bin; run bench/run.sh first" >&2; exit 1; }

mkdir -p "$dir/lib"
cp "$bin" "$dir/"
cp "$here/compare.py" "$dir/"
# Every library ldd resolves, but the C runtime's own (libc, libm, the
# loader, libstdc++, libgcc_s), which the other machine has.
ldd "$bin" | awk '/=> \//{print $3}' | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so.* | libm.so.* | ld-linux* | libstdc++.so.* | libgcc_s.so.* | libpthread.so.* | libdl.so.*) ;;
    *) cp -L "$lib" "$dir/lib/" ;;
  esac
done
cat > "$dir/run.sh" <<'RUN'
#!/usr/bin/env bash
# ak_bench with the libraries bundled beside it.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/ak_bench" "$@"
RUN
chmod +x "$dir/run.sh"
echo "bundle.sh: $dir ($(du -sh "$dir" | cut -f1)): $dir/run.sh [ak_bench arguments]" >&2
if [ "${2:-}" = "--tar" ]; then
  tar -C "$(dirname "$dir")" -cJf "$dir.tar.xz" "$(basename "$dir")"
  echo "bundle.sh: $dir.tar.xz ($(du -sh "$dir.tar.xz" | cut -f1))" >&2
fi
