// Reading a memory-mapped file that may change underneath: when another process truncates
// the file (`cp` over it, a download restarting), touching a page past the new end raises
// SIGBUS, which would kill the process with no message. run_catching_sigbus() turns that
// fault, on this thread and inside `f` only, into a `false` return the caller reports as
// bad input ("file changed or truncated while loading"); SIGBUS anywhere else still kills.
#pragma once
#include <functional>

namespace gptvk {

// Runs `f`; false when a SIGBUS interrupted it. After a fault `f` is abandoned mid-way
// (siglongjmp): objects it had made are leaked, not destroyed, so it should hold little
// more than the copy loop; the caller is expected to give up on what `f` was doing.
// Exceptions from `f` pass through.
bool run_catching_sigbus(const std::function<void()>& f);

}  // namespace gptvk
