// Every pipeline the ops request names an embedded shader variant whose SPIR-V interface
// (bindings, push-constant bytes, specialization constant ids) matches the pipeline's
// layout. The ops are driven through their own kernel choices (every forced linear kernel,
// each fused variant, every attention kernel) on the native, fallback and GPU-path
// contexts; PipelineCache::get checks each request against shader_interface() and throws
// std::logic_error on a missing name or a mismatch, which fails these tests.
#include <stdexcept>
#include <string>

#include "engine/error.hpp"
#include "engine/ops/attention.hpp"
#include "engine/ops/linear.hpp"
#include "engine/ops/step.hpp"
#include "engine/vk/pipeline.hpp"
#include "engine/vk/shader_registry.hpp"
#include "tests/support/vk_test.hpp"

using namespace gptvk;
using ops::LinearKernel;

namespace {

std::vector<std::pair<std::string, vk::Context*>> contexts() {
  return {{"native", &test::context()}, {"fallback", &test::fallback_context()}, {"gpu_paths", &test::gpu_paths_context()}};
}

const LinearKernel kKernels[] = {LinearKernel::Auto,          LinearKernel::MatVec,         LinearKernel::MatVecWide,
                                 LinearKernel::MatVecTexel,   LinearKernel::MatVecRows,     LinearKernel::MatVecRowsHeld,
                                 LinearKernel::MatVecCols,    LinearKernel::GemmRegisters,  LinearKernel::GemmRegistersWide,
                                 LinearKernel::GemmTiled,     LinearKernel::GemmCoopMat};

// Buffers for one linear of T tokens, K inputs, N outputs with every optional view (each
// its own buffer: every offset is 0, aligned on any device).
struct LinearBuffers {
  LinearBuffers(vk::Context& ctx, uint32_t T, uint32_t K, uint32_t N)
      : x(ctx, uint64_t(T) * K * 4, vk::Memory::Device, "x"), y(ctx, uint64_t(T) * N * 4, vk::Memory::Device, "y"),
        bias(ctx, uint64_t(N) * 4, vk::Memory::Device, "bias") {
    x.try_create_texel_view();
    // LayerNorm out: [T][N] where it runs as its own dispatch.
    for (int i = 0; i < 10; ++i) side.emplace_back(ctx, 4096 + uint64_t(T) * (N + K) * 4, vk::Memory::Device, "side");
  }
  vk::Buffer x, y, bias;
  std::vector<vk::Buffer> side;  // norm and pick views
  View at(int i, uint64_t bytes) const { return View{&side[i], 0, bytes}; }
};

// Records one linear_with; a kernel this device or shape cannot run (DeviceError,
// std::invalid_argument) is skipped, anything else (std::logic_error from the pipeline
// cache) propagates. Returns the pipelines requested.
size_t record_linear(vk::Context& ctx, LinearKernel kernel, DType dt, uint32_t T, uint32_t K, uint32_t N,
                     int fusion) {
  Matrix W = Matrix::create(ctx, dt, N, K, "weights");
  LinearBuffers b(ctx, T, K, N);
  const uint64_t nb = uint64_t(N) * 4, kb = uint64_t(K) * 4;
  ops::NormAfter norm{b.at(0, nb), b.at(1, nb), b.at(2, uint64_t(T) * nb), b.at(3, 4)};
  ops::PickAfter pick{b.at(4, 4), b.at(5, sizeof(StepState)), b.at(6, ops::pick_partials_bytes(N)), b.at(7, 4)};
  ops::NormBefore before{b.at(8, kb), b.at(9, nb)};
  ops::LinearArgs args{.kernel = kernel, .ep = {Activation::GeluTanh, false}, .name = "fc"};
  if (fusion == 1) args.norm_after = &norm;
  if (fusion == 2) args.pick_after = &pick;
  if (fusion == 3) args.norm_before = &before;
  Graph g(ctx);
  const size_t before_count = ctx.pipelines().size();
  try {
    ops::linear_with(g, whole(b.x), W, whole(b.bias), whole(b.y), T, args);
  } catch (const DeviceError&) {
  } catch (const std::invalid_argument&) {
  }
  return ctx.pipelines().size() - before_count;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_embedded_module_reflects_with_contiguous_bindings) {
  BOOST_REQUIRE(!vk::shader_table().empty());
  for (const auto& [name, words] : vk::shader_table()) {
    BOOST_TEST_CONTEXT(name) {
      const auto& iface = vk::shader_interface(name);
      BOOST_TEST(!iface.bindings.empty());
      for (size_t i = 0; i < iface.bindings.size(); ++i) BOOST_TEST(iface.bindings[i] == i);
      BOOST_TEST(iface.push_bytes % 4 == 0);
    }
  }
}

// Known interfaces, read off the GLSL: linear.comp's io bindings 0-5 with the (tokens,
// outputs, row stride) push block, plus w_base / x_base for the texel kernels, four more
// bindings for a fused LayerNorm, two for the folded one; attention's five and the texel
// kernel's three texel views with four offsets.
BOOST_AUTO_TEST_CASE(reflection_matches_the_glsl_declarations) {
  struct Known {
    const char* name;
    uint32_t bindings, push_bytes;
  };
  for (const Known& k : {Known{"linear.matvec_subgroup", 6, 12}, Known{"linear.matvec_rows_ln", 10, 20},
                         Known{"linear.matvec_subgroup_lnin", 8, 12}, Known{"linear.matvec_subgroup_texel", 6, 16},
                         Known{"linear.matvec_rows", 6, 20}, Known{"linear.matvec_rows_pick", 10, 20},
                         Known{"attention.shared", 5, 0}, Known{"attention.texel", 8, 16}}) {
    BOOST_TEST_CONTEXT(k.name) {
      const auto& iface = vk::shader_interface(k.name);
      BOOST_TEST(iface.bindings.size() == k.bindings);
      BOOST_TEST(iface.push_bytes == k.push_bytes);
    }
  }
  // linear.comp's io constants 0-6 and the mat-vec's rows (7) and tokens (8) per workgroup.
  const auto& mv = vk::shader_interface("linear.matvec_subgroup");
  BOOST_TEST(mv.spec_ids == (std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(the_pipeline_cache_rejects_a_layout_that_disagrees_with_its_shader) {
  vk::Context& ctx = test::context();
  const std::vector<uint32_t> spec = {8, 64, 16, 1, 0, 0, 0, 16, 1};
  BOOST_TEST(vk::interface_mismatch({"linear.matvec_subgroup", spec, 6, 12, 0}).empty());
  BOOST_TEST(!vk::interface_mismatch({"linear.matvec_subgroup", spec, 6, 16, 0}).empty());   // push size
  BOOST_TEST(!vk::interface_mismatch({"linear.matvec_subgroup", spec, 5, 12, 0}).empty());   // bindings
  std::vector<uint32_t> extra = spec;
  extra.push_back(0);  // constant_id 9, which the plain mat-vec does not declare
  BOOST_TEST(!vk::interface_mismatch({"linear.matvec_subgroup", extra, 6, 12, 0}).empty());
  BOOST_CHECK_THROW(ctx.pipelines().get({"linear.matvec_subgroup", spec, 6, 16, 0}), std::logic_error);
  BOOST_CHECK_THROW(ctx.pipelines().get({"linear.matvec_subgroupp", spec, 6, 12, 0}), std::logic_error);
}

// Every kernel linear_with can choose, in each fused variant (none, LayerNorm after, pick
// after, LayerNorm before) and with K a multiple of 4 or not (the "_xs" variants), on each
// context: all requests name an embedded variant with a matching interface.
BOOST_AUTO_TEST_CASE(every_linear_variant_exists_and_matches) {
  for (auto [cname, ctx] : contexts()) {
    size_t requested = 0;
    for (LinearKernel kernel : kKernels)
      for (DType dt : {DType::F32, DType::F16})
        for (uint32_t K : {64u, 66u})
          for (uint32_t T : {1u, 80u})
            for (int fusion = 0; fusion < 4; ++fusion) {
              BOOST_TEST_CONTEXT(cname << " kernel " << int(kernel) << " dtype " << int(dt) << " K " << K << " T " << T
                                       << " fusion " << fusion) {
                requested += record_linear(*ctx, kernel, dt, T, K, 96, fusion);
              }
            }
    BOOST_TEST_MESSAGE(cname << ": " << requested << " linear pipelines");
    BOOST_TEST(requested > 0u);
  }
}

// Every attention kernel attention_kernel can choose, forced one by one.
BOOST_AUTO_TEST_CASE(every_attention_variant_exists_and_matches) {
  for (auto [cname, ctx] : contexts()) {
    const size_t before_count = ctx->pipelines().size();
    for (bool kv_f16 : {false, true}) {
      const ops::AttentionShape s{4, 64, 32, kv_f16};
      const uint64_t cache = ops::kv_cache_bytes(s);
      vk::Buffer qkv(*ctx, 3 * 4 * 64 * 4 * 4, vk::Memory::Device, "qkv"), out(*ctx, 4 * 64 * 4 * 4, vk::Memory::Device, "out");
      vk::Buffer kc(*ctx, cache, vk::Memory::Device, "k"), vc(*ctx, cache, vk::Memory::Device, "v");
      vk::Buffer step(*ctx, sizeof(StepState), vk::Memory::Device, "step");
      for (vk::Buffer* b : {&qkv, &kc, &vc}) b->try_create_texel_view();
      const uint32_t sg = std::max(ctx->caps().subgroup_size, 1u);
      for (int texel = 0; texel < 2; ++texel)
        for (int subgroup = 0; subgroup < 2; ++subgroup)
          for (int vec4 = 0; vec4 < 2; ++vec4)
            for (int wide = 0; wide < 2; ++wide)
              for (uint32_t T : {1u, 4u}) {
                ops::AttentionKernel k{.subgroup = bool(subgroup), .vec4 = bool(vec4), .local = subgroup || texel ? sg : 8,
                                       .texel = bool(texel), .queries = texel ? 2u : 1u, .wide = bool(wide)};
                if (wide) k.local = std::max(sg, 64u);
                BOOST_TEST_CONTEXT(cname << " texel " << texel << " subgroup " << subgroup << " vec4 " << vec4 << " wide "
                                         << wide << " kv_f16 " << kv_f16) {
                  Graph g(*ctx);
                  try {
                    ops::attention_with(g, k, true, whole(qkv), whole(step), whole(kc), whole(vc), whole(out), T, s, "attn");
                  } catch (const std::logic_error& e) {
                    // attention_with's own "attention kernel: ..." refusals are kernels this
                    // device does not run; a pipeline mismatch is a failure.
                    if (std::string(e.what()).rfind("attention kernel:", 0) != 0) throw;
                  }
                }
              }
    }
    BOOST_TEST_MESSAGE(cname << ": " << ctx->pipelines().size() - before_count << " attention pipelines");
    BOOST_TEST(ctx->pipelines().size() > before_count);
  }
}
