#pragma once
// Host loops split over the machine's cores, for the CPU side of validation: the references and
// the conversion of downloaded tensors took most of the GPU tests' time on long rows (17 and ~8 ns
// per element on one core: minutes on the 2^27-element shapes of the norm tests).
#include <algorithm>
#include <cstdint>
#include <system_error>
#include <thread>
#include <vector>

namespace fusekit::detail {

// Work below this many units runs on the calling thread (starting a thread costs tens of µs).
inline constexpr std::int64_t kMinThreadWork = std::int64_t{1} << 16;

// Calls f(begin, end) on disjoint ranges that cover [0, count), one per thread (the calling thread
// takes the first, and any whose thread could not be started), and returns once every range is
// done. `units_per_index` is the work of one index (a row's columns), so short loops stay on one
// thread. f must not throw on the other threads (that terminates); an exception from the calling
// thread's ranges is rethrown once the other threads have finished theirs.
template <class F>
void parallel_for(std::int64_t count, std::int64_t units_per_index, F&& f) {
  const auto cores = static_cast<std::int64_t>(std::max(1u, std::thread::hardware_concurrency()));
  const std::int64_t parts =
      std::clamp<std::int64_t>(count * units_per_index / kMinThreadWork, 1, std::max<std::int64_t>(1, std::min(cores, count)));
  const auto bound = [&](std::int64_t k) { return count * k / parts; };
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(parts - 1));
  // Joins the started threads on every way out, so none is destroyed while it runs.
  struct Joiner {
    std::vector<std::thread>& threads;
    ~Joiner() {
      for (auto& thread : threads) thread.join();
    }
  } joiner{threads};
  std::int64_t started = 1;  // ranges [1, started) run on their own threads
  try {
    for (; started < parts; ++started) threads.emplace_back([&f, &bound, k = started] { f(bound(k), bound(k + 1)); });
  } catch (const std::system_error&) {
    // No more threads (a process or system limit): the calling thread takes the ranges left.
  }
  f(bound(0), bound(1));
  for (std::int64_t k = started; k < parts; ++k) f(bound(k), bound(k + 1));
}

}  // namespace fusekit::detail
