// Layout of a layer's key and value caches, shared by kv_append.comp and attention.comp:
// head-major, [n_heads][CONTEXT][head dim], so a head's keys are one contiguous run its
// attention workgroup streams in order (engine/ops/attention.hpp, kv_cache_index, is the
// same on the host). Include after the shader's CONTEXT spec constant.

// Index of element e of head h's key (or value) at position j, in units of which a head's
// row holds `head_width`.
uint kv_cache_at(uint h, uint j, uint e, uint head_width) { return (h * CONTEXT + j) * head_width + e; }
