// The one main() of the test drivers (each tests/test_*.cpp is only test cases): Boost.Test's
// own, with the master suite named after the executable. Keeping BOOST_TEST_MODULE out of
// the drivers is what lets them share one precompiled header (tests/support/precompiled.hpp):
// defined in a driver, it would have to come before Boost.Test's headers to take effect.
#include <boost/test/unit_test.hpp>

#include <filesystem>

namespace {

bool name_master_suite() {
  auto& master = boost::unit_test::framework::master_test_suite();
  if (master.argc > 0) master.p_name.value = std::filesystem::path(master.argv[0]).filename().string();
  return true;
}

}  // namespace

int main(int argc, char* argv[]) { return boost::unit_test::unit_test_main(&name_master_suite, argc, argv); }
