"""Runs one sh block of the README's "Bindings" section, as a user would from
the repository root after building the library, so that the install
commands shown are the commands tested.

    run_readme_bindings.py README.md SOURCE_DIR BUILD_DIR WORK_DIR NAME

NAME picks the block whose first line is the comment "# NAME ..." (install,
python, rust, go; case does not matter). Every block runs in WORK_DIR, a
directory that looks like the repository root: include/ and capi/ lead to
the sources, build/ to this CMake build. capi/python is a fresh copy,
because pip builds a source directory in place and the sources stay clean;
capi/rust and capi/go are links (CARGO_TARGET_DIR and GOCACHE point into the
build). The install block makes WORK_DIR, the others need it made.

The blocks see a user's shell, not the build's: AK_LIBRARY,
ATTNKERN_LIB_DIR, LD_LIBRARY_PATH, PKG_CONFIG_PATH and CGO_CFLAGS/LDFLAGS are
removed, so the packages must find the installed library themselves. `python3`
is this interpreter (CMake's choice, one with numpy), `cmake` the one named
by AK_BINDINGS_CMAKE (the CMake of this build).
"""

import os
import re
import shutil
import subprocess
import sys

SECTION = "## Bindings"
USER_UNSET = ("AK_LIBRARY", "ATTNKERN_LIB_DIR", "LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH",
              "PKG_CONFIG_PATH", "CGO_CFLAGS", "CGO_LDFLAGS")


def block(readme, name):
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    blocks = re.findall(r"```sh\n(.*?)```", text[start:end if end >= 0 else None], re.S)
    chosen = [b for b in blocks
              if (m := re.match(r"#\s*(\w+)", b)) and m.group(1).lower() == name]
    if len(chosen) != 1:
        sys.exit(f"the README's section {SECTION!r} has {len(chosen)} sh blocks "
                 f"starting '# {name}', not one")
    return chosen[0]


def make_root(root, source, build):
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.join(root, "capi"))
    os.makedirs(os.path.join(root, ".tools"))
    links = {"include": os.path.join(source, "include"), "build": build,
             os.path.join(".tools", "python3"): sys.executable}
    if os.environ.get("AK_BINDINGS_CMAKE"):
        links[os.path.join(".tools", "cmake")] = os.environ["AK_BINDINGS_CMAKE"]
    for name in sorted(os.listdir(os.path.join(source, "capi"))):
        if name != "python":
            links[os.path.join("capi", name)] = os.path.join(source, "capi", name)
    for name, target in links.items():
        os.symlink(os.path.abspath(target), os.path.join(root, name))


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    readme, source, build, root, name = sys.argv[1:]
    root = os.path.abspath(root)
    commands = block(readme, name.lower())
    if name.lower() == "install":
        make_root(root, source, build)
    elif not os.path.isdir(os.path.join(root, ".tools")):
        sys.exit(f"{root} is missing: the install block has not run")
    if name.lower() == "python":
        copy = os.path.join(root, "capi", "python")
        shutil.rmtree(copy, ignore_errors=True)
        shutil.rmtree(os.path.join(root, "venv"), ignore_errors=True)
        shutil.copytree(os.path.join(source, "capi", "python"), copy,
                        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    env = {k: v for k, v in os.environ.items() if k not in USER_UNSET}
    env["PATH"] = os.path.join(root, ".tools") + os.pathsep + os.environ["PATH"]
    print(commands, flush=True)
    subprocess.run(["bash", "-euo", "pipefail", "-c", commands], cwd=root, env=env, check=True)
    print(f"the README's {name} block ran")


if __name__ == "__main__":
    main()
