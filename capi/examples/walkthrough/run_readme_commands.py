"""Runs every sh block of the README's walkthrough and engine sections, as a
reader would from the repository root, so that the commands shown are the
commands tested.

    run_readme_commands.py README.md SOURCE_DIR LIBRARY_DIR C_COMPILER

The commands run in a fresh directory under the current one that looks like
the repository root (capi/ and include/ link to the sources, build/ to the
directory holding the library just built), so that what they write stays out
of the sources; `cc` and `python3` are this build's C compiler and this
interpreter (which has numpy).
"""

import os
import re
import shutil
import subprocess
import sys

SECTIONS = ("## From the tutorial to the library", "## A small Llama engine")


def commands(readme):
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    blocks = []
    for section in SECTIONS:
        start = text.index(section)
        end = text.find("\n## ", start + len(section))
        found = re.findall(r"```sh\n(.*?)```", text[start:end if end >= 0 else None], re.S)
        if not found:
            sys.exit(f"no sh block in the README's section {section!r}")
        blocks += found
    return blocks


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    readme, source, library_dir, compiler = sys.argv[1:]
    root = os.path.abspath("readme-walkthrough")
    shutil.rmtree(root, ignore_errors=True)
    tools = os.path.join(root, ".tools")
    os.makedirs(tools)
    for name, target in (("capi", os.path.join(source, "capi")),
                         ("include", os.path.join(source, "include")), ("build", library_dir),
                         (os.path.join(".tools", "cc"), compiler),
                         (os.path.join(".tools", "python3"), sys.executable)):
        os.symlink(os.path.abspath(target), os.path.join(root, name))
    env = dict(os.environ, PATH=tools + os.pathsep + os.environ["PATH"],
               PYTHONDONTWRITEBYTECODE="1")
    for block in commands(readme):
        print(block, flush=True)
        subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=root, env=env, check=True)
    for made in ("self_attention", "mha_self_attention", "cross_attention_c.png", "engine"):
        assert os.path.exists(os.path.join(root, made)), f"the README's commands made no {made}"
    print("every command of the README's walkthrough and engine sections ran")


if __name__ == "__main__":
    main()
