"""Where libattnkern comes from: an explicit path, $AK_LIBRARY, a copy shipped
inside this package (a wheel may bundle one), the system loader (the soname,
as `cmake --install` to a prefix the loader searches leaves it), and last the
libdir that pkg-config names (an install prefix on PKG_CONFIG_PATH only)."""

import ctypes
import ctypes.util
import os
import subprocess
import sys

# The soname carries AK_ABI_VERSION: a library of another ABI is never loaded
# by accident through the loader's search.
if sys.platform == "darwin":
    SONAME = "libattnkern.1.dylib"
elif sys.platform == "win32":
    SONAME = "attnkern.dll"
else:
    SONAME = "libattnkern.so.1"

HERE = os.path.dirname(os.path.abspath(__file__))


def _pkg_config_libdir():
    try:
        done = subprocess.run(["pkg-config", "--variable=libdir", "attnkern"],
                              capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    libdir = done.stdout.strip()
    return libdir if done.returncode == 0 and libdir else None


def candidates(path=None):
    """The names open_library tries, in order, each with where it came from."""
    if path:
        return [(str(path), "the path given")]
    env = os.environ.get("AK_LIBRARY")
    if env:
        # An explicit choice: a wrong one is an error, not a reason to search.
        return [(env, "$AK_LIBRARY")]
    found = []
    bundled = os.path.join(HERE, SONAME)
    if os.path.exists(bundled):
        found.append((bundled, "the attnkern package"))
    found.append((SONAME, "the system loader"))
    util = ctypes.util.find_library("attnkern")
    if util and util != SONAME:
        found.append((util, "ctypes.util.find_library"))
    libdir = _pkg_config_libdir()
    if libdir:
        found.append((os.path.join(libdir, SONAME), "pkg-config's libdir"))
    return found


def open_library(path=None):
    """(name, ctypes.CDLL) of the first candidate that loads, else OSError
    listing every attempt and how to point at the library."""
    tried = []
    for name, origin in candidates(path):
        try:
            return name, ctypes.CDLL(name)
        except OSError as e:
            tried.append(f"  {name} ({origin}): {e}")
    raise OSError("libattnkern could not be loaded; tried:\n" + "\n".join(tried) +
                  f"\nInstall it (cmake --install build --prefix PREFIX) where the loader "
                  f"finds {SONAME} (ldconfig, LD_LIBRARY_PATH=PREFIX/lib), or set "
                  f"AK_LIBRARY=/path/to/{SONAME}")
