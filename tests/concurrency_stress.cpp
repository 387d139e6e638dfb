// Many threads call every C API entry point at once, each into buffers of
// its own, while one more thread keeps changing the process-wide settings
// (instruction set, thread count) and releasing every thread's kept scratch,
// and some callers change their own thread count between calls. Built under
// ThreadSanitizer by scripts/test.sh --tsan, which then reports any data
// race; on its own, it checks the results: each call returns AK_OK and
// gives, bit for bit, what a run on one thread gave on one of the
// instruction sets. (Results are the same for every thread count but differ
// between instruction sets, and the set may change while a call runs: the
// call keeps the one it started with.)
//
//   concurrency_stress [ROUNDS [WORKERS]]    each worker makes every call
//                                            ROUNDS times (default 2; 8 workers)
#include <atomic>
#include <chrono>
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
  std::vector<long> by_isa; // calls whose result was that set's
};

void worker(int id, int rounds, const std::vector<Job> &jobs, const Refs &refs,
            const std::vector<std::string> &isas, Failures &failures, WorkerStats &stats) {
  std::vector<std::vector<float>> outs;
  for (const Job &job : jobs) outs.emplace_back(job.floats);
  stats.by_isa.assign(isas.size(), 0);
  // Odd workers set a count of their own before each call, as an engine's
  // worker threads do; even ones follow the process-wide setting.
  const bool own_count = id % 2 == 1;
  static const int kLocalCounts[] = {1, 2, 0, 3};
  for (int r = 0; r < rounds; ++r) {
    for (std::size_t step = 0; step < jobs.size(); ++step) {
      const std::size_t j = (step + static_cast<std::size_t>(id) * 5) % jobs.size();
      const Job &job = jobs[j];
      if (own_count) {
        const int n = kLocalCounts[(step + static_cast<std::size_t>(r + id)) % 4];
        if (ak_set_num_threads_local(n) != AK_OK || ak_get_num_threads_local() != n)
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
      std::size_t match = 0;
      while (match < isas.size() && !same(refs[match][j], out.data())) ++match;
      if (match == isas.size())
        failures.add("worker " + std::to_string(id) + ", round " + std::to_string(r) + ": " +
                     mismatch(job, out, refs, j, isas));
      else
        ++stats.by_isa[match];
    }
  }
  if (own_count) ak_set_num_threads_local(0);
}

// Changes the instruction set every millisecond or so, walking through every
// pairing of set and process-wide thread count, and frees every thread's
// kept scratch every other step, until the workers are done.
long toggle(const std::atomic<int> &running, const std::vector<std::string> &isas,
            Failures &failures) {
  static const int kCounts[] = {1, 2, 3, 0};
  long steps = 0;
  for (std::size_t i = 0; running.load() > 0; ++i, ++steps) {
    const std::string &isa = isas[i % isas.size()];
    const int n = kCounts[(i / isas.size()) % 4];
    if (ak_set_isa(isa.c_str()) != AK_OK || isa != ak_get_isa())
      failures.add("ak_set_isa(" + isa + ") did not hold");
    if (ak_set_num_threads(n) != AK_OK || (n > 0 && ak_get_num_threads() != n))
      failures.add("ak_set_num_threads(" + std::to_string(n) + ") did not hold");
    if (i % 2 == 0) ak_release_scratch();
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
  std::printf("references: %zu calls on%s, %.1f s\n", jobs.size(), names.c_str(),
              seconds_since(start));
  if (failures.count() > 0) return 1;

  const Clock::time_point stress = Clock::now();
  std::atomic<int> running{workers};
  std::vector<WorkerStats> stats(static_cast<std::size_t>(workers));
  long toggles = 0;
  std::thread toggler([&] { toggles = toggle(running, isas, failures); });
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w)
    threads.emplace_back([&, w] {
      worker(w, rounds, jobs, refs, isas, failures, stats[static_cast<std::size_t>(w)]);
      running.fetch_sub(1);
    });
  for (std::thread &t : threads) t.join();
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
  std::printf("stress: %d workers x %d rounds, %ld calls (results of%s), %ld setting changes, "
              "%.1f s\n",
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
