// State a backend keeps for each weight tensor it has seen (the fp8 layers' delayed-scaling
// histories and casts), looked up by the weight's address. An address alone is not a weight: once
// a weight is freed, the allocator hands the same address to the next one (the CUDA caching
// allocator nearly always does), which would then inherit the old weight's scales. Each entry
// therefore remembers the Storage it was made for and starts afresh when another Storage answers
// at that address; entries of freed weights are dropped when a new one is made.
#pragma once
#include <map>
#include <memory>

#include "tensor/tensor.h"

namespace trainlab {

// State must be default-constructible and have a member `std::weak_ptr<Storage> owner`.
template <class State>
State& per_weight_state(std::map<const void*, State>& states, const Tensor& w) {
  auto it = states.find(w.raw());
  if (it != states.end() && it->second.owner.lock() == w.storage()) return it->second;
  std::erase_if(states, [](const auto& kv) { return kv.second.owner.expired(); });
  State& s = states[w.raw()];
  s = State{};
  s.owner = w.storage();
  return s;
}

// The state made for w by per_weight_state, or null when there is none for this very weight.
template <class State>
State* per_weight_find(std::map<const void*, State>& states, const Tensor& w) {
  auto it = states.find(w.raw());
  return it != states.end() && it->second.owner.lock() == w.storage() ? &it->second : nullptr;
}

}  // namespace trainlab
