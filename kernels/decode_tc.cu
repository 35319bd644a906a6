// kernels/decode_tc.cu: the batched decode GEMV on tensor cores (decode.cuh, "Batched decoding,
// tensor cores"). Y [batch, rows] = X [batch, cols] W^T for bf16, int8 and int4 weights stored in
// the chunk order of decode_tc_position, summed by mma.sync m16n8k16 (bf16 in, fp32 out).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attention_tiles.cuh"
#include "decode.cuh"
#include "decode_device.cuh"
#include "device_common.cuh"

namespace trainlab::kern {

namespace {

using decode_dev::load_stream;
using Mma = attn::Mma<__nv_bfloat16>;

constexpr int kTcWarps = 8;  // a block: 16 rows, its chunks dealt round 8 warps
constexpr int kTcRows = 16;
constexpr int kTcAhead = 4;  // chunks a warp has in flight

// Two weights as a bf16x2 (low first), exactly: bf16 weights as stored; int8 codes through fp32's
// 2^23 mantissa (decode_device.cuh's Fmt); int4 codes through bf16's 2^7 mantissa.
template <int F>
__device__ __forceinline__ uint32_t pair(const uint4& u, int j, int half);
template <>
__device__ __forceinline__ uint32_t pair<kDecBF16>(const uint4& u, int j, int half) {  // words 2j, 2j + 1
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
  return w[2 * j + half];
}
template <>
__device__ __forceinline__ uint32_t pair<kDecI8>(const uint4& u, int j, int half) {  // word j, bytes 2h, 2h + 1
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
  const uint32_t b = w[j] ^ 0x80808080u;
  const float lo = decode_dev::Fmt<kDecI8>::code(b, 2 * half), hi = decode_dev::Fmt<kDecI8>::code(b, 2 * half + 1);
  return __byte_perm(__float_as_uint(lo), __float_as_uint(hi), 0x7632u);  // the high halves: exact bf16
}
template <>
__device__ __forceinline__ uint32_t pair<kDecI4>(const uint4& u, int j, int half) {  // nibbles 4j + 2h, + 1
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
  const uint32_t b = (w[j >> 1] ^ 0x88888888u) >> (16 * (j & 1) + 8 * half);  // biased by 8
  const uint32_t v = 0x43004300u | (b & 0xFu) | ((b & 0xF0u) << 12);         // bf16x2 of 128 + n
  const __nv_bfloat162 r = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&v), __floats2bfloat162_rn(136.0f, 136.0f));
  return *reinterpret_cast<const uint32_t*>(&r);
}

// x [n][c .. c + 3] as two bf16x2 (hi) and the remainders (lo): x = hi + lo to 2^-16 of x.
__device__ __forceinline__ void split4(const float4 x, uint32_t (&hi)[2], uint32_t (&lo)[2]) {
  const float v[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int p = 0; p < 2; ++p) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(v[2 * p], v[2 * p + 1]);
    const float2 hf = __bfloat1622float2(h);
    const __nv_bfloat162 l = __floats2bfloat162_rn(v[2 * p] - hf.x, v[2 * p + 1] - hf.y);
    hi[p] = *reinterpret_cast<const uint32_t*>(&h);
    lo[p] = *reinterpret_cast<const uint32_t*>(&l);
  }
}

// One chunk's k-steps: A fragments from the two rows' 16-byte loads, x [sequence] at the k-step's
// columns (16 j + 4 t on from chunk c's first), split hi + lo; scaled formats add each k-step's
// sums times the rows' scales of its group.
template <int F, int NT>
__device__ __forceinline__ void chunk_product(const DecodeGemv& g, const uint4& ca, const uint4& cb, int64_t c,
                                              const float* const (&xs)[NT], int64_t ra, int64_t rb, float (&acc)[NT][4]) {
  constexpr bool kScaled = F == kDecI8 || F == kDecI4;
  constexpr int E = F == kDecBF16 ? 8 : F == kDecI8 ? 16 : 32;
#pragma unroll
  for (int j = 0; j < E / 4; ++j) {
    const uint32_t a[4] = {pair<F>(ca, j, 0), pair<F>(cb, j, 0), pair<F>(ca, j, 1), pair<F>(cb, j, 1)};
    const int64_t col = c * 4 * E + 16 * j;
    float step[NT][4] = {};
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const float4 x = xs[nt] ? __ldg(reinterpret_cast<const float4*>(xs[nt] + col)) : make_float4(0.f, 0.f, 0.f, 0.f);
      uint32_t hi[2], lo[2];
      split4(x, hi, lo);
      Mma::run(kScaled ? step[nt] : acc[nt], a, hi[0], hi[1]);
      Mma::run(kScaled ? step[nt] : acc[nt], a, lo[0], lo[1]);
    }
    if constexpr (kScaled) {
      const int64_t grp = col / g.group, per_row = g.cols / g.group;
      const auto* sc = static_cast<const __half*>(g.scales);
      const float sa = __half2float(sc[ra * per_row + grp]), sb = __half2float(sc[rb * per_row + grp]);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        acc[nt][0] += sa * step[nt][0], acc[nt][1] += sa * step[nt][1];
        acc[nt][2] += sb * step[nt][2], acc[nt][3] += sb * step[nt][3];
      }
    }
  }
}

// Block: rows [16 b, 16 b + 16); warp w takes chunks w, w + 8, ... (a chunk: 64 bytes of each of
// the 16 rows, 4E weights). In a chunk, thread (g = lane / 4, t = lane % 4) loads 16 bytes of rows
// g and g + 8 at t * 16 bytes: k-step j's fragments for columns 16 j + 4 t .. + 3 (decode.cuh), with
// x [sequence nt * 8 + g] at those columns (NT tiles of 8 sequences). Scaled formats sum each
// k-step apart and add it times the rows' scales of its group. The warps' sums meet in shared
// memory, added in warp order; warp 0 applies the epilogue. Each warp keeps kTcAhead chunks'
// loads in flight.
template <int F, int NT>
__global__ void __launch_bounds__(kTcWarps * 32) decode_gemv_tc_kernel(DecodeGemv g) {
  __shared__ float part[kTcWarps][NT][4][32];
  __shared__ int32_t position;
  constexpr int E = F == kDecBF16 ? 8 : F == kDecI8 ? 16 : 32;  // weights per 16-byte load
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gq = lane >> 2, t = lane & 3;
  const int64_t K = g.cols, chunks = K / (4 * E), r0 = int64_t{blockIdx.x} * kTcRows;
  const int64_t ra = min(r0 + gq, g.rows - 1), rb = min(r0 + gq + 8, g.rows - 1);
  const uint4* wa = reinterpret_cast<const uint4*>(g.w) + ra * (K / E) + t;
  const uint4* wb = reinterpret_cast<const uint4*>(g.w) + rb * (K / E) + t;
  const float* xs[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int n = nt * 8 + gq;
    xs[nt] = n < g.batch ? g.x + int64_t{n} * K + 4 * t : nullptr;
  }
  float acc[NT][4] = {};
  uint4 ua[kTcAhead], ub[kTcAhead];  // chunk warp + 8 (i + p kTcAhead) waits in slot p
#pragma unroll
  for (int p = 0; p < kTcAhead; ++p) {
    const int64_t c = warp + int64_t{p} * kTcWarps;
    ua[p] = c < chunks ? load_stream(wa + 4 * c) : uint4{}, ub[p] = c < chunks ? load_stream(wb + 4 * c) : uint4{};
  }
  // The block's biases into L2, which also keeps the loads above before the wait.
  if (g.bias) decode_dev::prefetch_l2_strided(g.bias, r0 + threadIdx.x, 0, min(r0 + kTcRows, g.rows), blockDim.x);
  decode_dev::wait_for_previous_grid();  // the weights above do not depend on earlier kernels
  if (threadIdx.x == 0) position = g.state ? g.state[1] : 0;
  for (int64_t c0 = warp; c0 < chunks; c0 += int64_t{kTcAhead} * kTcWarps) {
#pragma unroll
    for (int p = 0; p < kTcAhead; ++p) {
      const int64_t c = c0 + int64_t{p} * kTcWarps, next = c + int64_t{kTcAhead} * kTcWarps;
      if (c >= chunks) break;
      const uint4 ca = ua[p], cb = ub[p];
      if (next < chunks) ua[p] = load_stream(wa + 4 * next), ub[p] = load_stream(wb + 4 * next);
      chunk_product<F, NT>(g, ca, cb, c, xs, ra, rb, acc);
    }
  }
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) part[warp][nt][i][lane] = acc[nt][i];
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float v = part[0][nt][i][lane];
      for (int w = 1; w < kTcWarps; ++w) v += part[w][nt][i][lane];
      const int64_t row = r0 + gq + (i >= 2 ? 8 : 0);  // accumulator i: row g (0, 1) or g + 8 (2, 3)
      const int n = nt * 8 + 2 * t + (i & 1);           // and sequence 2 t + (i & 1) of the tile
      if (row < g.rows && n < g.batch) decode_dev::gemv_epilogue(g, row, v, position, n);
    }
}

template <int F>
void launch_tc(const DecodeGemv& g, const cudaLaunchConfig_t& cfg) {
  if (g.batch <= 8) TL_CUDA_CHECK(cudaLaunchKernelEx(&cfg, decode_gemv_tc_kernel<F, 1>, g));
  else TL_CUDA_CHECK(cudaLaunchKernelEx(&cfg, decode_gemv_tc_kernel<F, 2>, g));
}

}  // namespace

bool decode_tc_layout_fits(int format, int64_t cols, int64_t group) {
  if (format != kDecBF16 && format != kDecI8 && format != kDecI4) return false;
  const int64_t chunk = 4 * decode_weights_per_load(format);
  return cols % chunk == 0 && (format == kDecBF16 || group % 16 == 0);
}

void launch_decode_gemv_tc(const DecodeGemv& g, bool pdl, cudaStream_t s) {
  if (g.batch < 1 || g.batch > kMaxBatch || !decode_tc_layout_fits(g.format, g.cols, g.group))
    throw_cuda_error(cudaErrorInvalidValue, "decode_gemv_tc: batch 1..16, a tensor-core layout", __FILE__, __LINE__);
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>((g.rows + kTcRows - 1) / kTcRows));
  cfg.blockDim = dim3(kTcWarps * 32);
  cfg.stream = s;
  cfg.attrs = pdl ? &attr : nullptr;
  cfg.numAttrs = pdl ? 1 : 0;
  switch (g.format) {
    case kDecBF16: launch_tc<kDecBF16>(g, cfg); break;
    case kDecI8: launch_tc<kDecI8>(g, cfg); break;
    default: launch_tc<kDecI4>(g, cfg); break;
  }
  TL_LAUNCH_CHECK("decode_gemv_tc");
}

}  // namespace trainlab::kern
