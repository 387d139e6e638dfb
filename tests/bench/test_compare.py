#!/usr/bin/env python3
"""bench/compare.py on a small synthetic ak_bench JSON: the thread-scaling
table covers every thread count in the run, a missing peer value drops only
its own column's entry from the geomean, the OpenBLAS warning appears only
where OpenBLAS fell back to kernels without AVX, the decode table reads
q_len from the names that carry one, the encoder table reads batch, heads,
d and L from its names, and the conversion table pairs attnkern with memcpy. The summary opens the report (per family and thread
count, attnkern/peer geomeans and worst rows, the machine and the command),
and --update-readme rewrites only the text between a section's markers.
Standard library only."""

import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import compare  # noqa: E402  (after the path is set)

# GFLOP/s per (shape, threads, implementation); OpenBLAS at 4 threads on
# nn_2048 is left out on purpose.
RATES = {
    ("nn_1024", 1): {"attnkern": 100.0, "onednn": 100.0, "openblas": 90.0},
    ("nn_1024", 2): {"attnkern": 200.0, "onednn": 190.0, "openblas": 180.0},
    ("nn_1024", 4): {"attnkern": 400.0, "onednn": 360.0, "openblas": 270.0},
    ("nn_2048", 1): {"attnkern": 100.0, "onednn": 100.0, "openblas": 100.0},
    ("nn_2048", 2): {"attnkern": 150.0, "onednn": 200.0, "openblas": 150.0},
    ("nn_2048", 4): {"attnkern": 300.0, "onednn": 400.0},
}


def synthetic_run(corename):
    benchmarks = []
    for family, ((shape, threads), by_impl) in enumerate(RATES.items()):
        size = shape.split("_")[1]
        for impl, gflops in by_impl.items():
            benchmarks.append({
                "name": f"sgemm/{impl}/{shape}/threads:{threads}/real_time",
                "run_name": f"sgemm/{impl}/{shape}/threads:{threads}/real_time",
                "run_type": "iteration", "repetitions": 1, "family_index": family,
                "real_time": 1.0, "time_unit": "ms", "flops": gflops * 1e9,
                "label": f"m={size} n={size} k={size} NN"})
    # Skinny products (their table has a geomean row of its own); m = 16 is
    # in the table but not in the target.
    for m, scale in ((4, 1.0), (16, 1.16)):
        for impl, gbps in (("attnkern", 25.0), ("onednn", 20.0), ("openblas", 10.0)):
            name = f"sgemm/{impl}/skinny_nn_m{m}/threads:1/real_time"
            benchmarks.append({
                "name": name, "run_name": name, "run_type": "iteration", "repetitions": 1,
                "family_index": len(RATES), "real_time": 1.0, "time_unit": "ms",
                "bytes": gbps * scale * 1e9, "flops": gbps * scale * m / 8 * 1e9,
                "label": f"m={m} n=4096 k=4096 NN", "read_adj": 30.0})
    # Decode: one query (no _q in the name) and four queries per step.
    for shape, gbps in (("h32_kvh8_d128_kv8192", 25.0), ("h32_kvh8_d128_q4_kv4096", 8.0)):
        for impl, scale in (("attnkern", 1.0), ("unfused_onednn", 0.5)):
            name = f"decode/{impl}/{shape}/threads:1/real_time"
            benchmarks.append({
                "name": name, "run_name": name, "run_type": "iteration", "repetitions": 1,
                "family_index": len(RATES), "real_time": 1.0, "time_unit": "ms",
                "bytes": gbps * scale * 1e9, "flops": 4 * gbps * scale * 1e9,
                "read_adj": 28.0})
    # Encoder: short prefill over a batch and many heads.
    for impl, gflops in (("attnkern", 80.0), ("unfused_onednn", 50.0)):
        name = f"encoder/{impl}/b8_h12_d64_L128/threads:1/real_time"
        benchmarks.append({
            "name": name, "run_name": name, "run_type": "iteration", "repetitions": 1,
            "family_index": len(RATES) + 1, "real_time": 2.5, "time_unit": "ms",
            "flops": gflops * 1e9})
    # Conversions: attnkern beside a memcpy of the same bytes.
    for impl, gbps in (("attnkern", 12.0), ("memcpy", 16.0)):
        name = f"convert/{impl}/f32_to_bf16_64MiB/threads:1/real_time"
        benchmarks.append({
            "name": name, "run_name": name, "run_type": "iteration", "repetitions": 1,
            "family_index": len(RATES) + 2, "real_time": 8.0, "time_unit": "ms",
            "bytes": gbps * 1e9})
    return {"context": {"openblas_corename": corename, "attnkern_isa": "avx512",
                        "cpu_model": "Test CPU 9000", "num_cpus": 2, "date": "2030-01-02",
                        "run_command": "bench/run.sh"},
            "benchmarks": benchmarks}


def render(corename, command=None):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "run.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(synthetic_run(corename), f)
        context, entries, reps = compare.load(path)
        return compare.render(context, entries, reps, command)


def table_after(text, heading):
    """The first table after the heading (bullets may come between)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    start = next(i for i in range(start, len(lines)) if lines[i].startswith("|"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


class ScalingTable(unittest.TestCase):
    def setUp(self):
        self.rows = table_after(render("SkylakeX"), "### SGEMM thread scaling")

    def test_a_column_per_thread_count_and_implementation(self):
        head = self.rows[0]
        self.assertIn("attnkern 2 thr / 1 thr", head)
        self.assertIn("attnkern 4 thr / 1 thr", head)
        self.assertIn("OpenBLAS 4 thr / 1 thr", head)
        self.assertEqual(len(head), 3 + 2 * 3)

    def test_ratios_per_shape(self):
        by_shape = {r[0]: r for r in self.rows[2:]}
        head = self.rows[0]
        col = head.index("attnkern 4 thr / 1 thr")
        self.assertEqual(by_shape["nn_1024"][col], "4.00×")
        self.assertEqual(by_shape["nn_2048"][col], "3.00×")
        self.assertEqual(by_shape["nn_2048"][head.index("OpenBLAS 4 thr / 1 thr")], "—")

    def test_missing_value_drops_only_its_column(self):
        geo = next(r for r in self.rows if r[0].startswith("**geomean**"))
        head = self.rows[0]
        # attnkern at 4 threads: both shapes, sqrt(4 * 3)
        self.assertEqual(geo[head.index("attnkern 4 thr / 1 thr")], "3.46×")
        # OpenBLAS at 4 threads: nn_1024 alone (3.00), counted as 1 of 2
        self.assertEqual(geo[head.index("OpenBLAS 4 thr / 1 thr")], "3.00× (1)")


class EveryTable(unittest.TestCase):
    def test_rows_have_as_many_cells_as_the_header(self):
        tables, current = [], None
        for line in render("SkylakeX").splitlines():
            if line.startswith("|"):
                if current is None:
                    current = []
                    tables.append(current)
                current.append(line.strip().strip("|").split("|"))
            else:
                current = None
        self.assertGreaterEqual(len(tables), 4)
        for rows in tables:
            for row in rows[1:]:
                self.assertEqual(len(row), len(rows[0]), " | ".join(rows[0]))


class DecodeTable(unittest.TestCase):
    def test_q_len_and_kv_len_columns(self):
        rows = table_after(render("SkylakeX"), "### Attention decode")
        head = rows[0]
        by_kv = {r[head.index("kv_len")]: r for r in rows[2:] if not r[0].startswith("**")}
        self.assertEqual(by_kv["8192"][head.index("q_len")], "1")
        self.assertEqual(by_kv["4096"][head.index("q_len")], "4")
        self.assertEqual(by_kv["4096"][head.index("heads/kv heads")], "32/8 (GQA)")
        self.assertEqual(by_kv["4096"][head.index("attnkern/unfused")], "2.00")

    def test_geomeans_keep_single_queries_apart(self):
        rows = table_after(render("SkylakeX"), "### Attention decode")
        head = rows[0]
        geo = {r[0]: r for r in rows if r[0].startswith("**geomean")}
        self.assertEqual(sorted(geo), ["**geomean q_len 1, 1 thr** (1)",
                                       "**geomean q_len > 1, 1 thr** (1)"])
        one = geo["**geomean q_len 1, 1 thr** (1)"]
        self.assertEqual(one[head.index("attnkern GB/s")], "25.0")

    def test_target_bullet(self):
        text = render("SkylakeX")
        line = next(l for l in text.splitlines() if l.startswith("- decode target, 1 thr"))
        # 25 GB/s against an adjacent read of 28: 89 %, the one target row present
        self.assertIn("attnkern at 89% of the adjacent read", line)
        self.assertIn("**1 of 1** at 85% or more", line)


class SkinnySummary(unittest.TestCase):
    def test_share_of_the_adjacent_read(self):
        text = render("SkylakeX")
        line = next(l for l in text.splitlines() if l.startswith("- skinny target, 1 thr"))
        # 25 GB/s against 30: 83 %, short of 90 %
        self.assertIn("nn_m4 83%", line)
        self.assertIn("**0 of 1** at 90% or more", line)
        # m = 16 (25 * 1.16 = 29 GB/s, 97 %) is not a target row
        self.assertNotIn("m16", line)


class EncoderTable(unittest.TestCase):
    def test_shape_columns_ratio_and_time(self):
        rows = table_after(render("SkylakeX"), "### Encoder attention")
        head = rows[0]
        row = rows[2]
        self.assertEqual([row[head.index(c)] for c in ("batch", "heads", "d", "L", "thr")],
                         ["8", "12", "64", "128", "1"])
        self.assertEqual(row[head.index("attnkern/unfused")], "1.60")
        self.assertEqual(row[head.index("attnkern ms per call")], "2.500")
        geo = rows[3]
        self.assertTrue(geo[0].startswith("**geomean 1 thr**"))
        self.assertEqual(geo[head.index("attnkern/unfused")], "1.60")


class ConvertTable(unittest.TestCase):
    def test_pairs_attnkern_with_memcpy(self):
        rows = table_after(render("SkylakeX"), "### Conversions and cache stores")
        head = rows[0]
        row = rows[2]
        self.assertEqual(row[0], "convert/f32_to_bf16_64MiB")
        self.assertEqual(row[head.index("attnkern GB/s")], "12.0")
        self.assertEqual(row[head.index("memcpy GB/s")], "16.0")
        self.assertEqual(row[head.index("attnkern/memcpy")], "0.75")


class OpenBlasWarning(unittest.TestCase):
    def test_warns_on_a_core_without_avx(self):
        text = render("Prescott")
        self.assertIn("**warning**", text)
        self.assertIn("AK_BENCH_OPENBLAS_CORETYPE=SkylakeX", text)

    def test_silent_on_an_avx512_core(self):
        self.assertNotIn("**warning**", render("SkylakeX"))


class Summary(unittest.TestCase):
    def setUp(self):
        self.text = render("SkylakeX")
        rows = table_after(self.text, "### Summary")
        self.head = rows[0]
        self.rows = {(r[0], r[1]): r for r in rows[2:]}

    def cell(self, family, threads, peer):
        return self.rows[(family, str(threads))][self.head.index(peer)]

    def test_comes_first_with_machine_and_command(self):
        lines = self.text.splitlines()
        self.assertEqual(lines[0], "### Summary")
        self.assertLess(self.text.index("### Summary"), self.text.index("### Context"))
        self.assertIn("- machine: Test CPU 9000, 2 logical CPUs; attnkern ISA avx512; "
                      "OpenBLAS core SkylakeX", self.text)
        self.assertIn("- command: `bench/run.sh`", self.text)

    def test_command_option_wins(self):
        self.assertIn("- command: `AK_BENCH_ISA=avx2 bench/run.sh all`",
                      render("SkylakeX", "AK_BENCH_ISA=avx2 bench/run.sh all"))

    def test_a_column_per_peer_in_the_run(self):
        self.assertEqual(self.head, ["family", "thr", "rows", "vs oneDNN", "vs OpenBLAS",
                                     "vs unfused oneDNN"])

    def test_geomean_and_worst_row(self):
        # 1 thread: OpenBLAS at 90 and 100 against 100 and 100: sqrt(100/90)
        self.assertEqual(self.cell("SGEMM", 1, "vs OpenBLAS"), "**1.05** (worst 1.00 `nn_2048`)")
        # 2 threads against oneDNN: 200/190 and 150/200
        self.assertEqual(self.cell("SGEMM", 2, "vs oneDNN"), "**0.89** (worst 0.75 `nn_2048`)")
        self.assertEqual(self.cell("SGEMM", 1, "vs unfused oneDNN"), "—")

    def test_a_missing_peer_value_is_counted(self):
        # OpenBLAS has no nn_2048 at 4 threads: one of the two rows
        self.assertEqual(self.cell("SGEMM", 4, "vs OpenBLAS"),
                         "**1.48** (worst 1.48 `nn_1024`, 1 of 2)")

    def test_families(self):
        # Both skinny rows are at 1.25 (up to rounding): either may be the worst.
        self.assertRegex(self.cell("SGEMM skinny (decode projections)", 1, "vs oneDNN"),
                         r"^\*\*1\.25\*\* \(worst 1\.25 `skinny_nn_m(4|16)`\)$")
        self.assertEqual(self.cell("decode, q_len 1", 1, "vs unfused oneDNN"),
                         "**2.00** (worst 2.00 `h32_kvh8_d128_kv8192`)")
        self.assertEqual(self.cell("decode, a few queries", 1, "vs unfused oneDNN"),
                         "**2.00** (worst 2.00 `h32_kvh8_d128_q4_kv4096`)")
        self.assertEqual(self.cell("encoder", 1, "vs unfused oneDNN"),
                         "**1.60** (worst 1.60 `b8_h12_d64_L128`)")
        self.assertEqual(self.rows[("SGEMM", "1")][2], "2")

    def test_peaks_of_the_active_isa(self):
        pk = {("avx512", 1): 200.0, ("avx2", 1): 100.0, ("sse2", 1): 50.0}
        self.assertEqual(compare.best_peak(compare.active_peaks(pk, {"attnkern_isa": "avx2"}), 1),
                         ("avx2", 100.0))
        self.assertEqual(compare.active_peaks(pk, {"attnkern_isa": "avx512"}), pk)


README = """# bench

## Results

### AVX-512

<!-- results:avx512:begin -->
not yet generated
<!-- results:avx512:end -->

### AVX2

<!-- results:avx2:begin -->
not yet generated
<!-- results:avx2:end -->

## Files
"""


class UpdateReadme(unittest.TestCase):
    def run_main(self, tmp, *args):
        path = os.path.join(tmp, "run.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(synthetic_run("SkylakeX"), f)
        with open(os.devnull, "w") as null:
            stdout, stderr = sys.stdout, sys.stderr
            sys.stdout = sys.stderr = null
            try:
                return compare.main([path] + list(args))
            finally:
                sys.stdout, sys.stderr = stdout, stderr

    def test_replaces_only_its_section(self):
        with tempfile.TemporaryDirectory() as tmp:
            readme = os.path.join(tmp, "README.md")
            with open(readme, "w", encoding="utf-8") as f:
                f.write(README)
            self.assertEqual(self.run_main(tmp, "--update-readme", readme, "--section",
                                           "avx512", "--command", "bench/run.sh all"), 0)
            with open(readme, encoding="utf-8") as f:
                once = f.read()
            # Again: the same text (the markers stay, the old tables go).
            self.run_main(tmp, "--update-readme", readme, "--section", "avx512",
                          "--command", "bench/run.sh all")
            with open(readme, encoding="utf-8") as f:
                twice = f.read()
            with open(os.path.join(tmp, "results", "avx512.md"), encoding="utf-8") as f:
                page = f.read()
        self.assertEqual(once, twice)
        begin = once.index("<!-- results:avx512:begin -->")
        end = once.index("<!-- results:avx512:end -->")
        inside = once[begin:end]
        self.assertEqual(once[:begin], README[:README.index("<!-- results:avx512:begin -->")])
        self.assertEqual(once[end:], README[README.index("<!-- results:avx512:end -->"):])
        self.assertNotIn("not yet generated", inside)
        self.assertIn("- machine: Test CPU 9000, 2 logical CPUs; attnkern ISA avx512; "
                      "OpenBLAS core SkylakeX\n- command: `bench/run.sh all`\n- date: 2030-01-02",
                      inside)
        # The summary sits one level below the README's section; the full
        # tables go to results/avx512.md beside it.
        self.assertIn("\n#### Summary\n", inside)
        self.assertNotIn("SGEMM thread scaling", inside)
        self.assertIn("[results/avx512.md](results/avx512.md)", inside)
        self.assertNotIn("\n### ", inside)
        self.assertIn("not yet generated", once[end:])  # avx2 untouched
        self.assertIn("\n### SGEMM thread scaling", page)
        self.assertTrue(page.startswith("# ak_bench results: avx512\n\nGenerated by `bench/"
                                        "compare.py` from a run on 2030-01-02: Test CPU 9000"))

    def test_missing_markers_fail(self):
        with tempfile.TemporaryDirectory() as tmp:
            readme = os.path.join(tmp, "README.md")
            with open(readme, "w", encoding="utf-8") as f:
                f.write(README)
            self.assertEqual(self.run_main(tmp, "--update-readme", readme, "--section",
                                           "neon"), 2)
            with open(readme, encoding="utf-8") as f:
                self.assertEqual(f.read(), README)

    def test_summary_goes_to_its_markers(self):
        text = "# Top\n\n<!-- results:summary:begin -->\nold\n<!-- results:summary:end -->\ntail\n"
        with tempfile.TemporaryDirectory() as tmp:
            readme = os.path.join(tmp, "README.md")
            with open(readme, "w", encoding="utf-8") as f:
                f.write(text)
            self.assertEqual(self.run_main(tmp, "--update-summary", readme, "--command",
                                           "bench/run.sh"), 0)
            with open(readme, encoding="utf-8") as f:
                got = f.read()
        self.assertTrue(got.startswith("# Top\n\n<!-- results:summary:begin -->\n"))
        self.assertTrue(got.endswith("<!-- results:summary:end -->\ntail\n"))
        self.assertNotIn("old", got)
        self.assertNotIn("### Summary", got)
        self.assertIn("- machine: Test CPU 9000", got)
        self.assertIn("- command: `bench/run.sh`", got)
        self.assertIn("| family | thr | rows |", got)

    def test_section_needs_the_readme(self):
        with tempfile.TemporaryDirectory() as tmp, self.assertRaises(SystemExit):
            self.run_main(tmp, "--section", "avx2")


if __name__ == "__main__":
    unittest.main()
