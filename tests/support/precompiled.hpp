// Headers most test drivers include, parsed once for all of them (CMake precompiles this
// file and includes it first in every tests/test_*.cpp): about a fifth of the drivers'
// compile time. Only other projects' headers, so that changing ours rebuilds no more than
// before.
#pragma once
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
