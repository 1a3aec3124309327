#pragma once
// The command shape every row-op bench shares (fusekit bench rmsnorm, softmax_bwd, …): --rows,
// --cols, --dtype, --sweep (row lengths 512 … 262144 at ~128 M elements) and the common options;
// it prints the minimum traffic of each shape, then validates and times the ladders.
#include <cstdint>
#include <functional>
#include <string>

#include "bench/harness.hpp"
#include "fusekit/dtype.hpp"
#include "tools/fusekit/commands.hpp"

namespace fusekit::tools {

// The ladder of one shape: rows m of length n in `dtype`, checked over `scope` from `seed`.
using RowLadderMaker =
    std::function<bench::LadderRun(std::int64_t m, std::int64_t n, DType dtype, bench::CheckScope scope,
                                   std::uint64_t seed)>;

// Adds `fusekit bench <name>`; `tensors` is how many m×n tensors the op reads or writes once
// (the minimum traffic printed before any GPU work).
void add_row_bench(CLI::App& bench, Commands& commands, const std::string& name, const std::string& help,
                   int tensors, RowLadderMaker make);

}  // namespace fusekit::tools
