// CudaDecoder: the GPU TokenDecoder (backend/token_decoder.h) of a pre-norm decoder-only
// transformer given as DecodeWeights, made by CudaBackend::create_decoder.
//
// The linear matrices live on the device in the decoder's format (fp32, bf16, int8 or packed
// int4 with fp16 scales per group of a row; tensor/quant_format.h's codes), everything else in fp32;
// the KV cache is fp32 [context, d] per layer. One token is 7 launches a layer plus two
// (kernels/decode.cuh, cuda_decoder_ops.cpp): the two LayerNorms (the first layer's with the
// embedding), the GEMVs with bias / residual add / GELU / the K,V cache writes in their epilogues,
// attention; then the final LayerNorm and the head. The token and position come from mapped
// pinned host memory and the logits go back into it (no copies). By default the kernels are
// captured once as a CUDA graph that reads the token and position from device memory, and
// replayed for every token (or launched one by one: DecodeSpec::cuda_graph false). With
// DecodeSpec::one_kernel the whole token is one cooperative kernel instead (kernels/
// decode_step.cu: five phases a layer with grid-wide barriers between them, token and position
// as kernel arguments): as fast at the `small` size (10.7M parameters, launch-bound), slower from
// gpt2's size up (BENCHMARKS.md, decoding).
//
// DecodeSpec::batch > 1: that many sequences side by side, all at the same position, a KV cache
// each ([batch, context, d] per layer); the same kernels (one_kernel off), the GEMVs batched so
// that each weight is read once for all the sequences, attention over a third grid dimension
// (kernels/decode.cuh, "Batched").
//
// DecodeSpec::verify_rows > 1 (one sequence): push_rows runs up to that many rows of the sequence
// in one pass of the batched kernels (each weight read once for all of them, row b at the next
// position + b, one KV cache; kernels/decode.cuh, "Verification rows"), the target's pass of
// speculative decoding; push() is a pass of one row through the same kernels, so that a row of a
// pass equals the push of its token bit for bit. A graph is captured per row count, when first used.
#pragma once
#include <cuda_runtime_api.h>

#include <functional>
#include <string>
#include <vector>

#include "decode.cuh"
#include "backend/token_decoder.h"

namespace trainlab::cuda {

class CudaDecoder final : public TokenDecoder {
 public:
  CudaDecoder(int device, const DecodeWeights& w, const DecodeSpec& spec);
  ~CudaDecoder() override;
  CudaDecoder(const CudaDecoder&) = delete;
  CudaDecoder& operator=(const CudaDecoder&) = delete;

  const DecoderShape& shape() const override { return m_shape; }
  void reset() override { m_len = 0; }
  void push(int32_t token) override;  // a batch of one only (else: push_batch)
  std::vector<float> push_rows(const std::vector<int32_t>& tokens) override;  // verify_rows at a time
  std::vector<float> push_batch(const std::vector<int32_t>& tokens) override;
  int64_t batch() const override { return m_batch; }
  const std::vector<float>& logits() const override { return m_logits; }
  int64_t length() const override { return m_len; }
  // The position is uploaded with every push, so rolling back is setting it (the cache rows past
  // it are rewritten by the next pushes).
  void truncate(int64_t length) override {
    check_truncate(*this, length);
    m_len = length;
  }
  int64_t weight_bytes_per_token() const override { return m_weight_bytes; }
  int64_t kv_bytes(int64_t pos) const override { return m_batch * 2 * m_shape.layers * (pos + 1) * m_shape.dim * 4; }
  std::string describe() const override;
  double device_seconds() const override { return m_device_s; }
  std::vector<std::pair<std::string, double>> profile_step() override;

 private:
  struct Matrix {
    int format = 0;
    void* w = nullptr;
    void* scales = nullptr;
    int64_t rows = 0, cols = 0, group = 0;
    float* bias = nullptr;
    int layout = 0;  // kern::DecodeLayout: kTcChunks in a batched decoder where the matrix fits
  };
  struct Layer {
    float *ln1_w, *ln1_b, *ln2_w, *ln2_b;
    Matrix qkv, proj, fc, out;
    float *k, *v;  // KV cache [context, d]
  };
  void release();  // frees every device and pinned buffer (destructor, failed constructor)
  void* device_alloc(size_t bytes);
  float* upload_f32(const std::vector<float>& v);
  Matrix upload_matrix(const DecodeWeights& w, const std::string& name, const std::string& bias);
  enum class Op { Qkv, Attention, Proj, Fc, Out, Head, Norm };  // Norm: a LayerNorm alone (the profile's)
  // The op's kernels (LayerNorm, GEMV; or attention) for n sequences (batch) or rows (verify_rows).
  void launch_op(Op op, size_t layer, int n, bool pdl);
  kern::DecodeGemv gemv_of(const Matrix& m) const;      // a matrix's GEMV problem (no x, y, epilogue)
  // The state is written: one step of n sequences or rows (graph, eager or one kernel),
  // synchronised and timed.
  void run_step(int n);
  void enqueue_step(int n);  // one step's work on m_stream, a kernel per operation
  cudaGraphExec_t step_graph(int n);  // the step of n captured (first use) as a graph
  cudaGraphExec_t capture(const std::function<void()>& enqueue);  // what enqueue launches, as an executable graph
  std::vector<float> run_rows(const std::vector<int32_t>& tokens);  // verify_rows: one pass, <= m_rows rows
  std::vector<std::pair<std::string, double>> profile_kernels();  // each kind alone, graph-replayed
  void build_step_table();  // m_step: the one-kernel step's parameters and layer table

  DecoderShape m_shape;
  DecodeSpec m_spec;
  int m_device = 0, m_sms = 132;
  cudaStream_t m_stream = nullptr;
  std::vector<cudaGraphExec_t> m_execs;  // [n]: the step of n sequences or rows as a graph (or null)
  std::vector<void*> m_allocs;
  float *m_tok = nullptr, *m_pos = nullptr, *m_ln_w = nullptr, *m_ln_b = nullptr;
  Matrix m_head;
  std::vector<Layer> m_layers;
  kern::DecodeStep m_step;  // one_kernel: the step kernel's parameters
  int m_step_blocks = 0;    // its grid (0: a kernel per operation)
  unsigned long long* m_stamps = nullptr;  // profile_step's time stamps (device memory)
  kern::DecodeAttention m_attn;  // flash-decoding's split and scratch (q, caches and y set per layer)
  float *m_x = nullptr, *m_q = nullptr, *m_att = nullptr, *m_f = nullptr;  // [batch, ...]
  float* m_h = nullptr;  // batch > 1: the LayerNorms' output [batch, dim]
  int m_batch = 1;
  int m_rows = 1;   // DecodeSpec::verify_rows: rows of one sequence a push_rows pass takes
  int m_width = 1;  // the most sequences or rows a step holds: max(batch, rows)
  int32_t* m_state_dev = nullptr;     // {token, position, tokens of a batch...} for the kernels after the first
  int32_t* m_state_host = nullptr;    // mapped pinned: written by push()
  int32_t* m_state_mapped = nullptr;  // its device address
  float* m_logits_host = nullptr;     // mapped pinned: written by the head GEMV
  float* m_logits_mapped = nullptr;
  std::vector<float> m_logits;
  int64_t m_len = 0;
  int64_t m_weight_bytes = 0;
  cudaEvent_t m_step_start = nullptr, m_step_stop = nullptr;  // around each graph replay
  double m_device_s = 0.0;
};

}  // namespace trainlab::cuda
