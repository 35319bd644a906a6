// kernels/softmax_xent.cu: see softmax_xent.cuh for the math, layout and precision.
#include "device_common.cuh"
#include "softmax_xent.cuh"

namespace trainlab::kern {

namespace {
constexpr int kThreads = 1024;
constexpr int kRowsPerWarp = 8;  // fast path: rows a warp loads at once (classes <= 32)

// Block b takes rows [b * rows_per_block, (b + 1) * rows_per_block). With part_loss null (one
// block) it writes stats itself; otherwise its sums go to part_loss/part_correct[b] and
// softmax_xent_finish_kernel adds the blocks' sums in block order.
__global__ void __launch_bounds__(kThreads) softmax_xent_kernel(const void* z, int zdt, int64_t rows, int64_t cols,
                                                                 const int32_t* labels, void* dz, int dzdt, float mult,
                                                                 const DevScalars* sc, float* stats, bool accumulate,
                                                                 int64_t rows_per_block, double* part_loss,
                                                                 int* part_correct) {
  const int64_t r_lo = blockIdx.x * rows_per_block;
  rows = r_lo + rows_per_block < rows ? r_lo + rows_per_block : rows;  // this block's end
  __shared__ double s_loss[kThreads / 32];
  __shared__ int s_correct[kThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float scale = mult * (sc ? sc->loss_scale : 1.0f);
  double loss = 0.0;
  int correct = 0;
  if (cols <= 32) {
    // Fast path: lane j holds column j; a warp loads kRowsPerWarp rows (and labels) before it
    // reduces any of them, so the kernel waits on memory about once.
    for (int64_t r0 = r_lo + int64_t(warp) * kRowsPerWarp; r0 < rows; r0 += int64_t(kThreads / 32) * kRowsPerWarp) {
      float v[kRowsPerWarp];
      int32_t lab[kRowsPerWarp];
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        const int64_t r = r0 + i;
        v[i] = (r < rows && lane < cols) ? ld(z, r * cols + lane, zdt) : -INFINITY;
        lab[i] = r < rows ? labels[r] : -1;
      }
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        const int64_t r = r0 + i;
        if (r >= rows) break;
        float mx = v[i];
        int arg = lane < cols ? lane : 1 << 30;
        for (int o = 16; o > 0; o >>= 1) {
          const float om = __shfl_xor_sync(0xffffffffu, mx, o);
          const int oa = __shfl_xor_sync(0xffffffffu, arg, o);
          if (om > mx || (om == mx && oa < arg)) mx = om, arg = oa;
        }
        const float e = lane < cols ? expf(v[i] - mx) : 0.0f;
        float sum = e;
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        const int32_t label = lab[i];
        const bool ok = label >= 0 && label < cols;
        const float zl = __shfl_sync(0xffffffffu, v[i], ok ? label : 0);
        if (lane == 0) {
          loss += static_cast<double>(logf(sum) + mx - (ok ? zl : NAN));
          correct += (ok && arg == label);
        }
        if (dz && lane < cols) st(dz, r * cols + lane, dzdt, (e * (1.0f / sum) - (lane == label ? 1.0f : 0.0f)) * scale);
      }
    }
  } else
  for (int64_t r = r_lo + warp; r < rows; r += kThreads / 32) {
    const int64_t base = r * cols;
    float mx = -INFINITY;
    int64_t arg = 0;
    for (int64_t j = lane; j < cols; j += 32) {
      const float v = ld(z, base + j, zdt);
      if (v > mx) mx = v, arg = j;
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float om = __shfl_xor_sync(0xffffffffu, mx, o);
      const int64_t oa = __shfl_xor_sync(0xffffffffu, arg, o);
      if (om > mx || (om == mx && oa < arg)) mx = om, arg = oa;
    }
    float sum = 0.0f;
    for (int64_t j = lane; j < cols; j += 32) sum += expf(ld(z, base + j, zdt) - mx);
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    const int32_t label = labels[r];
    const bool ok = label >= 0 && label < cols;
    if (lane == 0) {
      const float zl = ok ? ld(z, base + label, zdt) : NAN;
      loss += static_cast<double>(logf(sum) + mx - zl);
      correct += (ok && arg == label);
    }
    if (dz) {
      const float inv = 1.0f / sum;
      for (int64_t j = lane; j < cols; j += 32) {
        const float pj = expf(ld(z, base + j, zdt) - mx) * inv;
        st(dz, base + j, dzdt, (pj - (j == label ? 1.0f : 0.0f)) * scale);
      }
    }
  }
  if (lane == 0) s_loss[warp] = loss, s_correct[warp] = correct;
  __syncthreads();
  if (threadIdx.x == 0) {
    double tl = 0.0;
    int tc = 0;
    for (int w = 0; w < kThreads / 32; ++w) tl += s_loss[w], tc += s_correct[w];
    if (part_loss) {
      part_loss[blockIdx.x] = tl;
      part_correct[blockIdx.x] = tc;
    } else if (accumulate) {
      stats[0] += static_cast<float>(tl);
      stats[1] += static_cast<float>(tc);
    } else {
      stats[0] = static_cast<float>(tl);
      stats[1] = static_cast<float>(tc);
    }
  }
}

__global__ void softmax_xent_finish_kernel(const double* part_loss, const int* part_correct, int blocks, float* stats,
                                           bool accumulate) {
  double tl = 0.0;
  int tc = 0;
  for (int b = 0; b < blocks; ++b) tl += part_loss[b], tc += part_correct[b];
  if (accumulate) {
    stats[0] += static_cast<float>(tl);
    stats[1] += static_cast<float>(tc);
  } else {
    stats[0] = static_cast<float>(tl);
    stats[1] = static_cast<float>(tc);
  }
}

// Rows a block takes when there are many: 256 (a pass of 32 warps x 8 rows), more when that would
// need over kMaxBlocks blocks.
constexpr int64_t kMaxBlocks = 1024;
int64_t rows_per_block(int64_t rows) {
  const int64_t per = (rows + kMaxBlocks - 1) / kMaxBlocks;
  return per <= 256 ? 256 : (per + 255) / 256 * 256;
}
}  // namespace

int64_t softmax_xent_workspace_bytes(int64_t rows) {
  if (rows <= kOneBlockRows) return 0;
  const int64_t blocks = (rows + rows_per_block(rows) - 1) / rows_per_block(rows);
  return blocks * static_cast<int64_t>(sizeof(double) + sizeof(int));
}

void launch_softmax_xent(const void* logits, int logits_dt, int64_t rows, int64_t cols, const int32_t* labels,
                         void* dlogits, int dlogits_dt, float grad_multiplier, const DevScalars* scalars, float* stats,
                         bool accumulate, void* workspace, cudaStream_t s) {
  if (rows <= kOneBlockRows) {
    softmax_xent_kernel<<<1, kThreads, 0, s>>>(logits, logits_dt, rows, cols, labels, dlogits, dlogits_dt,
                                               grad_multiplier, scalars, stats, accumulate, rows, nullptr, nullptr);
    TL_LAUNCH_CHECK("softmax_xent");
    return;
  }
  const int64_t per = rows_per_block(rows);
  const int blocks = static_cast<int>((rows + per - 1) / per);
  double* part_loss = static_cast<double*>(workspace);
  int* part_correct = reinterpret_cast<int*>(part_loss + blocks);
  softmax_xent_kernel<<<blocks, kThreads, 0, s>>>(logits, logits_dt, rows, cols, labels, dlogits, dlogits_dt,
                                                  grad_multiplier, scalars, stats, accumulate, per, part_loss,
                                                  part_correct);
  TL_LAUNCH_CHECK("softmax_xent");
  softmax_xent_finish_kernel<<<1, 1, 0, s>>>(part_loss, part_correct, blocks, stats, accumulate);
  TL_LAUNCH_CHECK("softmax_xent (block sums)");
}

}  // namespace trainlab::kern
