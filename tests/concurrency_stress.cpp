// Many threads call every C API entry point at once, each into buffers of
// its own, while one more thread keeps changing the process-wide settings
// (instruction set, thread count) and releasing every thread's kept scratch,
// and some callers change their own thread count between calls. Built under
// ThreadSanitizer by scripts/test.sh --tsan, which then reports any data
// race; on its own, it checks the results: each call returns AK_OK and
// gives, bit for bit, what a run on one thread gave on one of the
// instruction sets. (Results are the same for every thread count but differ
// between instruction sets, and the set may change while a call runs: the
// call keeps the one it started with.) Clang 14's ThreadSanitizer does not
// instrument 32- and 64-byte vector loads and stores: it sees every access
// of the kernels only on the sse2 and scalar sets, which is why every
// supported set takes its turn rather than the best one alone.
//
//   concurrency_stress [ROUNDS [WORKERS]]    ROUNDS times (default 2), WORKERS
//                                            threads (default 8) started, each
//                                            making every call once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "attnkern.h"
#include "concurrency_jobs.hpp"

namespace {

using ak_stress::Job;
using Clock = std::chrono::steady_clock;

class Failures {
public:
  void add(const std::string &what) {
    std::lock_guard<std::mutex> hold(lock_);
    if (++count_ <= 20) std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  }
  int count() {
    std::lock_guard<std::mutex> hold(lock_);
    return count_;
  }

private:
  std::mutex lock_;
  int count_ = 0;
};

std::vector<std::string> supported_isas() {
  std::vector<std::string> isas;
  for (const char *name : {"avx512", "avx2", "sse2", "neon", "scalar"})
    if (ak_isa_supported(name)) isas.emplace_back(name);
  return isas;
}

std::string failed_call(const Job &job, ak_status s) {
  return job.name + ": " + ak_status_string(s) + " (" + ak_last_error() + ")";
}

// refs[isa][job]: the job's output on one thread with that instruction set.
using Refs = std::vector<std::vector<std::vector<float>>>;

bool same(const std::vector<float> &ref, const float *out) {
  return std::memcmp(ref.data(), out, ref.size() * sizeof(float)) == 0;
}

// A second run on 3 threads, over a buffer filled differently, must agree
// with the reference: a job that left bytes unwritten or a result that
// depends on the thread count would otherwise show up below as a race.
Refs make_references(const std::vector<Job> &jobs, const std::vector<std::string> &isas,
                     Failures &failures) {
  Refs refs(isas.size());
  for (std::size_t i = 0; i < isas.size(); ++i) {
    if (ak_set_isa(isas[i].c_str()) != AK_OK) failures.add("ak_set_isa(" + isas[i] + ") failed");
    for (const Job &job : jobs) {
      std::vector<float> ref(job.floats), again(job.floats);
      std::memset(ref.data(), 0xA5, ref.size() * sizeof(float));
      std::memset(again.data(), 0x5A, again.size() * sizeof(float));
      ak_set_num_threads(1);
      ak_status s = job.run(ref.data());
      if (s != AK_OK) failures.add(isas[i] + ", 1 thread: " + failed_call(job, s));
      ak_set_num_threads(3);
      s = job.run(again.data());
      if (s != AK_OK) failures.add(isas[i] + ", 3 threads: " + failed_call(job, s));
      if (!same(ref, again.data()))
        failures.add(isas[i] + ": " + job.name +
                     " differs between 1 and 3 threads, or leaves bytes of its buffer unwritten");
      refs[i].push_back(std::move(ref));
    }
  }
  ak_set_num_threads(0);
  return refs;
}

std::string mismatch(const Job &job, const std::vector<float> &out, const Refs &refs, std::size_t j,
                     const std::vector<std::string> &isas) {
  std::string what = job.name + ": matches no instruction set's result;";
  for (std::size_t i = 0; i < isas.size(); ++i) {
    std::size_t differ = 0, first = 0;
    for (std::size_t e = out.size(); e-- > 0;)
      if (std::memcmp(&out[e], &refs[i][j][e], sizeof(float)) != 0) ++differ, first = e;
    char line[160];
    std::snprintf(line, sizeof line, " %s: %zu of %zu floats differ, first [%zu] %a != %a",
                  isas[i].c_str(), differ, out.size(), first, static_cast<double>(out[first]),
                  static_cast<double>(refs[i][j][first]));
    what += line;
  }
  return what;
}

struct WorkerStats {
  long calls = 0;
  std::vector<long> by_isa; // calls whose result was that set's (where the sets differ)
};

// A refused call between the others: its message is the calling thread's own.
void misuse(int id, Failures &failures) {
  float y = 0.0f;
  const std::int64_t rows = -1 - id;
  const ak_status s = ak_softmax(rows, 1, &y, 1, &y, 1);
  const std::string expected = "rows = " + std::to_string(rows);
  if (s != AK_ERR_BAD_SHAPE || std::strstr(ak_last_error(), expected.c_str()) == nullptr ||
      y != 0.0f)
    failures.add("worker " + std::to_string(id) + ": ak_softmax(rows = " + std::to_string(rows) +
                 ") gave " + ak_status_string(s) + " (" + ak_last_error() + ")");
}

// One round of every call, from a thread started for it: threads come and
// go (and with them their kept scratch) while the others run.
void worker(int id, int round, const std::vector<Job> &jobs, const Refs &refs,
            const std::vector<std::string> &isas, Failures &failures, WorkerStats &stats) {
  std::vector<std::vector<float>> outs;
  for (const Job &job : jobs) outs.emplace_back(job.floats);
  // Odd workers set a count of their own before each call, as an engine's
  // worker threads do; even ones follow the process-wide setting.
  const bool own_count = id % 2 == 1;
  static const int kLocalCounts[] = {1, 2, 0, 3};
  for (std::size_t step = 0; step < jobs.size(); ++step) {
    const std::size_t j = (step + static_cast<std::size_t>(id) * 5) % jobs.size();
    const Job &job = jobs[j];
    if (own_count) {
      const int n = kLocalCounts[(step + static_cast<std::size_t>(round + id)) % 4];
      if (ak_set_num_threads_local(n) != AK_OK || ak_get_num_threads_local() != n ||
          (n > 0 && ak_get_num_threads() != n))
        failures.add("ak_set_num_threads_local(" + std::to_string(n) + ") did not hold");
    }
    std::vector<float> &out = outs[j];
    std::memset(out.data(), 0x3C + id, out.size() * sizeof(float)); // unlike either reference's
    const ak_status s = job.run(out.data());
    ++stats.calls;
    if (s != AK_OK) {
      failures.add("worker " + std::to_string(id) + ": " + failed_call(job, s));
      continue;
    }
    std::vector<std::size_t> matches;
    for (std::size_t i = 0; i < isas.size(); ++i)
      if (same(refs[i][j], out.data())) matches.push_back(i);
    if (matches.empty())
      failures.add("worker " + std::to_string(id) + ", round " + std::to_string(round) + ": " +
                   mismatch(job, out, refs, j, isas));
    else if (matches.size() == 1)
      ++stats.by_isa[matches[0]];
    if (step % 4 == 0) misuse(id, failures);
  }
}

// Changes the instruction set every millisecond or so, walking through every
// pairing of set and process-wide thread count, and frees every thread's
// kept scratch every third step (freeing takes long enough under the
// sanitizers that a set it always followed would run more of the calls),
// until the workers are done.
long toggle(const std::atomic<bool> &done, const std::vector<std::string> &isas,
            Failures &failures) {
  static const int kCounts[] = {1, 2, 3, 0};
  long steps = 0;
  for (std::size_t i = 0; !done.load(); ++i, ++steps) {
    const std::string &isa = isas[i % isas.size()];
    const int n = kCounts[(i / isas.size()) % 4];
    if (ak_set_isa(isa.c_str()) != AK_OK || isa != ak_get_isa())
      failures.add("ak_set_isa(" + isa + ") did not hold");
    if (ak_set_num_threads(n) != AK_OK || (n > 0 && ak_get_num_threads() != n))
      failures.add("ak_set_num_threads(" + std::to_string(n) + ") did not hold");
    if (i % 3 == 0) ak_release_scratch();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return steps;
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

int run(int rounds, int workers) {
  const Clock::time_point start = Clock::now();
  const std::vector<Job> jobs = ak_stress::make_jobs();
  const std::vector<std::string> isas = supported_isas();
  Failures failures;
  const Refs refs = make_references(jobs, isas, failures);
  std::string names;
  for (const std::string &isa : isas) names += " " + isa;
  std::size_t distinct = 0; // calls whose result tells the instruction set
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    std::size_t equal = 0;
    for (std::size_t i = 0; i < isas.size(); ++i)
      for (std::size_t o = 0; o < isas.size(); ++o) equal += refs[i][j] == refs[o][j] ? 1 : 0;
    distinct += equal == isas.size() ? 1 : 0;
  }
  std::printf("references: %zu calls on%s (%zu of them differ on every set), %.1f s\n", jobs.size(),
              names.c_str(), distinct, seconds_since(start));
  if (failures.count() > 0) return 1;

  const Clock::time_point stress = Clock::now();
  std::atomic<bool> done{false};
  std::vector<WorkerStats> stats(static_cast<std::size_t>(workers));
  for (WorkerStats &s : stats) s.by_isa.assign(isas.size(), 0);
  long toggles = 0;
  std::thread toggler([&] { toggles = toggle(done, isas, failures); });
  for (int r = 0; r < rounds; ++r) {
    std::vector<std::thread> threads;
    for (int w = 0; w < workers; ++w)
      threads.emplace_back([&, w, r] {
        worker(w, r, jobs, refs, isas, failures, stats[static_cast<std::size_t>(w)]);
      });
    for (std::thread &t : threads) t.join();
  }
  done.store(true);
  toggler.join();
  ak_set_isa(nullptr);
  ak_set_num_threads(0);
  ak_release_scratch();

  long calls = 0;
  std::string matched;
  for (std::size_t i = 0; i < isas.size(); ++i) {
    long n = 0;
    for (const WorkerStats &s : stats) n += s.by_isa[i];
    matched += " " + isas[i] + " " + std::to_string(n);
  }
  for (const WorkerStats &s : stats) calls += s.calls;
  std::printf("stress: %d workers x %d rounds, %ld calls (of those that tell the set:%s), "
              "%ld setting changes, %.1f s\n",
              workers, rounds, calls, matched.c_str(), toggles, seconds_since(stress));
  if (failures.count() > 0) {
    std::fprintf(stderr, "%d failures\n", failures.count());
    return 1;
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 2;
  const int workers = argc > 2 ? std::atoi(argv[2]) : 8;
  if (rounds < 1 || workers < 1) {
    std::fprintf(stderr, "usage: concurrency_stress [ROUNDS [WORKERS]] (both >= 1)\n");
    return 2;
  }
  try {
    return run(rounds, workers);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "concurrency_stress: %s\n", e.what());
    return 1;
  }
}
