// CudaDecoder's kernel-per-operation step (see cuda_decoder.h) for one sequence or several side by
// side at the same position (DecodeSpec::batch), each weight read once a step for all of them.
#include <cuda_runtime_api.h>

#include <cstring>

#include "backend/cuda/cuda_decoder.h"
#include "decode.cuh"
#include "util/error.h"

namespace trainlab::cuda {

using namespace trainlab::kern;

// The kernels of op `op` of layer l for n sequences or verification rows (the head: l ignored):
// the GEMVs that take a normalised input get it from a LayerNorm kernel before them when several
// sequences or rows share the step (the batched GEMV), and normalise x themselves when one
// sequence decodes (decode_gemv.cuh); the embedding's LayerNorm kernel, the step's first, always
// runs (it reads the tokens and position from mapped host memory and copies them to device
// memory). Then the GEMV with its epilogue.
void CudaDecoder::launch_op(Op op, size_t l, int rows, bool pdl) {
  const int64_t D = m_shape.dim;
  auto norm = [&](const float* gamma, const float* beta, bool embed) {
    DecodeBatchNorm n;
    n.x = m_x;
    n.h = m_h;
    n.gamma = gamma;
    n.beta = beta;
    n.dim = D;
    n.batch = rows;
    n.pos_step = m_attn.pos_step;
    n.state = m_state_dev;
    bool p = pdl;
    if (embed) {  // reads what the host wrote: launched plainly, after the previous step
      n.tok = m_tok, n.pos = m_pos, n.x_out = m_x;
      n.state = m_state_mapped, n.state_out = m_state_dev;
      p = false;
    }
    launch_decode_batch_norm(n, p, m_stream);
  };
  auto gemv = [&](const Matrix& m, const float* x, int epilogue, float* y) {
    DecodeGemv g = gemv_of(m);
    g.batch = rows;
    g.pos_step = m_attn.pos_step;
    g.batch_sums = m_rows > 1;  // a verifying decoder's one row: the batched sums of its passes
    g.x = x;
    g.epilogue = epilogue;
    g.y = y;
    return g;
  };
  // LN(x) as a GEMV's input: normalised by the GEMV itself (one sequence) or by a kernel before it.
  const bool fused = m_width == 1;
  auto normed = [&](DecodeGemv g, const float* gamma, const float* beta) {
    if (fused) {
      g.x = m_x, g.ln_gamma = gamma, g.ln_beta = beta;
    } else {
      norm(gamma, beta, false);
      g.x = m_h;
    }
    return g;
  };
  if (op == Op::Norm) {  // the LayerNorm kernel alone (profile_kernels)
    norm(m_layers[l].ln1_w, m_layers[l].ln1_b, false);
    return;
  }
  if (op == Op::Head) {  // logits = W LN(x), into mapped host memory [batch, padded vocab]
    launch_decode_gemv_batch(normed(gemv(m_head, m_h, kStore, m_logits_mapped), m_ln_w, m_ln_b), m_sms, pdl, m_stream);
    return;
  }
  const Layer& L = m_layers[l];
  switch (op) {
    case Op::Qkv: {  // h = LN1(x); q | k | v = W h + b, k and v into each sequence's cache
      DecodeGemv g = gemv(L.qkv, m_h, kQkvScatter, m_q);
      if (l == 0) norm(L.ln1_w, L.ln1_b, true);  // the embedding
      else g = normed(g, L.ln1_w, L.ln1_b);
      g.kcache = L.k;
      g.vcache = L.v;
      g.kv_stride = m_attn.kv_stride;
      launch_decode_gemv_batch(g, m_sms, pdl, m_stream);
      break;
    }
    case Op::Attention: {
      DecodeAttention att = m_attn;
      att.q = m_q, att.k = L.k, att.v = L.v, att.y = m_att;
      att.batch = rows;
      launch_decode_attention(att, pdl, m_stream);
      break;
    }
    case Op::Proj: launch_decode_gemv_batch(gemv(L.proj, m_att, kAddTo, m_x), m_sms, pdl, m_stream); break;
    case Op::Fc:  // f = GELU(W LN2(x) + b)
      launch_decode_gemv_batch(normed(gemv(L.fc, m_h, kGelu, m_f), L.ln2_w, L.ln2_b), m_sms, pdl, m_stream);
      break;
    case Op::Out: launch_decode_gemv_batch(gemv(L.out, m_f, kAddTo, m_x), m_sms, pdl, m_stream); break;
    case Op::Head:
    case Op::Norm: break;
  }
}

std::vector<float> CudaDecoder::push_batch(const std::vector<int32_t>& tokens) {
  if (m_batch == 1) return TokenDecoder::push_batch(tokens);
  if (static_cast<int64_t>(tokens.size()) != m_batch)
    throw Error("push_batch: " + std::to_string(tokens.size()) + " tokens for a batch of " + std::to_string(m_batch) +
                " sequences (expected one token a sequence)");
  if (m_len >= m_shape.context) throw Error("internal: generation window overflow");
  if (m_layers.empty()) throw Error("GPU decoding: a model without layers");
  for (int32_t t : tokens)
    if (t < 0 || t >= m_shape.padded_vocab) throw Error("token " + std::to_string(t) + " outside the vocabulary");
  TL_CUDA_CHECK(cudaSetDevice(m_device));
  m_state_host[0] = tokens[0];  // the previous step has finished: the pinned buffer is free
  m_state_host[1] = static_cast<int32_t>(m_len);
  for (int b = 0; b < m_batch; ++b) m_state_host[2 + b] = tokens[static_cast<size_t>(b)];
  run_step(m_batch);
  const auto V = static_cast<size_t>(m_shape.padded_vocab);
  std::vector<float> out(m_logits_host, m_logits_host + static_cast<size_t>(m_batch) * V);
  std::memcpy(m_logits.data(), out.data(), V * sizeof(float));  // sequence 0's
  ++m_len;
  return out;
}

}  // namespace trainlab::cuda
