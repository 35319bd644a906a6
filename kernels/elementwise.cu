// kernels/elementwise.cu: see elementwise.cuh for the math, layout and precision.
#include "device_common.cuh"
#include "elementwise.cuh"

#include <vector>

namespace trainlab::kern {

namespace {
__global__ void convert_kernel(const void* src, int sdt, void* dst, int ddt, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    st(dst, i, ddt, ld(src, i, sdt));
}
__global__ void fill_kernel(void* dst, int dt, float v, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    st(dst, i, dt, v);
}
__global__ void act_fwd_kernel(int act, const void* x, int xdt, void* y, int ydt, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float v = ld(x, i, xdt);
    st(y, i, ydt, act == 1 ? (v > 0.0f ? v : 0.0f) : act == 2 ? gelu_f(v) : v);
  }
}
__global__ void act_bwd_kernel(int act, const void* x, int xdt, const void* dy, int dydt, void* dx, int dxdt, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float v = ld(x, i, xdt);
    const float d = act == 1 ? (v > 0.0f ? 1.0f : 0.0f) : act == 2 ? gelu_grad_f(v) : 1.0f;
    st(dx, i, dxdt, ld(dy, i, dydt) * d);
  }
}
__global__ void bias_act_kernel(void* y, int ydt, const void* bias, int bdt, int64_t rows, int64_t cols, int act) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    float v = ld(y, i, ydt);
    if (bias) v = round_fmt(v + ld(bias, i % cols, bdt), ydt);
    st(y, i, ydt, act == 1 ? (v > 0.0f ? v : 0.0f) : act == 2 ? gelu_f(v) : v);
  }
}
template <class W>
__global__ void gather_kernel(const W* src, int64_t src_rows, int64_t words, const int32_t* idx, int64_t rows, W* dst) {
  const int64_t total = rows * words;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / words, w = i % words;
    const int32_t s = idx[r];
    dst[i] = (s >= 0 && s < src_rows) ? src[s * words + w] : W{};
  }
}
struct GatherJobs {
  GatherJob j[kMaxGatherJobs];
  int64_t first[kMaxGatherJobs + 1];
  int count;
};
__global__ void gather_multi_kernel(GatherJobs jobs, DevScalars* sc_dst, DevScalars sc, int write_sc) {
  if (write_sc && blockIdx.x == 0 && threadIdx.x == 0) *sc_dst = sc;
  const int64_t total = jobs.first[jobs.count];
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    int q = 0;
    while (q + 1 < jobs.count && i >= jobs.first[q + 1]) ++q;
    const GatherJob& g = jobs.j[q];
    const int64_t e = i - jobs.first[q], r = e / g.words, w = e % g.words;
    const int32_t s = g.idx[r];
    const uint32_t v = (s >= 0 && s < g.src_rows) ? g.src[s * g.words + w] : 0u;
    g.dst[e] = v;
    if (g.dst2) st(g.dst2, e, g.dst2_dt, __uint_as_float(v));
  }
}
}  // namespace

void launch_gather_multi(const GatherJob* jobs, int count, DevScalars* scalars_dst, const DevScalars* scalars,
                         cudaStream_t s) {
  GatherJobs b{};
  b.count = count;
  int64_t total = 0;
  for (int q = 0; q < count; ++q) {
    b.j[q] = jobs[q];
    b.first[q] = total;
    total += jobs[q].rows * jobs[q].words;
  }
  b.first[count] = total;
  if (total <= 0 && !scalars) return;
  const DevScalars v = scalars ? *scalars : DevScalars{};
  gather_multi_kernel<<<blocks_for(total, 256, 1024), 256, 0, s>>>(b, scalars_dst, v, scalars ? 1 : 0);
  TL_LAUNCH_CHECK("gather_multi");
}

bool find_scalar_gather_node(cudaGraph_t graph, cudaGraphNode_t* node) {
  size_t n = 0;
  TL_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  if (n) TL_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &n));
  for (cudaGraphNode_t nd : nodes) {
    cudaGraphNodeType t;
    TL_CUDA_CHECK(cudaGraphNodeGetType(nd, &t));
    if (t != cudaGraphNodeTypeKernel) continue;
    cudaKernelNodeParams p{};
    TL_CUDA_CHECK(cudaGraphKernelNodeGetParams(nd, &p));
    if (p.func != reinterpret_cast<void*>(&gather_multi_kernel)) continue;
    if (*static_cast<int*>(p.kernelParams[3]) != 1) continue;
    *node = nd;
    return true;
  }
  return false;
}

void set_scalar_gather_node(cudaGraphExec_t exec, cudaGraphNode_t node, const DevScalars& v) {
  cudaKernelNodeParams p{};
  TL_CUDA_CHECK(cudaGraphKernelNodeGetParams(node, &p));
  GatherJobs jobs = *static_cast<GatherJobs*>(p.kernelParams[0]);
  DevScalars* dst = *static_cast<DevScalars**>(p.kernelParams[1]);
  DevScalars sc = v;
  int write = 1;
  void* args[4] = {&jobs, &dst, &sc, &write};
  p.kernelParams = args;
  p.extra = nullptr;
  TL_CUDA_CHECK(cudaGraphExecKernelNodeSetParams(exec, node, &p));
}

void launch_convert(const void* src, int src_dt, void* dst, int dst_dt, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  convert_kernel<<<blocks_for(n, 256), 256, 0, s>>>(src, src_dt, dst, dst_dt, n);
  TL_LAUNCH_CHECK("convert");
}
void launch_fill(void* dst, int dt, float value, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  fill_kernel<<<blocks_for(n, 256), 256, 0, s>>>(dst, dt, value, n);
  TL_LAUNCH_CHECK("fill");
}
void launch_activation_forward(int act, const void* x, int x_dt, void* y, int y_dt, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  act_fwd_kernel<<<blocks_for(n, 256), 256, 0, s>>>(act, x, x_dt, y, y_dt, n);
  TL_LAUNCH_CHECK("activation_forward");
}
void launch_activation_backward(int act, const void* x, int x_dt, const void* dy, int dy_dt, void* dx, int dx_dt,
                                int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  act_bwd_kernel<<<blocks_for(n, 256), 256, 0, s>>>(act, x, x_dt, dy, dy_dt, dx, dx_dt, n);
  TL_LAUNCH_CHECK("activation_backward");
}
void launch_bias_act(void* y, int y_dt, const void* bias, int bias_dt, int64_t rows, int64_t cols, int act,
                     cudaStream_t s) {
  if (rows * cols <= 0) return;
  bias_act_kernel<<<blocks_for(rows * cols, 256), 256, 0, s>>>(y, y_dt, bias, bias_dt, rows, cols, act);
  TL_LAUNCH_CHECK("bias_act");
}
void launch_gather_rows(const void* src, int64_t src_rows, int64_t row_bytes, const int32_t* idx, int64_t rows,
                        void* dst, cudaStream_t s) {
  if (rows <= 0 || row_bytes <= 0) return;
  if (row_bytes % 16 == 0) {
    const int64_t words = row_bytes / 16;
    gather_kernel<int4><<<blocks_for(rows * words, 256), 256, 0, s>>>(static_cast<const int4*>(src), src_rows, words, idx,
                                                                      rows, static_cast<int4*>(dst));
  } else if (row_bytes % 4 == 0) {
    const int64_t words = row_bytes / 4;
    gather_kernel<int32_t><<<blocks_for(rows * words, 256), 256, 0, s>>>(static_cast<const int32_t*>(src), src_rows,
                                                                         words, idx, rows, static_cast<int32_t*>(dst));
  } else {
    gather_kernel<uint8_t><<<blocks_for(rows * row_bytes, 256), 256, 0, s>>>(static_cast<const uint8_t*>(src), src_rows,
                                                                            row_bytes, idx, rows, static_cast<uint8_t*>(dst));
  }
  TL_LAUNCH_CHECK("gather_rows");
}

}  // namespace trainlab::kern
