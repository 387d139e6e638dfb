#!/usr/bin/env python3
"""Runs bench/torch_peer.py and bench/ort_peer.py against the numpy stand-ins
in peer_stubs/ (float64 versions of the peers' operations), on the real
attnkern ($AK_LIBRARY): their cases, bindings, agreement checks and reports.
Also runs tools/perf/ort_probe.py once on the stand-in, tools/perf/ab_builds.py
with the library as both builds (every row must report equal bits, and the
Markdown table must hold every row), and checks that
tools/perf/column_pattern_probe.cpp builds and runs.

For each script: every table is reported, every row agrees with the
stand-in and the exit status is 0; and with the stand-ins perturbed by 1 %
(AK_PEER_STUB_PERTURB=1) the script reports FAIL and exits 1. ort_peer.py
needs onnx (Debian: python3-onnx, which scripts/install-deps.sh installs);
without it that script is reported as skipped.
"""

import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "bench")
TOOLS = os.path.join(HERE, "..", "..", "tools", "perf")
STUBS = os.path.join(HERE, "peer_stubs")
TITLES = ["## Prefill", "## Encoder", "## Decode", "## A few queries per step",
          "## Softmax", "## SGEMM"]
# Every table, on a few odd small shapes (--tiny).
ARGS = ["--tiny", "--reps", "1", "--min-time", "0.001", "--threads", "1,2"]


def run_script(name, perturb=False, args=ARGS, where=BENCH):
    env = dict(os.environ)
    env["PYTHONPATH"] = STUBS + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["AK_PEER_STUB_PERTURB"] = "1" if perturb else "0"
    return subprocess.run([sys.executable, os.path.join(where, name)] + args, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=600)


def have_onnx():
    try:
        import onnx  # noqa: F401
    except ImportError:
        return False
    return True


class PeerScripts(unittest.TestCase):
    def check_agrees(self, name, peer, extra=()):
        r = run_script(name, args=ARGS + list(extra))
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        for title in TITLES:
            self.assertIn(title, r.stdout)
        self.assertIn(f"All timed outputs agree (max |attnkern - {peer}|", r.stdout)
        self.assertNotIn("FAIL", r.stdout)
        self.assertNotIn("refused", r.stdout)

    def check_reports_disagreement(self, name):
        r = run_script(name, perturb=True)
        self.assertEqual(r.returncode, 1, r.stderr[-3000:])
        self.assertIn("**FAIL**", r.stdout)

    def test_torch_peer_agrees(self):
        self.check_agrees("torch_peer.py", "torch")

    def test_torch_peer_reports_disagreement(self):
        self.check_reports_disagreement("torch_peer.py")

    @unittest.skipUnless(have_onnx(), "onnx is not installed (Debian: python3-onnx)")
    def test_ort_peer_agrees(self):
        self.check_agrees("ort_peer.py", "ORT")

    @unittest.skipUnless(have_onnx(), "onnx is not installed (Debian: python3-onnx)")
    def test_ort_peer_spinning_option(self):
        r = run_script("ort_peer.py", args=ARGS + ["--tables", "softmax", "--ort-spinning",
                                                   "stop"])
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        self.assertIn("between runs: stop (session.force_spinning_stop=1)", r.stdout)

    @unittest.skipUnless(have_onnx(), "onnx is not installed (Debian: python3-onnx)")
    def test_ort_peer_reports_disagreement(self):
        self.check_reports_disagreement("ort_peer.py")

    @unittest.skipUnless(have_onnx(), "onnx is not installed (Debian: python3-onnx)")
    def test_ort_probe_runs(self):
        r = run_script("ort_probe.py", args=["--threads", "1", "--reps", "1",
                                             "--min-time", "0.001"], where=TOOLS)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        self.assertEqual(r.stdout.count("softmax "), 3, r.stdout)
        self.assertEqual(r.stdout.count("encoder "), 2, r.stdout)

    def test_ab_builds_same_library_same_bits(self):
        # Every family (the default --cases): 5 attention, 4 decode, 6 skinny,
        # 5 sgemm, 3 softmax and 5 axis cases at one thread count.
        lib = os.environ["AK_LIBRARY"]
        with tempfile.TemporaryDirectory() as tmp:
            md = os.path.join(tmp, "ab.md")
            r = run_script("ab_builds.py", args=[lib, lib, "--reps", "1", "--min-time", "0.001",
                                                 "--markdown", md], where=TOOLS)
            self.assertEqual(r.returncode, 0, r.stderr[-3000:])
            lines = r.stdout.strip().splitlines()
            self.assertEqual(len(lines), 28, r.stdout)
            for line in lines:
                self.assertTrue(line.endswith("max |A - B| 0"), line)
            for family in ("attention", "decode", "skinny", "sgemm", "softmax", "softmax_axis"):
                self.assertTrue(any(line.startswith(family + " ") for line in lines), family)
            with open(md, encoding="utf-8") as f:
                table = [row for row in f.read().splitlines() if row.startswith("| ")]
        self.assertEqual(table[0], "| case | thr | A | B | unit | B/A | max abs(A − B) |")
        self.assertEqual(len(table), 1 + 28)
        for row in table[1:]:
            cells = [c.strip() for c in row.strip("|").split("|")]
            self.assertEqual(len(cells), 7, row)
            self.assertEqual(cells[-1], "0", row)

    def test_column_pattern_probe_builds_and_runs(self):
        # Linux on x86-64 only (AVX-512 intrinsics, madvise); run where the
        # CPU has AVX-512. The probe checks each pattern's output itself.
        compiler = shutil.which("g++")
        if not compiler or sys.platform != "linux" or os.uname().machine != "x86_64":
            self.skipTest("needs g++ on x86-64 Linux")
        source = os.path.join(TOOLS, "column_pattern_probe.cpp")
        flags = ["-std=c++17", "-O2", "-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl",
                 "-mavx2", "-mfma", "-fopenmp"]
        with tempfile.TemporaryDirectory() as tmp:
            omp_check = os.path.join(tmp, "omp_check.cpp")
            with open(omp_check, "w") as f:
                f.write("#include <omp.h>\nint main() { return omp_get_max_threads() > 0 ? 0 : 1; }\n")
            if subprocess.run([compiler, "-fopenmp", omp_check, "-o", os.path.join(tmp, "omp")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode:
                self.skipTest("g++ cannot build OpenMP programs here")
            exe = os.path.join(tmp, "column_probe")
            r = subprocess.run([compiler] + flags + ["-Wall", "-Wextra", source, "-o", exe],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open("/proc/cpuinfo") as f:
                if " avx512f" not in f.read():
                    self.skipTest("built; no AVX-512 to run it")
            r = subprocess.run([exe, "2", "64", "2048"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            lines = r.stdout.splitlines()
            self.assertEqual([line.split()[0] for line in lines],
                             ["rows", "rows_nt", "pieces", "blocks/32", "blocks/64",
                              "blocks/128", "blocks/256"])
            for line in lines:
                fields = line.split()
                self.assertEqual(fields[1:3], ["2", "thr"], line)
                self.assertEqual(fields[4:], ["GB/s"], line)
                # >= 0: on a loaded machine a 2-thread pass can wait for time
                # slices long enough to print 0.0; the output check is the probe's.
                rate = float(fields[3])
                self.assertTrue(math.isfinite(rate) and rate >= 0, line)
            for bad in (["1", "66", "1024"], ["1", "64", "1000"], ["0"]):
                r = subprocess.run([exe] + bad, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   universal_newlines=True, timeout=60)
                self.assertEqual(r.returncode, 2, bad)

if __name__ == "__main__":
    if not os.environ.get("AK_LIBRARY"):
        sys.exit("test_peer_scripts.py: set AK_LIBRARY to libattnkern's path")
    unittest.main(verbosity=2)
