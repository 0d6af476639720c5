// The `--profile` table: per-op GPU time, largest first, with each op's share.
#pragma once
#include <string>
#include <vector>

#include "engine/graph.hpp"

namespace gptvk::cli {

void print_profile_table(const std::string& title, std::vector<OpTime> times);

}  // namespace gptvk::cli
