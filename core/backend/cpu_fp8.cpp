// MatmulMode::Fp8 on the CPU: the fp8 products of a linear layer emulated exactly as the CUDA
// backend computes them on fp8 units (backend/cuda/fp8_gemm.h):
//   forward   y  = act((fp8_e4m3(x sx) fp8_e4m3(w sw)^T) / (sx sw) + b)
//   backward  g  = dy relu'(y) (bf16, as stored);  dW (+)= (fp8_e5m2(g sg)^T fp8_e4m3(x sx)) / (sg sx)
//             dx = (fp8_e5m2(g sg) fp8_e4m3(w sw)) / (sg sw);  dbias from the bf16 g
// with the per-tensor scales sx, sw, sg of tensor/fp8_scaling.h's delayed scaling (the same
// functions as the CUDA kernel), the same casts (tensor/dtype.h: the codes of CUDA's
// __nv_cvt_float_to_fp8) and the same layers in fp8 (fp8_linear_eligible; the rest in bf16).
// The casts happen as the panels of the product are loaded (cpu_panels.h's Fp8Cast), so no fp8
// copy of a tensor is kept; the same pass gathers each cast tensor's maximum for its history,
// recorded after the product (fp8_record: the step's scale was taken before, so the order changes
// nothing). Products of fp8 values are exact in fp32 and accumulate in fp32 (the order of the
// additions is OpenBLAS's, not cuBLASLt's: the results agree to fp32 rounding).
#include <algorithm>
#include <bit>
#include <cmath>

#include "backend/cpu_fp8.h"

#include "backend/cpu_backend.h"
#include "backend/per_weight.h"

namespace trainlab {

using cpu::Fp8Cast;

float cpu::fp8_tiled_amax(const Tensor& t) {
  constexpr int64_t kTile = kFp8AmaxTile, kChunk = 32 * kTile;
  const int64_t rows = t.dim(0), cols = t.numel() / std::max<int64_t>(rows, 1);
  float buf[kChunk], tile_max[kChunk / kTile];
  float amax = 0.0f;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    for (int64_t c0 = 0; c0 < cols; c0 += kChunk) {
      const int64_t len = std::min(kChunk, cols - c0), tiles = (len + kTile - 1) / kTile;
      std::fill_n(tile_max, tiles, 0.0f);
      for (int64_t r = r0; r < std::min(rows, r0 + kTile); ++r) {
        cpu::to_f32(t.dtype(), cpu::elem_ptr(t, r * cols + c0), buf, static_cast<size_t>(len));
        for (int64_t j = 0; j < len; ++j) {  // NaN fails the comparison: ignored, as fmaxf does
          const float a = std::fabs(buf[j]);
          tile_max[j / kTile] = a > tile_max[j / kTile] ? a : tile_max[j / kTile];
        }
      }
      for (int64_t i = 0; i < tiles; ++i)
        if (fp8_amax_recordable(tile_max[i])) amax = std::max(amax, tile_max[i]);
    }
  }
  return amax;
}

float cpu::fp8_cast_scale(float* history, float step, bool e4m3, const Tensor& t) {
  const float scale = fp8_delayed_scale(history, step, fp8_format_max(e4m3));
  fp8_record_amax(history, step, fp8_tiled_amax(t));
  return scale;
}

namespace {
// A cast with the delayed scale of history h (recording nothing yet): its maximum is gathered in
// `seen` as the product loads it.
Fp8Cast delayed_cast(const float* h, float step, bool e4m3, uint32_t& seen) {
  seen = 0;
  return Fp8Cast{e4m3 ? DType::F8E4M3 : DType::F8E5M2, fp8_delayed_scale(h, step, fp8_format_max(e4m3)), &seen};
}
}  // namespace

void CpuBackend::fp8_record(const Fp8Product& p, const Tensor& a, const Tensor& b) {
  const auto record = [&](int i, const Tensor& t) {
    if (!p.active || i < 0) return;
    const uint32_t bits = p.layer->seen[i];
    const float amax = bits >= 0x7F800000u ? cpu::fp8_tiled_amax(t) : std::bit_cast<float>(bits);
    fp8_record_amax(p.layer->history[i], m_scalars.step, amax);
  };
  record(p.record_a, a);
  record(p.record_b, b);
}

CpuBackend::Fp8Product CpuBackend::fp8_forward_product(const Tensor& x, const Tensor& w, const Tensor* bias,
                                                       Activation act, const Tensor& y, const Tensor* pre) {
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  if (!fp8_linear_eligible(m, k, n, act == Activation::GELU, pre != nullptr)) return {};
  if (y.dtype() != DType::BF16 || (bias && bias->dtype() != DType::BF16)) return {};
  Fp8LayerState& L = per_weight_state(m_fp8_layers, w);
  const float step = m_scalars.step;
  Fp8Product p;
  p.active = true;
  p.a = delayed_cast(L.history[0], step, true, L.seen[0]);
  p.b = delayed_cast(L.history[1], step, true, L.seen[1]);
  L.scale[0] = p.a.scale;
  L.scale[1] = p.b.scale;
  p.alpha = (1.0f / L.scale[1]) * (1.0f / L.scale[0]);
  p.layer = &L;
  p.record_a = 0;
  p.record_b = 1;
  return p;
}

std::pair<CpuBackend::Fp8Product, CpuBackend::Fp8Product> CpuBackend::fp8_backward_products(
    const Tensor& x, const Tensor& w, const Tensor& g, Activation act, const Tensor& dw, const Tensor* dx) {
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  Fp8LayerState* found = per_weight_find(m_fp8_layers, w);
  if (!found || !fp8_linear_eligible(m, k, n, act == Activation::GELU, false)) return {};
  if (g.dtype() != DType::BF16 || dw.dtype() != DType::BF16 || (dx && dx->dtype() != DType::BF16)) return {};
  Fp8LayerState& L = *found;
  const Fp8Cast cg = delayed_cast(L.history[2], m_scalars.step, false, L.seen[2]);
  L.scale[2] = cg.scale;
  const float inv_g = 1.0f / L.scale[2];
  Fp8Product for_dw, for_dx;  // dw = g^T x, dx = g w; g's maximum recorded after dw's product
  for_dw.active = for_dx.active = true;
  for_dw.a = for_dx.a = cg;
  for_dw.b = Fp8Cast{DType::F8E4M3, L.scale[0]};
  for_dx.b = Fp8Cast{DType::F8E4M3, L.scale[1]};
  for_dw.alpha = (1.0f / L.scale[0]) * inv_g;
  for_dx.alpha = (1.0f / L.scale[1]) * inv_g;
  for_dw.layer = for_dx.layer = &L;
  for_dw.record_a = 2;
  return {for_dw, for_dx};
}

}  // namespace trainlab
