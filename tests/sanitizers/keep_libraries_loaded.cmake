# Included into the project by the asan and tsan presets (CMAKE_PROJECT_INCLUDE): builds the
# dlclose no-op library that their tests preload (see keep_libraries_loaded.cpp).
add_library(gptvk_keep_libraries_loaded SHARED ${CMAKE_CURRENT_LIST_DIR}/keep_libraries_loaded.cpp)
set_target_properties(gptvk_keep_libraries_loaded PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/sanitizers)
# Plain code: it only has to be found before libc's dlclose, not to be checked itself.
target_compile_options(gptvk_keep_libraries_loaded PRIVATE -fno-sanitize=all)
target_link_options(gptvk_keep_libraries_loaded PRIVATE -fno-sanitize=all)
