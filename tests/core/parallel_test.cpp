// detail::parallel_for: the ranges it hands out and how it ends.
#include "../../src/core/parallel.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace fusekit {
namespace {

struct Range {
  std::int64_t begin, end;
  std::thread::id thread;
};

std::vector<Range> ranges_of(std::int64_t count, std::int64_t units_per_index) {
  std::mutex mutex;
  std::vector<Range> ranges;
  detail::parallel_for(count, units_per_index, [&](std::int64_t begin, std::int64_t end) {
    const std::lock_guard<std::mutex> lock(mutex);
    ranges.push_back({begin, end, std::this_thread::get_id()});
  });
  return ranges;
}

TEST(ParallelFor, RangesCoverEveryIndexOnce) {
  for (const auto& [count, units] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {7, 1}, {1000003, 1}, {4099, 4096},
                                     {3, 1 << 20}}) {
    SCOPED_TRACE(::testing::Message() << count << " indices of " << units << " units");
    std::vector<int> seen(static_cast<std::size_t>(count), 0);
    for (const Range& r : ranges_of(count, units)) {
      ASSERT_LE(0, r.begin);
      ASSERT_LE(r.begin, r.end);
      ASSERT_LE(r.end, count);
      for (std::int64_t i = r.begin; i < r.end; ++i) ++seen[static_cast<std::size_t>(i)];
    }
    for (std::int64_t i = 0; i < count; ++i) ASSERT_EQ(seen[static_cast<std::size_t>(i)], 1) << "index " << i;
  }
}

TEST(ParallelFor, ShortLoopsStayOnTheCallingThread) {
  const auto ranges = ranges_of(100, detail::kMinThreadWork / 100 - 1);
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0].begin, 0);
  EXPECT_EQ(ranges[0].end, 100);
  EXPECT_EQ(ranges[0].thread, std::this_thread::get_id());
}

TEST(ParallelFor, LongLoopsTakeTheCores) {
  const auto cores = std::max(1u, std::thread::hardware_concurrency());
  const auto ranges = ranges_of(std::int64_t{cores} * detail::kMinThreadWork, 1);
  EXPECT_EQ(ranges.size(), cores);
  std::int64_t on_caller = 0;
  for (const Range& r : ranges) on_caller += r.thread == std::this_thread::get_id() ? 1 : 0;
  EXPECT_EQ(on_caller, 1);  // the first range; the others on threads of their own
}

// An exception from the calling thread's range reaches the caller only after every other range has
// run to its end (no thread is left running, or destroyed while it runs).
TEST(ParallelFor, TheCallersExceptionWaitsForTheOtherRanges) {
  const auto cores = std::max(1u, std::thread::hardware_concurrency());
  const std::int64_t count = std::int64_t{cores} * detail::kMinThreadWork;
  std::atomic<std::int64_t> done{0};
  EXPECT_THROW(detail::parallel_for(count, 1,
                                    [&](std::int64_t begin, std::int64_t end) {
                                      if (begin == 0) throw std::runtime_error("first range");
                                      done += end - begin;
                                    }),
               std::runtime_error);
  EXPECT_EQ(done.load(), count - count / cores);
}

}  // namespace
}  // namespace fusekit
