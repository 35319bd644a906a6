// kernels/attention_wgmma.cu: the host side of the warpgroup-MMA attention kernels (forward in
// attention_wgmma.cuh, backward in attention_wgmma_bwd.cuh). This file is compiled for sm_90a
// alone, in a library of its own (kernels/CMakeLists.txt), whatever architectures the rest of the
// kernels are built for: wgmma exists only in sm_90a code. launch_attention_forward / _backward
// (attention.cu) call these first and fall back to the mma.sync kernels wherever they decline.
#include <cmath>
#include <map>
#include <mutex>

#include "attention.cuh"
#include "attention_wgmma.cuh"
#include "attention_wgmma_bwd.cuh"

namespace trainlab::kern {

namespace {
// Whether the current device runs the kernel: compute capability 9.0 (sm_90a code runs there
// only) and the shared-memory opt-in granted. Decided once per device.
bool device_ready() {
  static std::mutex mu;
  static std::map<int, bool> ready;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  std::lock_guard<std::mutex> lock(mu);
  auto it = ready.find(dev);
  if (it != ready.end()) return it->second;
  int major = 0, minor = 0;
  bool ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
            cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess && major == 9 &&
            minor == 0;
  if (ok)
    ok = cudaFuncSetAttribute(attn_wg::fwd_kernel(), cudaFuncAttributeMaxDynamicSharedMemorySize, attn_wg::kFwdSmem) ==
             cudaSuccess &&
         cudaFuncSetAttribute(attn_wg::dkv_kernel(), cudaFuncAttributeMaxDynamicSharedMemorySize, attn_wg::kDkvSmem) ==
             cudaSuccess &&
         cudaFuncSetAttribute(attn_wg::dq_kernel(), cudaFuncAttributeMaxDynamicSharedMemorySize, attn_wg::kDqSmem) ==
             cudaSuccess;
  if (!ok) (void)cudaGetLastError();  // a refused attribute leaves no error behind for later launches
  ready[dev] = ok;
  return ok;
}
}  // namespace

bool launch_attention_forward_wgmma(const void* qkv, int qkv_dt, void* y, int y_dt, float* lse, int64_t B, int64_t T,
                                    int64_t H, int64_t hd, cudaStream_t s) {
  // bf16 at hd 64 with 16-byte aligned rows (qkv rows are 3 * H * 64 elements: aligned with the base).
  if (qkv_dt != kBF16 || hd != 64 || reinterpret_cast<uintptr_t>(qkv) % 16 != 0) return false;
  if (!device_ready()) return false;
  // The same scale, bit for bit, as the mma.sync forward's (attention.cu tc_forward).
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd)), scale_log2 = scale * attn::kLog2e;
  attn_wg::fwd_kernel()<<<attn_wg::fwd_grid(int(B), int(H), int(T)), attn_wg::kFwdThreads, attn_wg::kFwdSmem, s>>>(
      static_cast<const __nv_bfloat16*>(qkv), y, y_dt, lse, int(T), int(H), int(hd), scale_log2, true);
  TL_LAUNCH_CHECK("attention fwd_wg");
  return true;
}

bool launch_attention_backward_wgmma(const void* qkv, int qkv_dt, const void* dy, int dy_dt, const float* lse,
                                     const float* dd, void* dqkv, int dqkv_dt, int64_t B, int64_t T, int64_t H,
                                     int64_t hd, cudaStream_t s) {
  // bf16 at hd 64, qkv and dy both, 16-byte aligned rows (their rows are multiples of 64 elements).
  if (qkv_dt != kBF16 || dy_dt != kBF16 || hd != 64 || reinterpret_cast<uintptr_t>(qkv) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(dy) % 16 != 0)
    return false;
  if (!device_ready()) return false;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));  // as the mma.sync backward's
  const auto* q = static_cast<const __nv_bfloat16*>(qkv);
  const auto* g = static_cast<const __nv_bfloat16*>(dy);
  attn_wg::dkv_kernel()<<<attn_wg::dkv_grid(int(B), int(H), int(T)), attn_wg::kDkvWarpgroups * 128, attn_wg::kDkvSmem,
                          s>>>(q, g, lse, dd, dqkv, dqkv_dt, int(T), int(H), int(hd), scale, true);
  TL_LAUNCH_CHECK("attention bwd_dkv_wg");
  attn_wg::dq_kernel()<<<attn_wg::dq_grid(int(B), int(H), int(T)), attn_wg::kDqWarpgroups * 128, attn_wg::kDqSmem,
                         s>>>(q, g, lse, dd, dqkv, dqkv_dt, int(T), int(H), int(hd), scale, true);
  TL_LAUNCH_CHECK("attention bwd_dq_wg");
  return true;
}

}  // namespace trainlab::kern
