// kernels/optim_table.cuh: the multi-tensor table of the optimizer kernels (optim.cu,
// optim_lean.cu, optim_adafactor.cu). A launch covers up to kMaxTensors tensors; tensor i owns
// blocks [first_block[i], first_block[i+1]) of the grid (possibly none).
#pragma once
#include "optim.cuh"

namespace trainlab::kern {

template <class T>
struct TensorTable {
  T t[kMaxTensors];
  int first_block[kMaxTensors + 1];
  int count;
};
using OptTable = TensorTable<OptTensor>;

template <class T>
__device__ __forceinline__ int find_tensor(const TensorTable<T>& tab, int block) {
  int i = 0;
  while (i + 1 < tab.count && block >= tab.first_block[i + 1]) ++i;
  return i;
}

// Splits the tensors (those with n > 0) into tables of kMaxTensors, tensor i taking blocks_of(t[i])
// blocks, and launches each table.
template <class T, class BlocksOf, class Launch>
void for_tables_by(const T* t, int count, BlocksOf&& blocks_of, Launch&& launch) {
  for (int off = 0; off < count;) {
    TensorTable<T> tab{};
    tab.count = 0;
    int blocks = 0;
    for (; off < count && tab.count < kMaxTensors; ++off) {
      if (t[off].n <= 0) continue;
      tab.t[tab.count] = t[off];
      tab.first_block[tab.count] = blocks;
      blocks += static_cast<int>(blocks_of(t[off]));
      ++tab.count;
    }
    tab.first_block[tab.count] = blocks;
    if (blocks > 0) launch(tab, blocks);
  }
}

// The same with per_block elements a block.
template <class Launch>
void for_tables(const OptTensor* t, int count, int per_block, Launch&& launch) {
  for_tables_by(t, count, [per_block](const OptTensor& o) { return (o.n + per_block - 1) / per_block; },
                static_cast<Launch&&>(launch));
}

}  // namespace trainlab::kern
