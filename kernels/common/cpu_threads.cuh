// cpu_threads.cuh: the host's share of the work. cpu_threads counts the CPU cores this process may
// use; parallel_for spreads a float64 reference or the making of large inputs over them. Taught in
// docs/conventions.md.
#pragma once

#include <sched.h>  // sched_getaffinity

#include <algorithm>
#include <thread>
#include <vector>

namespace course {

// --8<-- [start:threads]
// The CPU cores this process may run on (its affinity mask, which the GPU run narrows to one GPU's
// share of the host: course/gpu_run.py), for host-side float64 references spread over threads.
inline int cpu_threads() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return 1;
}

// Runs body(i) for i in [0, n) on every CPU core this process may use: the float64 references of
// the benchmark sizes and the inputs of the large ones.
template <typename F>
void parallel_for(long long n, const F& body) {
  const long long workers = std::max(1LL, std::min<long long>(n, cpu_threads()));
  std::vector<std::thread> pool;
  for (long long w = 0; w < workers; ++w)
    pool.emplace_back([&, w] {
      for (long long i = w; i < n; i += workers) body(i);
    });
  for (auto& t : pool) t.join();
}
// --8<-- [end:threads]

}  // namespace course
