// Dispatch chaining (engine/graph.hpp, Dispatch::chain): a chained dispatch has no pipeline
// barrier before it; each of its workgroups waits here until every workgroup of the
// dispatch before it has counted itself done, and counts itself done at its end. Include
// with CHAIN_COUNTERS and CHAIN_FLAG defined (their bindings); the three push words that
// say which counters come from the graph.
layout(std430, binding = CHAIN_COUNTERS) coherent volatile buffer ChainCounters { uint chain_arrivals[]; };
layout(std430, binding = CHAIN_FLAG) coherent buffer ChainFlag { uint chain_timed_out; };

// Polls before a wait gives up: a poll reads the GPU's L2 (some 0.2-0.5 us), so this is
// milliseconds, where a real wait is the tail of one mat-vec (GPT-2 XL's largest on an
// H100: ~15 us). A wait runs out only where the device let this dispatch's workgroups
// occupy it while some of the previous dispatch's had not started: the run is then
// flagged (and its owner runs it again with barriers), never hung. (No more: llvmpipe
// leaves any loop of an invocation past 65535 iterations in all, and tests the timeout.)
const uint CHAIN_SPIN_LIMIT = 1u << 14;

// Waits until counter `slot` has reached `need` arrivals (need 0: the chain's first
// dispatch, which a barrier orders). Every invocation of the workgroup calls it.
void chain_wait(uint slot, uint need) {
  if (need == 0u) return;
  if (gl_LocalInvocationIndex == 0u) {
    uint spins = 0u;
    while (chain_arrivals[slot] < need) {
      if (++spins == CHAIN_SPIN_LIMIT) {
        atomicOr(chain_timed_out, 1u);
        break;
      }
    }
  }
  // What the dispatch before wrote is visible from here on (its buffers are `coherent` in
  // the chained variants: no stale line in this multiprocessor's L1), and no load of it
  // moves above the wait.
  memoryBarrierBuffer();
  barrier();
  memoryBarrierBuffer();
}

// Counts this workgroup done on counter `slot`, after all of its writes.
void chain_signal(uint slot) {
  memoryBarrierBuffer();
  barrier();
  if (gl_LocalInvocationIndex == 0u) atomicAdd(chain_arrivals[slot], 1u);
}
