// Preloaded into the sanitizer presets' tests (LD_PRELOAD, see CMakePresets.json): makes
// dlclose() a no-op, so every shared library stays mapped until the process exits.
// Why: the Vulkan loader unloads the driver and the validation layer when an instance is
// destroyed; LeakSanitizer runs at exit and cannot name the library of a leak whose code
// is no longer mapped ("<unknown module>"), so tests/sanitizers/lsan.supp could not
// match the Vulkan stack's own process-lifetime allocations (nor tsan.supp its races).
// Nothing else changes: our code never calls dlclose, and no library here needs to be
// unloaded to work.
extern "C" int dlclose(void*) { return 0; }
