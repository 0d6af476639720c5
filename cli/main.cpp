// gpt-vk: GPT models on any Vulkan device. Dispatches to one subcommand and turns every
// error into one line on stderr with the CONTRACT's exit codes (1 bad input, 2 bad usage).
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <sstream>
#include <string>
#include <system_error>

#include "cli/address_space.hpp"
#include "cli/commands.hpp"
#include "cli/error_line.hpp"
#include "cli/output.hpp"
#include "cli/strict_flags.hpp"
#include "engine/error.hpp"

namespace {

using namespace gptvk;
using Actions = std::map<CLI::App*, cli::Action>;

// Runs f, turning what it throws into one line on stderr and the CONTRACT's exit code.
// Failures that running out of address space causes (the device's and host's allocations, a
// file that cannot be mapped, a thread that cannot start) name an address-space limit
// where one is set.
template <class F>
int report_errors(F f) {
  try {
    return f();
  } catch (const UsageError& e) {
    cli::print_error(e.message());
    return 2;
  } catch (const InputError& e) {
    // A mapping refused for want of memory reads "...: Cannot allocate memory" (strerror).
    const bool no_memory = e.message().find(std::strerror(ENOMEM)) != std::string::npos;
    cli::print_error(no_memory ? cli::with_address_space_note(e.message()) : e.message());
    return 1;
  } catch (const DeviceError& e) {
    cli::print_error(cli::with_address_space_note(e.message()));
    return 1;
  } catch (const std::bad_alloc&) {
    cli::print_error(cli::with_address_space_note("out of host memory"));
    return 1;
  } catch (const std::system_error& e) {
    if (e.code() != std::errc::resource_unavailable_try_again && e.code() != std::errc::not_enough_memory) {
      cli::print_error(std::string("internal error: ") + e.what());
      return 3;
    }
    cli::print_error(cli::with_address_space_note(std::string("out of system resources: ") + e.what()));
    return 1;
  } catch (const std::exception& e) {
    cli::print_error(std::string("internal error: ") + e.what());
    return 3;
  }
}

// Every command takes --device and --validation (the contract's command line); tokenize
// and detokenize open no device, so for them the flags change nothing.
void add_device_flags(const Actions& actions, cli::Common& common) {
  for (const auto& [sub, action] : actions) {
    const bool deviceless = sub->get_name() == "tokenize" || sub->get_name() == "detokenize";
    const std::string unused = deviceless ? " (accepted like every command's; " + sub->get_name() + " uses no device)" : "";
    sub->add_option("--device", common.device,
                    "Vulkan device index from `gpt-vk devices` (default: best device)" + unused)
        ->check(cli::device_index());
    sub->add_flag("--validation", common.validation, "enable the Khronos validation layer (debugging)" + unused);
  }
}

// The commands that open a device and load a model (devices only lists; tokenize and
// detokenize use no device).
bool runs_a_model(const CLI::App& sub) {
  const std::string& name = sub.get_name();
  return name != "devices" && name != "tokenize" && name != "detokenize";
}

// CLI11 would report a mistyped command, or an option before the command, as "A subcommand
// is required"; name it instead.
bool unknown_command(const CLI::App& app, int argc, char** argv) {
  if (argc < 2) return false;
  const std::string first = argv[1];
  if (first[0] == '-') {
    if (first == "-h" || first == "--help" || first == "--version") return false;
    cli::print_error("unknown option '" + first + "' before the command (gpt-vk COMMAND [OPTIONS]; see gpt-vk --help)");
    return true;
  }
  std::string names;
  bool known = false;
  for (const CLI::App* sub : app.get_subcommands({})) {
    known = known || sub->get_name() == argv[1];
    names += (names.empty() ? "" : ", ") + sub->get_name();
  }
  if (!known)
    cli::print_error(std::string("unknown command '") + argv[1] + "' (commands: " + names + "; see gpt-vk --help)");
  return !known;
}

// CLI11 lists a command's unexpected arguments last first ("... not expected: 3 -n hi -p");
// the command's own list of them is in command-line order.
std::string extras_message(const CLI::App& app, const CLI::ParseError& e) {
  for (const CLI::App* sub : app.get_subcommands({})) {
    const std::vector<std::string> extras = sub->remaining();
    if (!sub->parsed() || extras.empty()) continue;
    std::string message = extras.size() == 1 ? "The following argument was not expected:"
                                              : "The following arguments were not expected:";
    for (const std::string& arg : extras)
      message += arg.find(' ') == std::string::npos ? " " + arg : " '" + arg + "'";
    return message + " (see gpt-vk " + sub->get_name() + " --help)";
  }
  return e.what();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gptvk::cli;
  // A closed pipe or a file past RLIMIT_FSIZE is then a write error (EPIPE, EFBIG) that
  // cli/output.cpp and engine/files.cpp report, rather than a silent death by signal.
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGXFSZ, SIG_IGN);
  explain_crashes_under_limit();
  CLI::App app{"gpt-vk: run GPT-2 family models on any Vulkan device (GPU, or CPU through lavapipe)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gpt-vk 0.1");
  Common common;
  Actions actions;
  auto reg = [&](Action (*add)(CLI::App&, Common&)) {
    size_t before = app.get_subcommands({}).size();
    Action a = add(app, common);
    actions[app.get_subcommands({})[before]] = std::move(a);
  };
  reg(add_devices);
  reg(add_generate);
  reg(add_forward);
  reg(add_tokenize);
  reg(add_detokenize);
  reg(add_perplexity);
  reg(add_score);
  reg(add_bench);
  reg(add_serve);
  add_device_flags(actions, common);
  if (unknown_command(app, argc, argv)) return 2;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) {
      print_error(dynamic_cast<const CLI::ExtrasError*>(&e) ? extras_message(app, e) : e.what());
      return 2;
    }
    // --help, --version: written to stdout, checked like any output (through write_stdout,
    // which keeps the reason of a failed write: "No space left on device").
    return report_errors([&] {
      std::ostringstream text;
      const int code = app.exit(e, text, text);
      write_stdout(text.str());
      close_stdout();
      return code;
    });
  }
  return report_errors([&] {
    for (auto& [sub, action] : actions)
      if (sub->parsed()) {
        if (runs_a_model(*sub)) require_address_space();
        int code = action();
        close_stdout();
        return code;
      }
    return 2;
  });
}
