// kernels/decode_attention.cu: single-query attention of the kernel-per-operation decoder
// (decode.cuh, "Attention"), one sequence, a batch of them or verification rows.
//
// A head's positions [0, len) split into runs = ceil(len / 128) equal runs, one block of 512
// threads a run (grid: heads x most runs x sequences; blocks past the runs of this length return
// at once), so that the split depends on the length alone (a verification row splits as the push
// at its position). Most of a run's keys and values were written by earlier steps: they are loaded
// into registers before the kernel waits for the previous one (programmatic dependent launch),
// and only q and the rows of this step's positions (written by the qkv GEMV just before) are read
// after it. Scores: a warp a key, 8 keys a warp; then the run's max m, e_j = exp(s_j - m),
// l = sum e_j and sum e_j v_j (a thread a 4-channel slice of a group of keys, the groups' sums
// added in order). One run writes y = sum e_j v_j / l; several store their sums, max and l, and
// the block that takes the head's last ticket combines them in run order (decode_dev::
// attention_combine: y = sum_r exp(m_r - M) acc_r / sum_r exp(m_r - M) l_r). Deterministic.
#include <algorithm>

#include "decode.cuh"
#include "decode_device.cuh"

namespace trainlab::kern {

namespace {

using namespace decode_dev;

constexpr int kWarps = kAttnThreads / 32;
constexpr int kKeysPerWarp = kAttnRunKeys / kWarps;  // a run's keys a warp
constexpr int kValueKeys = 8;                         // value rows a thread holds from before the wait

// M: float4 slices of a head a lane (head dim <= 128 M).
template <int M>
__global__ void __launch_bounds__(kAttnThreads, 1) decode_attention_kernel(DecodeAttention a) {
  __shared__ float sc[kAttnRunKeys];       // scores, then exponentials; the runs' weights when combining
  __shared__ float4 part4[kAttnThreads];   // [groups, hd / 4] the groups' sums
  __shared__ float red[32];
  const int64_t z = blockIdx.z, h = blockIdx.x, r = blockIdx.y;
  if (z > 0) {  // sequence z of a batch (decode.cuh)
    a.q += z * a.dim, a.y += z * a.dim, a.k += z * a.kv_stride, a.v += z * a.kv_stride;
    a.part += z * a.splits * a.dim, a.stats += z * a.splits * a.heads * 2, a.tickets += z * a.heads;
  }
  // The position comes from the step's first kernel, long finished: read before the wait.
  const int64_t fresh = __ldcg(a.state + 1), len = fresh + z * a.pos_step + 1;
  const int64_t runs = (len + kAttnRunKeys - 1) / kAttnRunKeys;
  if (r >= runs) return;
  const int64_t run = (len + runs - 1) / runs, j0 = r * run, n = min(len, j0 + run) - j0;
  const int64_t hd = a.dim / a.heads, hd4 = hd / 4, off = h * hd;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const auto krow = [&](int64_t j) { return reinterpret_cast<const float4*>(a.k + (j0 + j) * a.dim + off); };
  const auto vrow = [&](int64_t j) { return reinterpret_cast<const float4*>(a.v + (j0 + j) * a.dim + off); };
  // Keys j = warp + 16 t; values: group gi (of `groups`) takes keys gi, gi + groups, ...
  const int64_t groups = kAttnThreads / hd4, gi = threadIdx.x / hd4, c4 = threadIdx.x % hd4;
  float4 kr[kKeysPerWarp][M], vr[kValueKeys];
  const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
  for (int t = 0; t < kKeysPerWarp; ++t) {
    const int64_t j = warp + int64_t{kWarps} * t;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const int64_t c = lane + 32 * m;
      kr[t][m] = j < n && c < hd4 && j0 + j < fresh ? __ldcg(krow(j) + c) : zero;
    }
  }
#pragma unroll
  for (int t = 0; t < kValueKeys; ++t) {
    const int64_t j = gi + groups * t;
    vr[t] = gi < groups && j < n && j0 + j < fresh ? __ldcg(vrow(j) + c4) : zero;
  }
  wait_for_previous_grid();
  // After the wait: q, and the rows at positions >= fresh (this step's).
  float4 q[M];
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const int64_t c = lane + 32 * m;
    q[m] = c < hd4 ? __ldcg(reinterpret_cast<const float4*>(a.q + off) + c) : zero;
  }
#pragma unroll
  for (int t = 0; t < kKeysPerWarp; ++t) {
    const int64_t j = warp + int64_t{kWarps} * t;
    if (j < n && j0 + j >= fresh)
#pragma unroll
      for (int m = 0; m < M; ++m)
        if (lane + 32 * m < hd4) kr[t][m] = __ldcg(krow(j) + lane + 32 * m);
  }
#pragma unroll
  for (int t = 0; t < kValueKeys; ++t) {
    const int64_t j = gi + groups * t;
    if (gi < groups && j < n && j0 + j >= fresh) vr[t] = __ldcg(vrow(j) + c4);
  }
#pragma unroll
  for (int t = 0; t < kKeysPerWarp; ++t) {
    const int64_t j = warp + int64_t{kWarps} * t;
    if (j >= n) break;  // (uniform over the warp)
    float dot = 0.0f;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float4 x = kr[t][m], y = q[m];
      dot += x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w;
    }
    for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    if (lane == 0) sc[j] = dot * a.scale;
  }
  __syncthreads();
  float mx = threadIdx.x < n ? sc[threadIdx.x] : -INFINITY;  // n <= 128 < the block
  mx = block_all_reduce<true>(mx, red);
  float e = 0.0f;
  if (threadIdx.x < n) sc[threadIdx.x] = e = expf(sc[threadIdx.x] - mx);
  const float sum = block_all_reduce<false>(e, red);  // (its barriers also publish sc)
  if (gi < groups) {
    float4 acc = zero;
#pragma unroll
    for (int t = 0; t < kValueKeys; ++t) {
      const int64_t j = gi + groups * t;
      if (j >= n) break;
      const float p = sc[j];
      acc.x += p * vr[t].x, acc.y += p * vr[t].y, acc.z += p * vr[t].z, acc.w += p * vr[t].w;
    }
    for (int64_t j = gi + groups * kValueKeys; j < n; j += groups) {  // heads over 128: more keys a group
      const float p = sc[j];
      const float4 v = __ldcg(vrow(j) + c4);
      acc.x += p * v.x, acc.y += p * v.y, acc.z += p * v.z, acc.w += p * v.w;
    }
    part4[gi * hd4 + c4] = acc;
  }
  __syncthreads();
  const float* part = reinterpret_cast<const float*>(part4);
  float* mine = a.part + (h * a.splits + r) * hd;
  for (int64_t c = threadIdx.x; c < hd; c += kAttnThreads) {
    float acc = 0.0f;
    for (int64_t g = 0; g < groups; ++g) acc += part[g * hd + c];
    if (runs == 1) a.y[off + c] = acc / sum;
    else mine[c] = acc;
  }
  if (runs == 1) return;
  if (attention_run_done(a, h, r, runs, mx, sum, false)) attention_combine(a, h, runs, sc, red);
}

}  // namespace

void prepare_decode_attention() {
  same_carveout(decode_attention_kernel<1>);
  same_carveout(decode_attention_kernel<2>);
}

void launch_decode_attention(const DecodeAttention& a, bool pdl, cudaStream_t s) {
  const int64_t most = (a.context + kAttnRunKeys - 1) / kAttnRunKeys;  // runs at the full context
  if (most > a.splits || most > kAttnRunKeys)
    throw_cuda_error(cudaErrorInvalidValue, "decode_attention: more runs than the scratch or the combination holds", __FILE__, __LINE__);
  const cudaLaunchConfig_t cfg =
      launch_config(dim3(static_cast<unsigned>(a.heads), static_cast<unsigned>(most), static_cast<unsigned>(a.batch)),
                    dim3(kAttnThreads), 0, s, pdl);
  if (a.dim / a.heads <= 128) TL_CUDA_CHECK(cudaLaunchKernelEx(&cfg, decode_attention_kernel<1>, a));
  else TL_CUDA_CHECK(cudaLaunchKernelEx(&cfg, decode_attention_kernel<2>, a));
  TL_LAUNCH_CHECK("decode_attention");
}

}  // namespace trainlab::kern
