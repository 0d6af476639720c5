// Which workgroup of a dispatch finishes last (the row mat-vec's LN_AFTER and PICK_AFTER
// variants): that one does the work that needs every workgroup's results. The workgroup
// is one subgroup. `arrived` must start at 0; the last workgroup resets it (arrival_reset)
// so the recorded graph can run again.
#extension GL_KHR_shader_subgroup_arithmetic : require

// Workgroups of this dispatch that have finished their own part.
layout(std430, binding = 9) coherent buffer Arrived { uint arrived; };

// Counts this workgroup in; true (in every invocation) for the last one to arrive. The
// caller's stores before the call are visible to the last workgroup after it returns.
bool last_to_arrive(uint lane) {
  memoryBarrierBuffer();  // this workgroup's stores before its arrival is counted
  uint before = 0u;
  if (lane == 0u) before = atomicAdd(arrived, 1u);
  if (subgroupMax(before) != gl_NumWorkGroups.x - 1u) return false;
  memoryBarrierBuffer();  // and every other workgroup's stores before the caller's reads
  return true;
}

void arrival_reset() { arrived = 0u; }  // by one invocation of the last workgroup
