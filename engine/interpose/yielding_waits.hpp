#pragma once
// Condition-variable waits that stay on the CPU for a moment before they sleep, for CPU
// Vulkan devices (lavapipe) on virtual machines. See yielding_waits.cpp for why and how.
//
// Linked only into programs built with GPTVK_YIELDING_WAITS (the gpt-vk command and its
// test): they export their own pthread_cond_wait / _signal / _broadcast, which every
// library in the process then calls. Off until enable(true).
#include <cstdint>

namespace gptvk::yielding_waits {

// Turns the yielding phase on or off for every thread (off: plain pthread_cond_wait).
// The environment variable GPTVK_YIELDING_WAITS=0 (or false, no) keeps it off whatever is
// asked here; a value other than a switch's is a UsageError.
void enable(bool on);
bool enabled();

// Waits that returned from the yielding phase (woken, or out of time), for tests.
uint64_t yielding_returns();
// Waits that slept in glibc's wait because the caller's yielding phase on that condition
// had run out, for tests.
uint64_t sleeping_waits();

}  // namespace gptvk::yielding_waits
