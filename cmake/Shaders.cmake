# Compiles every shaders/*.comp to SPIR-V at build time, validates it with spirv-val and
# embeds it in a static library, so the binary needs no shader files beside it.
#
# A shader declares the variants it is built in with lines of the form
#   //! variant NAME [requires:FEATURE] [DEFINE[=VALUE] ...]
# Each variant is embedded as "<file stem>.<NAME>"; a shader without such lines is built
# once and embedded as "<file stem>". A variant that requires a GLSL FEATURE this build's
# glslang cannot compile (gptvk_probe_glsl_features) is left out, and configure says so. glslang writes a depfile, so editing a shader or an
# included .glsl rebuilds only the variants that use it.

# Which optional GLSL extensions this glslang compiles to valid SPIR-V: each feature is
# a small shader compiled and validated at configure time. Sets GPTVK_GLSL_FEATURES.
function(gptvk_probe_glsl_features)
  set(dir ${CMAKE_BINARY_DIR}/glsl-probes)
  file(MAKE_DIRECTORY ${dir})
  set(head "#version 450\n#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\n#extension GL_KHR_memory_scope_semantics : require\nlayout(local_size_x = 32) in;\nshared float16_t a[256];\nshared float c[256];\n")
  set(coopmat_nv "${head}#extension GL_NV_cooperative_matrix : require\nvoid main() {\n  fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> x, y;\n  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> z = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);\n  coopMatLoadNV(x, a, 0, 16, false);\n  coopMatLoadNV(y, a, 0, 16, true);\n  z = coopMatMulAddNV(x, y, z);\n  coopMatStoreNV(z, c, 0, 16, false);\n}\n")
  set(coopmat_khr "${head}#extension GL_KHR_cooperative_matrix : require\nvoid main() {\n  coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> x;\n  coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> y;\n  coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> z = coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);\n  coopMatLoad(x, a, 0, 16, gl_CooperativeMatrixLayoutRowMajor);\n  coopMatLoad(y, a, 0, 16, gl_CooperativeMatrixLayoutColumnMajor);\n  z = coopMatMulAdd(x, y, z);\n  coopMatStore(z, c, 0, 16, gl_CooperativeMatrixLayoutRowMajor);\n}\n")
  set(features "")
  foreach(feature coopmat_nv coopmat_khr)
    file(WRITE ${dir}/${feature}.comp "${${feature}}")
    execute_process(COMMAND ${GLSLANG} --quiet --target-env vulkan1.1 -o ${dir}/${feature}.spv ${dir}/${feature}.comp
                    RESULT_VARIABLE compiled OUTPUT_QUIET ERROR_QUIET)
    set(valid 1)
    if(compiled EQUAL 0)
      execute_process(COMMAND ${SPIRV_VAL} --target-env vulkan1.1 ${dir}/${feature}.spv
                      RESULT_VARIABLE valid OUTPUT_QUIET ERROR_QUIET)
    endif()
    if(compiled EQUAL 0 AND valid EQUAL 0)
      list(APPEND features ${feature})
      message(STATUS "gpt-vk shaders: ${feature} variants built (this glslang compiles the extension)")
    else()
      message(STATUS "gpt-vk shaders: ${feature} variants left out (this glslang does not compile the extension)")
    endif()
  endforeach()
  set(GPTVK_GLSL_FEATURES ${features} PARENT_SCOPE)
endfunction()

# gptvk_embed_shaders(target shader_dir out_subdir table_function): the library `target`
# holds every shaders/*.comp of `shader_dir`, compiled into ${CMAKE_BINARY_DIR}/out_subdir,
# and defines gptvk::vk::table_function() returning their table. Shaders include from
# `shader_dir` and from shaders/ (its common/*.glsl).
function(gptvk_embed_shaders target shader_dir out_subdir table_function)
  if(NOT DEFINED GPTVK_GLSL_FEATURES)
    gptvk_probe_glsl_features()
    set(GPTVK_GLSL_FEATURES ${GPTVK_GLSL_FEATURES} PARENT_SCOPE)
  endif()
  file(GLOB shader_files CONFIGURE_DEPENDS ${shader_dir}/*.comp)
  set(out_dir ${CMAKE_BINARY_DIR}/${out_subdir})
  file(MAKE_DIRECTORY ${out_dir})
  set(sources "")
  set(registry_decls "")
  set(registry_entries "")
  foreach(shader ${shader_files})
    # Re-run configure when a shader's variant list may have changed.
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${shader})
    get_filename_component(stem ${shader} NAME_WE)
    file(STRINGS ${shader} variant_lines REGEX "^//! variant ")
    if(NOT variant_lines)
      set(variant_lines "//! variant ")
    endif()
    foreach(line ${variant_lines})
      string(REGEX REPLACE "^//! variant *" "" spec "${line}")
      separate_arguments(words UNIX_COMMAND "${spec}")
      set(defines "")
      set(missing "")
      if(words)
        list(POP_FRONT words variant)
        set(name "${stem}.${variant}")
        foreach(d ${words})
          if(d MATCHES "^requires:(.*)$")
            if(NOT CMAKE_MATCH_1 IN_LIST GPTVK_GLSL_FEATURES)
              set(missing ${CMAKE_MATCH_1})
            endif()
          else()
            list(APPEND defines "-D${d}")
          endif()
        endforeach()
      else()
        set(name "${stem}")
      endif()
      if(missing)
        continue()
      endif()
      string(MAKE_C_IDENTIFIER "spv_${name}" symbol)
      set(spv ${out_dir}/${name}.spv)
      set(cpp ${out_dir}/${name}.cpp)
      # The .spv comes first: glslang's depfile names it as its target, and Ninja checks a
      # depfile against the command's first output (else it reruns the command every build).
      add_custom_command(
        OUTPUT ${spv} ${cpp}
        COMMAND ${GLSLANG} --quiet --target-env vulkan1.1 ${defines}
                -I${shader_dir} -I${CMAKE_SOURCE_DIR}/shaders --depfile ${spv}.d -o ${spv} ${shader}
        COMMAND ${SPIRV_VAL} --target-env vulkan1.1 ${spv}
        COMMAND ${CMAKE_COMMAND} -DSPV=${spv} -DOUT=${cpp} -DSYMBOL=${symbol}
                -P ${CMAKE_SOURCE_DIR}/cmake/EmbedSpirv.cmake
        DEPENDS ${shader} ${CMAKE_SOURCE_DIR}/cmake/EmbedSpirv.cmake
        DEPFILE ${spv}.d
        COMMENT "SPIR-V ${name}"
        VERBATIM)
      list(APPEND sources ${cpp})
      string(APPEND registry_decls "extern const unsigned ${symbol}[]; extern const unsigned long ${symbol}_words;\n")
      string(APPEND registry_entries "  {\"${name}\", {${symbol}, ${symbol}_words}},\n")
    endforeach()
  endforeach()
  set(registry ${out_dir}/shader_registry.cpp)
  file(CONFIGURE OUTPUT ${registry} CONTENT
"// Generated by cmake/Shaders.cmake: the table of embedded SPIR-V modules.
#include \"engine/vk/shader_registry.hpp\"
#include <map>
#include <string>
@registry_decls@
namespace gptvk::vk {
const std::map<std::string, std::span<const uint32_t>>& @table_function@() {
  static const std::map<std::string, std::span<const uint32_t>> table = {
@registry_entries@  };
  return table;
}
}  // namespace gptvk::vk
" @ONLY)
  add_library(${target} STATIC ${sources} ${registry})
  target_include_directories(${target} PRIVATE ${CMAKE_SOURCE_DIR})
endfunction()
