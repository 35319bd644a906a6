// CudaDecoder (see cuda_decoder.h) and CudaBackend::create_decoder.
#include "backend/cuda/cuda_decoder.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "backend/cuda/cuda_backend.h"
#include "tensor/quant_format.h"
#include "decode.cuh"
#include "tensor/dtype.h"
#include "util/error.h"

namespace trainlab::cuda {

using namespace trainlab::kern;

namespace {
// Bytes of a matrix in its format: codes or values, fp16 scales, fp32 bias.
int64_t matrix_bytes(int format, int64_t rows, int64_t cols, int64_t group, bool bias) {
  const int64_t n = rows * cols;
  const int64_t codes = format == kDecF32 ? 4 * n : format == kDecBF16 ? 2 * n : format == kDecI8 ? n : n / 2;
  return codes + (group > 0 ? 2 * (n / group) : 0) + (bias ? 4 * rows : 0);
}
int kernel_format(DecodeFormat f) {
  switch (f) {
    case DecodeFormat::F32: return kDecF32;
    case DecodeFormat::BF16: return kDecBF16;
    case DecodeFormat::I8: return kDecI8;
    case DecodeFormat::I4: return kDecI4;
  }
  return kDecF32;
}

// A matrix's elements (rows of `cols`) in the tensor-core order of the batched GEMV: position p
// of a row holds column decode_tc_column(format, p) (kernels/decode.cuh).
template <class T>
std::vector<T> tc_order(const std::vector<T>& a, int format, int64_t cols) {
  std::vector<T> out(a.size());
  for (size_t r = 0; r < a.size(); r += static_cast<size_t>(cols))
    for (int64_t p = 0; p < cols; ++p) out[r + static_cast<size_t>(p)] = a[r + static_cast<size_t>(decode_tc_column(format, p))];
  return out;
}
}  // namespace

std::unique_ptr<TokenDecoder> CudaBackend::create_decoder(const DecodeWeights& weights, const DecodeSpec& spec) {
  bind();
  return std::make_unique<CudaDecoder>(m_ctx.device, weights, spec);
}

CudaDecoder::CudaDecoder(int device, const DecodeWeights& w, const DecodeSpec& spec)
    : m_shape(w.shape), m_spec(spec), m_device(device), m_batch(spec.batch), m_rows(spec.verify_rows) {
  w.validate();
  if (m_batch < 1 || m_batch > kMaxBatch)
    throw Error("GPU decoding: batch " + std::to_string(m_batch) + ", expected 1.." + std::to_string(kMaxBatch) + " sequences");
  if (m_rows < 1 || m_rows > kMaxBatch)
    throw Error("GPU decoding: " + std::to_string(m_rows) + " verification rows, expected 1.." + std::to_string(kMaxBatch));
  if (m_rows > 1 && m_batch > 1)
    throw Error("GPU decoding: verification rows (" + std::to_string(m_rows) + ") continue one sequence, not a batch of " +
                std::to_string(m_batch));
  m_width = std::max(m_batch, m_rows);
  if (m_width > 1) m_spec.one_kernel = false;  // the one-kernel step decodes one sequence, one row
  m_execs.assign(static_cast<size_t>(m_width + 1), nullptr);
  const int64_t D = m_shape.dim, hd = D / m_shape.heads;
  if (hd > 256 || hd % 4 != 0)
    throw Error("GPU decoding: head dimension " + std::to_string(hd) + " must be a multiple of 4 and at most 256");
  if (4 * D * 4 > 48 * 1024) throw Error("GPU decoding: dim " + std::to_string(D) + " is too wide (at most 3072)");
  if (spec.format == DecodeFormat::I4 && spec.quant.bits > 4)
    throw Error("GPU decoding: " + std::to_string(spec.quant.bits) + "-bit codes do not fit the int4 format");
  TL_CUDA_CHECK(cudaSetDevice(device));
  TL_CUDA_CHECK(cudaDeviceGetAttribute(&m_sms, cudaDevAttrMultiProcessorCount, device));
  TL_CUDA_CHECK(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking));
  prepare_decode_kernels();
  TL_CUDA_CHECK(cudaEventCreate(&m_step_start));
  TL_CUDA_CHECK(cudaEventCreate(&m_step_stop));
  try {
    m_tok = upload_f32(w.at("tok.weight"));
    m_pos = upload_f32(w.at("pos.weight"));
    m_ln_w = upload_f32(w.at("ln.weight"));
    m_ln_b = upload_f32(w.at("ln.bias"));
    m_weight_bytes = (2 * D + 2 * D) * 4;  // two embedding rows, the final LayerNorm
    m_head = upload_matrix(w, "head.weight", "");
    for (int64_t l = 0; l < m_shape.layers; ++l) {
      const std::string p = "blocks." + std::to_string(l) + ".";
      Layer L{};
      L.ln1_w = upload_f32(w.at(p + "ln1.weight"));
      L.ln1_b = upload_f32(w.at(p + "ln1.bias"));
      L.ln2_w = upload_f32(w.at(p + "ln2.weight"));
      L.ln2_b = upload_f32(w.at(p + "ln2.bias"));
      m_weight_bytes += 4 * D * 4;
      L.qkv = upload_matrix(w, p + "qkv.weight", p + "qkv.bias");
      L.proj = upload_matrix(w, p + "proj.weight", p + "proj.bias");
      L.fc = upload_matrix(w, p + "fc.weight", p + "fc.bias");
      L.out = upload_matrix(w, p + "out.weight", p + "out.bias");
      const size_t cache = static_cast<size_t>(m_batch * m_shape.context * D) * sizeof(float);
      L.k = static_cast<float*>(device_alloc(cache));
      L.v = static_cast<float*>(device_alloc(cache));
      TL_CUDA_CHECK(cudaMemset(L.k, 0, cache));
      TL_CUDA_CHECK(cudaMemset(L.v, 0, cache));
      m_layers.push_back(L);
    }
    const int64_t V = m_shape.padded_vocab;
    const auto BD = static_cast<size_t>(m_width * D), nstate = static_cast<size_t>(2 + m_width);
    m_x = static_cast<float*>(device_alloc(BD * 4));
    m_q = static_cast<float*>(device_alloc(BD * 4));
    m_att = static_cast<float*>(device_alloc(BD * 4));
    m_f = static_cast<float*>(device_alloc(4 * BD * 4));
    m_h = static_cast<float*>(device_alloc(BD * 4));
    m_state_dev = static_cast<int32_t*>(device_alloc(nstate * sizeof(int32_t)));
    TL_CUDA_CHECK(cudaMemset(m_state_dev, 0, nstate * sizeof(int32_t)));
    m_attn.heads = m_shape.heads, m_attn.dim = D, m_attn.context = m_shape.context;
    m_attn.scale = 1.0f / std::sqrt(static_cast<float>(hd));  // as the CPU generator
    // A batch shares the SMs: about two blocks an SM over all sequences' heads.
    // (A fixed split whatever the rows of a step: a verification row's sums are a push's.)
    m_attn.splits = decode_attention_splits(m_shape.heads, m_shape.context, std::max(1, m_sms / m_width));
    m_attn.batch = m_width;
    m_attn.kv_stride = m_rows > 1 ? 0 : m_shape.context * D;  // verification rows share one cache
    m_attn.pos_step = m_rows > 1 ? 1 : 0;
    const int64_t scratch = m_width * decode_attention_scratch_floats(m_shape.heads, D, m_attn.splits);
    m_attn.part = static_cast<float*>(device_alloc(static_cast<size_t>(scratch) * sizeof(float)));
    m_attn.stats = m_attn.part + m_width * m_attn.splits * D;
    const auto tickets = static_cast<size_t>(m_width * m_shape.heads) * sizeof(unsigned);
    m_attn.tickets = static_cast<unsigned*>(device_alloc(tickets));
    TL_CUDA_CHECK(cudaMemset(m_attn.tickets, 0, tickets));
    m_attn.state = m_state_dev;
    // Mapped pinned memory: the first kernel reads the token and position from it and the last
    // writes the logits into it, so a step needs no copies of its own.
    TL_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&m_state_host), nstate * sizeof(int32_t), cudaHostAllocMapped));
    std::fill(m_state_host, m_state_host + nstate, 0);
    TL_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&m_logits_host), static_cast<size_t>(m_width * V) * 4, cudaHostAllocMapped));
    TL_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&m_state_mapped), m_state_host, 0));
    TL_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&m_logits_mapped), m_logits_host, 0));
    m_logits.assign(static_cast<size_t>(V), 0.0f);
    if (m_spec.one_kernel) {
      build_step_table();
      m_step_blocks = decode_step_blocks(m_step, device);  // 0: a kernel per operation (described as such)
    }
  } catch (...) {
    release();  // what was allocated so far (every pointer starts null)
    throw;
  }
}

CudaDecoder::~CudaDecoder() { release(); }

void CudaDecoder::release() {
  cudaSetDevice(m_device);
  if (m_stream) cudaStreamSynchronize(m_stream);
  for (cudaGraphExec_t e : m_execs)
    if (e) cudaGraphExecDestroy(e);
  for (void* p : m_allocs) cudaFree(p);
  if (m_state_host) cudaFreeHost(m_state_host);
  if (m_logits_host) cudaFreeHost(m_logits_host);
  if (m_step_start) cudaEventDestroy(m_step_start);
  if (m_step_stop) cudaEventDestroy(m_step_stop);
  if (m_stream) cudaStreamDestroy(m_stream);
  m_execs.assign(m_execs.size(), nullptr);
  m_state_host = nullptr, m_logits_host = nullptr, m_stream = nullptr;
  m_step_start = m_step_stop = nullptr;
  m_allocs.clear();
}

void* CudaDecoder::device_alloc(size_t bytes) {
  void* p = nullptr;
  TL_CUDA_CHECK(cudaMalloc(&p, bytes));
  m_allocs.push_back(p);
  return p;
}

float* CudaDecoder::upload_f32(const std::vector<float>& v) {
  auto* p = static_cast<float*>(device_alloc(v.size() * sizeof(float)));
  TL_CUDA_CHECK(cudaMemcpy(p, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice));
  return p;
}

// The matrix in the decoder's format: fp32 as is, bf16 rounded to nearest even, int8 / int4 as
// tensor/quant_format.h's codes and fp16 scales (one scale per group of a row; a per-tensor scale is
// repeated for every row, which gives the same values).
CudaDecoder::Matrix CudaDecoder::upload_matrix(const DecodeWeights& w, const std::string& name, const std::string& bias) {
  const std::vector<float>& v = w.at(name);
  const auto [rows, cols] = w.matrix_shape(name);
  const int64_t n = rows * cols;
  if (static_cast<int64_t>(v.size()) != n) throw Error("GPU decoding: '" + name + "' has the wrong size");
  Matrix m;
  m.format = kernel_format(m_spec.format);
  m.rows = rows;
  m.cols = cols;
  const int per_load = decode_weights_per_load(m.format);
  if (cols % per_load != 0)
    throw Error("GPU decoding in " + m_spec.label() + ": rows of '" + name + "' have " + std::to_string(cols) +
                " weights, not a multiple of " + std::to_string(per_load) + " (one 16-byte load)");
  int64_t bytes = 0;
  switch (m_spec.format) {
    case DecodeFormat::F32: {
      m.w = upload_f32(v);
      bytes = n * 4;
      break;
    }
    case DecodeFormat::BF16: {
      std::vector<uint16_t> h(static_cast<size_t>(n));
      convert_from_f32(v.data(), DType::BF16, h.data(), h.size());
      if (m_width > 1 && decode_tc_layout_fits(m.format, cols, 0)) h = tc_order(h, m.format, cols), m.layout = kTcChunks;
      m.w = device_alloc(h.size() * 2);
      TL_CUDA_CHECK(cudaMemcpy(m.w, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
      bytes = n * 2;
      break;
    }
    case DecodeFormat::I8:
    case DecodeFormat::I4: {
      const int64_t group = m_spec.quant.group_size(rows, cols);
      std::vector<float> scales(static_cast<size_t>((n + group - 1) / group));
      std::vector<int8_t> codes(static_cast<size_t>(n));
      quantize_groups(v.data(), n, m_spec.quant.bits, group, scales.data(), codes.data());
      m.group = group;
      if (group == n && rows > 1) {  // per tensor: one scale a row, all equal
        scales.assign(static_cast<size_t>(rows), scales[0]);
        m.group = cols;
      }
      if (m.group % per_load != 0 || cols % m.group != 0)
        throw Error("GPU decoding in " + m_spec.label() + ": groups of " + std::to_string(m.group) + " weights in rows of " +
                    std::to_string(cols) + " ('" + name + "'); groups must divide the row and hold whole 16-byte loads (" +
                    std::to_string(per_load) + " weights)");
      if (m_width > 1 && decode_tc_layout_fits(m.format, cols, m.group)) codes = tc_order(codes, m.format, cols), m.layout = kTcChunks;
      std::vector<uint16_t> h(scales.size());
      convert_from_f32(scales.data(), DType::F16, h.data(), h.size());  // exact: the scales are fp16 values
      m.scales = device_alloc(h.size() * 2);
      TL_CUDA_CHECK(cudaMemcpy(m.scales, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
      const std::vector<uint8_t> packed =
          m_spec.format == DecodeFormat::I8 ? pack_codes(codes, 8) : pack_codes(codes, 4);  // 4-bit container
      m.w = device_alloc(packed.size());
      TL_CUDA_CHECK(cudaMemcpy(m.w, packed.data(), packed.size(), cudaMemcpyHostToDevice));
      bytes = static_cast<int64_t>(packed.size() + h.size() * 2);
      break;
    }
  }
  if (!bias.empty()) {
    m.bias = upload_f32(w.at(bias));
    bytes += rows * 4;
  }
  m_weight_bytes += bytes;
  if (m_width > 1) prepare_decode_gemv_batch(m.format);  // the batched grid's occupancy, cached outside capture
  return m;
}

void CudaDecoder::build_step_table() {
  auto matrix = [](const Matrix& m) {
    DecodeMatrix d;
    d.w = m.w;
    d.scales = m.scales;
    d.bias = m.bias;
    d.rows = m.rows;
    d.cols = m.cols;
    d.group = m.group;
    return d;
  };
  std::vector<DecodeLayer> table;
  for (const Layer& L : m_layers) {
    DecodeLayer d;
    d.qkv = matrix(L.qkv);
    d.proj = matrix(L.proj);
    d.fc = matrix(L.fc);
    d.out = matrix(L.out);
    d.ln1_w = L.ln1_w, d.ln1_b = L.ln1_b, d.ln2_w = L.ln2_w, d.ln2_b = L.ln2_b;
    d.k = L.k, d.v = L.v;
    table.push_back(d);
  }
  auto* dev = static_cast<DecodeLayer*>(device_alloc(table.size() * sizeof(DecodeLayer)));
  TL_CUDA_CHECK(cudaMemcpy(dev, table.data(), table.size() * sizeof(DecodeLayer), cudaMemcpyHostToDevice));
  m_step.format = kernel_format(m_spec.format);
  m_step.layers = m_shape.layers;
  m_step.dim = m_shape.dim;
  m_step.heads = m_shape.heads;
  m_step.context = m_shape.context;
  m_step.layer = dev;
  m_step.head = matrix(m_head);
  m_step.tok = m_tok, m_step.pos = m_pos, m_step.ln_w = m_ln_w, m_step.ln_b = m_ln_b;
  m_step.x = m_x, m_step.f = m_f;
  m_step.x2 = static_cast<float*>(device_alloc(static_cast<size_t>(m_shape.dim) * sizeof(float)));
  m_step.q = m_q, m_step.att = m_att;
  m_step.attn = m_attn;
  m_step.logits = m_logits_mapped;
}

// The GEMV problem of matrix m (its format, weights, scales, shape and bias) on the step's state;
// the caller sets the input, the output and the epilogue.
DecodeGemv CudaDecoder::gemv_of(const Matrix& m) const {
  DecodeGemv g;
  g.format = m.format;
  g.w = m.w;
  g.scales = m.scales;
  g.rows = m.rows;
  g.cols = m.cols;
  g.group = m.group;
  g.bias = m.bias;
  g.layout = m.layout;
  g.state = m_state_dev;
  return g;
}

void CudaDecoder::enqueue_step(int n) {
  for (size_t l = 0; l < m_layers.size(); ++l)
    for (const Op op : {Op::Qkv, Op::Attention, Op::Proj, Op::Fc, Op::Out}) launch_op(op, l, n, m_spec.pdl);
  launch_op(Op::Head, 0, n, m_spec.pdl);
}

// Device microseconds of one kernel of each kind in isolation: `reps` launches of it (the last
// layer's, the head's) captured as a graph and replayed, the time over the launches; times the
// layers for a layer's kinds. With the weight bytes of the kind, its GB/s. "layernorm": the
// LayerNorm kernel alone, times the kernels of a step: 2 layers + 1 with several sequences (the
// qkv, fc and head kinds include theirs), the embedding's one with one sequence (whose GEMVs
// normalise their input: the qkv, fc and head kinds include that).
std::vector<std::pair<std::string, double>> CudaDecoder::profile_kernels() {
  constexpr int reps = 20, replays = 5;
  const size_t l = m_layers.size() - 1;
  static const std::pair<Op, const char*> kinds[] = {
      {Op::Qkv, "qkv"}, {Op::Attention, "attention"}, {Op::Proj, "proj"}, {Op::Fc, "fc"}, {Op::Out, "out"}, {Op::Head, "head"},
      {Op::Norm, "layernorm"}};
  std::vector<std::pair<std::string, double>> out;
  for (const auto& [op, name] : kinds) {
    const cudaGraphExec_t exec = capture([&] {
      for (int i = 0; i < reps; ++i) launch_op(op, l, m_batch, false);
    });
    TL_CUDA_CHECK(cudaGraphLaunch(exec, m_stream));  // warm-up
    TL_CUDA_CHECK(cudaEventRecord(m_step_start, m_stream));
    for (int i = 0; i < replays; ++i) TL_CUDA_CHECK(cudaGraphLaunch(exec, m_stream));
    TL_CUDA_CHECK(cudaEventRecord(m_step_stop, m_stream));
    TL_CUDA_CHECK(cudaStreamSynchronize(m_stream));
    cudaGraphExecDestroy(exec);
    float ms = 0.0f;
    TL_CUDA_CHECK(cudaEventElapsedTime(&ms, m_step_start, m_step_stop));
    const double us = 1e3 * ms / (reps * replays);
    const Layer& L = m_layers[l];
    const Matrix* m = op == Op::Qkv ? &L.qkv : op == Op::Proj ? &L.proj : op == Op::Fc ? &L.fc : op == Op::Out ? &L.out
                      : op == Op::Head ? &m_head : nullptr;
    const double norms = m_width == 1 ? 1.0 : 2.0 * static_cast<double>(m_layers.size()) + 1.0;  // LayerNorm kernels a step
    const double layers = op == Op::Head ? 1.0 : op == Op::Norm ? norms : static_cast<double>(m_layers.size());
    out.emplace_back(name, us * layers);
    if (m) out.emplace_back(std::string(name) + " GB/s", static_cast<double>(matrix_bytes(m->format, m->rows, m->cols, m->group, m->bias != nullptr)) / (us * 1e3));
  }
  return out;
}

std::vector<std::pair<std::string, double>> CudaDecoder::profile_step() {
  if (m_len >= m_shape.context) return {};
  TL_CUDA_CHECK(cudaSetDevice(m_device));
  if (m_step_blocks > 0) {  // one kernel: its phases from block 0's time stamps, and the whole launch
    const int64_t n = 5 * m_shape.layers + 2;
    if (!m_stamps) m_stamps = static_cast<unsigned long long*>(device_alloc(static_cast<size_t>(n) * 8));
    DecodeStep st = m_step;
    st.stamps = m_stamps;
    TL_CUDA_CHECK(cudaEventRecord(m_step_start, m_stream));
    launch_decode_step(st, 0, static_cast<int32_t>(m_len), m_step_blocks, m_stream);
    TL_CUDA_CHECK(cudaEventRecord(m_step_stop, m_stream));
    TL_CUDA_CHECK(cudaStreamSynchronize(m_stream));
    float ms = 0.0f;
    TL_CUDA_CHECK(cudaEventElapsedTime(&ms, m_step_start, m_step_stop));
    std::vector<unsigned long long> t(static_cast<size_t>(n));
    TL_CUDA_CHECK(cudaMemcpy(t.data(), m_stamps, t.size() * 8, cudaMemcpyDeviceToHost));
    static const char* kinds[] = {"qkv", "attention", "proj", "fc", "out"};
    std::vector<std::pair<std::string, double>> out;
    for (int64_t i = 0; i + 1 < n; ++i) {
      const std::string kind = i + 2 == n ? "head" : kinds[i % 5];
      const double us = 1e-3 * static_cast<double>(t[static_cast<size_t>(i + 1)] - t[static_cast<size_t>(i)]);
      auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == kind; });
      if (it == out.end()) out.emplace_back(kind, us);
      else it->second += us;
    }
    out.emplace_back("launch", 1e3 * ms);  // the whole kernel by events: phases plus launch and drain
    return out;
  }
  // Each kind of kernel alone at the next position: it writes the cache row and logits that the
  // next push() rewrites (and the residual stream that the step's first kernel rewrites).
  m_state_host[0] = 0;
  m_state_host[1] = static_cast<int32_t>(m_len);
  TL_CUDA_CHECK(cudaMemcpy(m_state_dev, m_state_host, 2 * sizeof(int32_t), cudaMemcpyHostToDevice));
  try {
    return profile_kernels();
  } catch (const Error&) {
    return {};
  }
}

void CudaDecoder::push(int32_t token) {
  if (m_batch > 1)
    throw Error("GPU decoding: this decoder decodes " + std::to_string(m_batch) +
                " sequences a step; push_batch takes one token for each");
  if (m_len >= m_shape.context) throw Error("internal: generation window overflow");
  if (token < 0 || token >= m_shape.padded_vocab) throw Error("token " + std::to_string(token) + " outside the vocabulary");
  if (m_layers.empty()) throw Error("GPU decoding: a model without layers");
  if (m_rows > 1) {  // the verification kernels, one row (a pass's row equals it bit for bit)
    run_rows({token});
    return;
  }
  TL_CUDA_CHECK(cudaSetDevice(m_device));
  m_state_host[0] = token;  // the previous step has finished (push synchronises), so the pinned
  m_state_host[1] = static_cast<int32_t>(m_len);  // buffer is free to rewrite
  m_state_host[2] = token;                         // the sequence's token, as push_batch writes it
  run_step(1);
  std::memcpy(m_logits.data(), m_logits_host, m_logits.size() * sizeof(float));
  ++m_len;
}

cudaGraphExec_t CudaDecoder::capture(const std::function<void()>& enqueue) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  TL_CUDA_CHECK(cudaStreamBeginCapture(m_stream, cudaStreamCaptureModeThreadLocal));
  try {
    enqueue();
  } catch (...) {
    cudaStreamEndCapture(m_stream, &graph);
    if (graph) cudaGraphDestroy(graph);
    throw;
  }
  TL_CUDA_CHECK(cudaStreamEndCapture(m_stream, &graph));
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);  // the executable graph keeps what it needs
  TL_CUDA_CHECK(e);
  return exec;
}

cudaGraphExec_t CudaDecoder::step_graph(int n) {
  cudaGraphExec_t& exec = m_execs.at(static_cast<size_t>(n));
  if (!exec) exec = capture([&] { enqueue_step(n); });
  return exec;
}

void CudaDecoder::run_step(int n) {
  if (m_step_blocks > 0) {
    TL_CUDA_CHECK(cudaEventRecord(m_step_start, m_stream));
    launch_decode_step(m_step, m_state_host[0], m_state_host[1], m_step_blocks, m_stream);
    TL_CUDA_CHECK(cudaEventRecord(m_step_stop, m_stream));
  } else if (m_spec.cuda_graph) {
    const cudaGraphExec_t exec = step_graph(n);
    TL_CUDA_CHECK(cudaEventRecord(m_step_start, m_stream));
    TL_CUDA_CHECK(cudaGraphLaunch(exec, m_stream));
    TL_CUDA_CHECK(cudaEventRecord(m_step_stop, m_stream));
  } else {
    TL_CUDA_CHECK(cudaEventRecord(m_step_start, m_stream));
    enqueue_step(n);
    TL_CUDA_CHECK(cudaEventRecord(m_step_stop, m_stream));
  }
  TL_CUDA_CHECK(cudaStreamSynchronize(m_stream));
  float ms = 0.0f;
  TL_CUDA_CHECK(cudaEventElapsedTime(&ms, m_step_start, m_step_stop));
  m_device_s += 1e-3 * ms;
}

std::vector<float> CudaDecoder::push_rows(const std::vector<int32_t>& tokens) {
  if (m_rows == 1) return TokenDecoder::push_rows(tokens);
  if (m_len + static_cast<int64_t>(tokens.size()) > m_shape.context) throw Error("internal: generation window overflow");
  std::vector<float> out;
  out.reserve(tokens.size() * static_cast<size_t>(m_shape.padded_vocab));
  for (size_t i = 0; i < tokens.size(); i += static_cast<size_t>(m_rows)) {
    const std::vector<int32_t> part(tokens.begin() + static_cast<std::ptrdiff_t>(i),
                                    tokens.begin() + static_cast<std::ptrdiff_t>(std::min(tokens.size(), i + m_rows)));
    const std::vector<float> rows = run_rows(part);
    out.insert(out.end(), rows.begin(), rows.end());
  }
  return out;
}

// One pass of 1..m_rows rows of the sequence at positions m_len.. (verify_rows decoders).
std::vector<float> CudaDecoder::run_rows(const std::vector<int32_t>& tokens) {
  const int n = static_cast<int>(tokens.size());
  if (n < 1 || n > m_rows) throw Error("internal: " + std::to_string(n) + " rows for a pass of at most " + std::to_string(m_rows));
  if (m_len + n > m_shape.context) throw Error("internal: generation window overflow");
  for (int32_t t : tokens)
    if (t < 0 || t >= m_shape.padded_vocab) throw Error("token " + std::to_string(t) + " outside the vocabulary");
  TL_CUDA_CHECK(cudaSetDevice(m_device));
  m_state_host[0] = tokens[0];
  m_state_host[1] = static_cast<int32_t>(m_len);  // row b at m_len + b
  for (int b = 0; b < n; ++b) m_state_host[2 + b] = tokens[static_cast<size_t>(b)];
  run_step(n);
  const auto V = static_cast<size_t>(m_shape.padded_vocab);
  std::vector<float> out(m_logits_host, m_logits_host + static_cast<size_t>(n) * V);
  std::memcpy(m_logits.data(), out.data() + (static_cast<size_t>(n) - 1) * V, V * sizeof(float));  // the last row's
  m_len += n;
  return out;
}

std::string CudaDecoder::describe() const {
  if (m_step_blocks > 0)
    return "CUDA decoder, " + m_spec.label() + " weights, one cooperative kernel a token (" +
           std::to_string(5 * m_shape.layers + 1) + " phases, grid barriers, " + std::to_string(m_step_blocks) + " blocks)";
  const std::string seqs = m_batch > 1  ? ", " + std::to_string(m_batch) + " sequences a step"
                           : m_rows > 1 ? ", up to " + std::to_string(m_rows) + " rows a pass (verification)"
                                        : "";
  const int64_t kernels = m_width > 1 ? 7 * m_shape.layers + 2 : 5 * m_shape.layers + 2;
  return "CUDA decoder, " + m_spec.label() + " weights" + seqs + ": " + std::to_string(kernels) + " kernels a token (" +
         (m_width > 1 ? "batched GEMVs" : "GEMVs normalising their input") +
         (m_head.layout == kTcChunks ? " on tensor cores" : "") + ", LayerNorms, attention)" +
         (m_spec.cuda_graph ? " in one CUDA graph" : " launched one by one") +
         (m_spec.pdl ? ", programmatic dependent launch" : "") +
         (m_spec.one_kernel ? " (the device cannot run the one-kernel step)" : "");
}

}  // namespace trainlab::cuda
