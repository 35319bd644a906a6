// Token decoding as a backend operation (issue 5, made model-agnostic in issue 15).
//
// A TokenDecoder holds a decoder-only transformer's weights in some format and a KV cache; push()
// runs one token at the next position and leaves the logits of that position. The backend knows
// no model: what it decodes is described by DecodeWeights, the shape of a pre-norm decoder-only
// transformer and its fp32 host tensors by name. decode/ builds DecodeWeights from a model, owns
// the CPU decoder, sampling and the generation loop; a backend may provide its own decoder
// (Backend::create_decoder: the CUDA module's GEMV decoder keeps the matrices in bf16, int8 or
// packed int4 and so reads fewer bytes a token).
//
// The network DecodeWeights describes (D = dim, H = heads, hd = D / H), for a token t at
// position p, all in fp32:
//   x = tok[t] + pos[p]
//   per layer l:  h = LN(x; ln1);  [q | k | v] = qkv.weight h + qkv.bias   (k, v appended to the cache)
//                 y_head = softmax(q_head . k_head^T / sqrt(hd)) v_head over positions 0..p
//                 x += proj.weight y + proj.bias
//                 h = LN(x; ln2);  f = GELU(fc.weight h + fc.bias)   (erf form; fc is [4D, D])
//                 x += out.weight f + out.bias                          (out is [D, 4D])
//   logits = head.weight LN(x; ln)                                     (no bias; [padded vocab])
// LN(x; n) = (x - mean) / sqrt(var + 1e-5) * n.weight + n.bias, var the biased variance.
//
// Tensor names (row-major; a matrix is [rows = outputs, cols = inputs]):
//   tok.weight [padded_vocab, D]   pos.weight [context, D]   ln.weight, ln.bias [D]
//   head.weight [padded_vocab, D]
//   blocks.<l>.ln1.weight, .ln1.bias, .ln2.weight, .ln2.bias [D]
//   blocks.<l>.qkv.weight [3D, D], .qkv.bias [3D]   blocks.<l>.proj.weight [D, D], .proj.bias [D]
//   blocks.<l>.fc.weight [4D, D], .fc.bias [4D]     blocks.<l>.out.weight [D, 4D], .out.bias [D]
//
// Formats: the linear matrices (blocks.*.{qkv,proj,fc,out}.weight and head.weight) are stored in
// the decoder's format; embeddings, biases and LayerNorm parameters stay fp32. For int8/int4 the
// codes and fp16 scales are those of tensor/quant_format.h's QuantSpec (bits <= 4 in a 4-bit
// container, 5..8 in int8); DecodeWeights::as_format gives the fp32 values a format represents,
// which is what a decoder in that format computes with (the CPU reference of a quantized decoder).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/quant_format.h"

namespace trainlab {

enum class DecodeFormat : uint8_t { F32, BF16, I8, I4 };
constexpr int64_t kMaxDecodeBatch = 16;  // DecodeSpec::batch's upper bound (the batched GEMV's registers)
// The storage format of a decoder's matrices, the DType that Backend::supports(Op::Decode, t) is asked with.
DType decode_format_dtype(DecodeFormat f);

struct DecodeSpec {
  DecodeFormat format = DecodeFormat::F32;
  QuantSpec quant;          // I8 / I4: bits, granularity, group (bits 2..4 for I4, 2..8 for I8)
  bool one_kernel = false;  // CUDA: the whole token in one cooperative kernel (grid barriers between
                            // its phases); false (default: faster from gpt2's size up, as fast at
                            // `small`, BENCHMARKS.md): a kernel per operation, as a graph or one by one
  bool cuda_graph = true;   // (one_kernel false) devices that can replay the per-token step as one graph
  bool pdl = true;          // (one_kernel false) CUDA: kernels may launch while the previous one finishes (sm_90)
  int batch = 1;            // sequences decoded side by side (push_batch), each with its own KV cache;
                            // CUDA: batch > 1 runs a kernel per operation (batched GEMVs read each
                            // weight once for all the sequences), never the one-kernel step
  int verify_rows = 1;      // CUDA, one sequence: rows a push_rows pass runs at once (up to
                            // kMaxDecodeBatch; speculative decoding's target: K + 1), each weight
                            // read once for all of them; push() then runs the same kernels (a row
                            // equals a push bit for bit). 1: push_rows is a push a row. The CPU
                            // decoder reads each weight once for any number of rows already.
  // "fp32", "bf16", "int8", "int8-channel", "int4-g32" ... (parse accepts these names).
  std::string label() const;
  static DecodeSpec parse(const std::string& name, int group);  // "fp32|bf16|int8|int4"; group for int4
  static DecodeSpec parse_label(const std::string& label);       // also "int8-channel", "int4-g64"...
  static DecodeSpec from_quant(const QuantSpec& q);  // the container for a quantized file's spec
};

// The shape of the network above.
struct DecoderShape {
  int64_t vocab = 0;         // tokens a sampler draws from (the first `vocab` logits)
  int64_t padded_vocab = 0;  // rows of tok.weight and head.weight, entries of logits() (>= vocab)
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t dim = 0;      // D, a multiple of heads
  int64_t context = 0;  // positions a window holds (rows of pos.weight)
  void validate() const;  // throws Error naming the first inconsistent field
};

// A decoder's fp32 weights on the host, by the tensor names above.
struct DecodeWeights {
  DecoderShape shape;
  std::map<std::string, std::vector<float>> tensors;

  const std::vector<float>& at(const std::string& name) const;  // throws Error naming a missing tensor
  // Every tensor name of the network, and the subset stored in the decoder's format.
  static std::vector<std::string> all_names(const DecoderShape& shape);
  static std::vector<std::string> matrix_names(const DecoderShape& shape);
  // Rows and columns of a matrix (matrix_names only).
  std::pair<int64_t, int64_t> matrix_shape(const std::string& name) const;
  // The shape is consistent and every tensor of all_names is present with its element count.
  void validate() const;
  // The values the format represents: matrices rounded to bf16, or quantized and dequantized.
  DecodeWeights as_format(const DecodeSpec& spec) const;
};

class TokenDecoder {
 public:
  virtual ~TokenDecoder() = default;
  virtual const DecoderShape& shape() const = 0;
  virtual void reset() = 0;                          // empty window
  virtual void push(int32_t token) = 0;              // next position (throws past the context)
  virtual const std::vector<float>& logits() const = 0;  // of the last push, [padded vocab]
  virtual int64_t length() const = 0;                // positions in the window
  // Keeps the first `length` positions of the window (0 <= length <= length()): the next push
  // writes position `length`. Speculative decoding rolls a verified pass back to the accepted
  // prefix with it; the cache rows past `length` are simply overwritten later.
  virtual void truncate(int64_t length) = 0;
  // Pushes tokens[0..n) at the next n positions in one pass and returns their logits, n rows of
  // [padded vocab] (row i: the logits after tokens[0..i]; logits() is then the last row). Row i
  // must equal what push(tokens[i]) would give in that state, bit for bit, so that a batched
  // verification (decode/speculative.h) reproduces one-token decoding exactly. This default
  // pushes one token at a time; a decoder that can read its weights once for all rows (the CPU
  // decoder) overrides it.
  virtual std::vector<float> push_rows(const std::vector<int32_t>& tokens);
  // Batched decoding (DecodeSpec::batch sequences side by side, all at the same position
  // length()): tokens[b] goes to sequence b, which attends over its own KV cache; returns the
  // logits of every sequence, batch rows of [padded vocab] (logits() is then sequence 0's). With
  // several sequences push() and push_rows() continue sequence 0 on the CPU and throw Error on
  // CUDA. This default serves a batch of one (push); a decoder with several sequences overrides
  // it. Throws Error unless tokens.size() == batch().
  virtual std::vector<float> push_batch(const std::vector<int32_t>& tokens);
  virtual int64_t batch() const { return 1; }
  // Bytes of weights a push reads: matrices in the decoder's format, their scales and biases, two
  // embedding rows and the LayerNorm parameters (the KV cache comes on top: kv_bytes).
  virtual int64_t weight_bytes_per_token() const = 0;
  // Bytes of the KV cache a push at position `pos` reads (keys and values of pos + 1 positions).
  virtual int64_t kv_bytes(int64_t pos) const = 0;
  virtual std::string describe() const = 0;
  // Measurements where the device can make them: device time of the pushes so far (seconds), and
  // the device time of each kind of kernel in one step (microseconds), e.g. {"qkv", 12.5}, and
  // where known the weight bytes a second of a kind as "<kind> GB/s", e.g. {"qkv GB/s", 3100}.
  virtual double device_seconds() const { return 0.0; }
  virtual std::vector<std::pair<std::string, double>> profile_step() { return {}; }
};

// Throws Error (internal) unless 0 <= length <= dec.length(): the check of every truncate().
void check_truncate(const TokenDecoder& dec, int64_t length);

}  // namespace trainlab
