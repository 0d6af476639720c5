#include "engine/ops/layernorm.hpp"

#include <stdexcept>

#include "engine/vk/context.hpp"

namespace gptvk::ops {

namespace {

constexpr uint32_t kPasses = 3;  // loops over the row: sum, squared deviations, output

void check_views(const std::string& name, const View& x, const View& gamma, const View& beta, const View& y,
                 uint32_t rows, uint32_t C) {
  uint64_t act = uint64_t(rows) * C * 4;
  if (C == 0) throw std::logic_error(name + ": C must be positive");
  if (x.size() < act || y.size() < act) throw std::logic_error(name + ": activation views hold fewer than rows * C floats");
  if (gamma.size() < uint64_t(C) * 4 || beta.size() < uint64_t(C) * 4)
    throw std::logic_error(name + ": gamma/beta hold fewer than C floats");
}

void norm(Graph& g, View x, View gamma, View beta, View y, uint32_t rows, uint32_t C, float eps,
          const RowReduce& shape, const std::string& name) {
  check_views(name, x, gamma, beta, y, rows, C);
  // 4-wide accesses need rows of whole vec4s and 16-byte aligned bindings.
  bool vec4 = C % 4 == 0;
  for (const View& v : {x, gamma, beta, y}) vec4 &= v.offset % 16 == 0;
  check_row_reduce_shape(g.context(), shape, vec4 ? C / 4 : C, kPasses, name);
  if (rows == 0) return;
  std::string shader = "layernorm." + shape.variant() + (vec4 ? "_vec4" : "");
  const auto& p = g.context().pipelines().get({shader, {shape.local, C, vk::spec_f32(eps)}, 4, 4});
  Dispatch d{name, &p, {}, row_groups(rows), {rows}};
  d.args.push_back({x, Access::Read});
  d.args.push_back({gamma, Access::Read});
  d.args.push_back({beta, Access::Read});
  d.args.push_back({y, Access::Write});
  g.add(std::move(d));
}

}  // namespace

void layernorm(Graph& g, View x, View gamma, View beta, View y, uint32_t rows, uint32_t C, float eps,
               const std::string& name) {
  norm(g, x, gamma, beta, y, rows, C, eps, row_reduce_shape(g.context(), C, kPasses), name);
}

void layernorm(Graph& g, View x, View gamma, View beta, View y, uint32_t rows, uint32_t C, float eps,
               const RowReduce& shape, const std::string& name) {
  norm(g, x, gamma, beta, y, rows, C, eps, shape, name);
}

}  // namespace gptvk::ops
