// The process's address-space limit (`ulimit -v`, RLIMIT_AS) caps everything the Vulkan
// driver maps: lavapipe's LLVM compiler, its worker threads' stacks, the model's buffers.
// Under a tight one the driver fails without naming the cause (VK_ERROR_INITIALIZATION_FAILED,
// out of memory on a device with memory to spare, a thread that cannot start) or crashes
// inside pipeline creation, where gpt-vk has no say. These turn that into one line that
// names the limit.
#pragma once
#include <cstdint>
#include <string>

namespace gptvk::cli {

// The least address space a model command starts with: a floor well above where lavapipe
// may crash instead of failing cleanly (~500 MiB). Above it a model that does not fit
// fails with an out-of-memory error that names the limit (with_address_space_note); the
// bundled model needs about 950 MiB.
inline constexpr uint64_t kMinAddressSpace = uint64_t{768} << 20;

// Throws InputError when the limit is below kMinAddressSpace, before any device opens.
void require_address_space();

// Where a limit is set: a crash (SIGSEGV) or abort (SIGABRT: LLVM's "Unable to allocate
// section memory") then also writes one line naming the limit before the process dies of
// the same signal, as it would have. Without a limit nothing is installed.
void explain_crashes_under_limit();

// `message` of an error that running out of address space can cause, with " (the
// address-space limit, ulimit -v, is N MiB: ...)" added where a limit is set and the
// message does not name it already.
std::string with_address_space_note(const std::string& message);

}  // namespace gptvk::cli
