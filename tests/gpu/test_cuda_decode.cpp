// The GPU char-gpt decoder (core/backend/cuda/cuda_decoder.cpp) against the CPU generator:
//  * logits position by position for fp32 weights, and for bf16 / int8 / int4 (g 32, 64, 128) /
//    per-tensor int8 / 3-bit codes against the CPU generator run on the values the format
//    represents (DecodeWeights::as_format: the dequantised weights), tolerance 1e-4 relative
//    (fp32 accumulation in another order), also over a 600-position window;
//  * the default decoder is a kernel per operation replayed as a CUDA graph; the one-kernel step
//    (kernels/decode_step.cu) is checked against the CPU too, and the two agree to 1e-4 (their flash-decoding
//    attention splits the positions into other runs: another order). The attention kernel takes
//    runs of at most 128 positions (one run at context 48, up to 5 over the 600-position window),
//    the one-kernel step about two blocks an SM, so these checks cover the runs' combination;
//  * wide layers (dim 1024 and 768) take the tile GEMV's other shapes (rows four a warp, long
//    rows in pieces, scale groups of three loads);
//  * the replayed CUDA graph gives the same logits as launching the kernels one by one, also
//    after reset() (a new window reuses the graph);
//  * greedy generation over window restarts gives the CPU's tokens (first 60 at least);
//  * speculative decoding (a bf16 target, its int4 copy as the draft) gives the target's greedy tokens;
//  * verification rows (DecodeSpec::verify_rows): a pass of rows equals the pushes bit for bit.
#include <functional>
#include <numeric>

#include "decode/cpu_decoder.h"
#include "decode/decoder.h"
#include "decode/generate.h"
#include "decode/speculative.h"
#include "nn/transformer.h"
#include "parity_support.h"

using namespace trainlab;
using namespace trainlab::parity;

namespace {

CharGptConfig config(int64_t context = 48, int64_t dim = 128, int64_t layers = 2, int64_t heads = 4) {
  CharGptConfig c;
  c.vocab = 65;
  c.layers = layers, c.heads = heads, c.dim = dim, c.context = context;
  return c;
}

// Random-initialised weights with the head scaled up, so that the logits are spread out and
// greedy choices are not near-ties.
DecodeWeights model_weights(uint64_t seed, int64_t context = 48, const CharGptConfig* shape = nullptr) {
  CpuBackend cpu(1);
  CharGpt m(cpu, shape ? *shape : config(context), seed);
  DecodeWeights w = decode_weights(cpu, m);
  for (float& x : w.tensors.at("head.weight")) x *= 20.0f;
  return w;
}

std::vector<int32_t> token_sequence(int64_t n, int64_t vocab) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 37 + 11) % vocab));
  return t;
}

// Worst relative error over positions (max |gpu - cpu| / max |cpu| per position).
double logits_error(TokenDecoder& cpu, TokenDecoder& gpu, const std::vector<int32_t>& toks, int64_t vocab) {
  cpu.reset();
  gpu.reset();
  double worst = 0.0;
  for (int32_t t : toks) {
    cpu.push(t);
    gpu.push(t);
    const std::vector<float> a(cpu.logits().begin(), cpu.logits().begin() + vocab);
    const std::vector<float> b(gpu.logits().begin(), gpu.logits().begin() + vocab);
    worst = std::max(worst, rel_err(b, a));
  }
  return worst;
}

DecodeSpec spec(const char* name, int group = 32) { return DecodeSpec::parse(name, group); }

}  // namespace

int main() {
  std::unique_ptr<Backend> gpu = cuda_or_skip();
  if (!gpu) return 77;
  try {
    const DecodeWeights w = model_weights(5);
    const DecoderShape shape = w.shape;
    const std::vector<int32_t> toks = token_sequence(shape.context, shape.vocab);

    std::vector<DecodeSpec> specs{spec("fp32"), spec("bf16"), spec("int8"), spec("int4", 32), spec("int4", 64),
                                  spec("int4", 128)};
    DecodeSpec i8_tensor = DecodeSpec::from_quant(QuantSpec{8, QuantGranularity::Tensor, 32});
    DecodeSpec i8_group = DecodeSpec::from_quant(QuantSpec{6, QuantGranularity::Group, 64});
    DecodeSpec i3 = DecodeSpec::from_quant(QuantSpec{3, QuantGranularity::Group, 32});
    DecodeSpec i4_channel = DecodeSpec::from_quant(QuantSpec{4, QuantGranularity::Channel, 32});
    specs.insert(specs.end(), {i8_tensor, i8_group, i3, i4_channel});
    for (const DecodeSpec& s : specs) {
      CharGptGenerator ref(w.as_format(s));
      auto dec = make_decoder(*gpu, w, s);
      check("decode logits " + s.label() + " vs CPU on the format's values, " + std::to_string(toks.size()) + " positions",
            logits_error(ref, *dec, toks, shape.vocab), 1e-4);
    }
    std::printf("     %s\n", make_decoder(*gpu, w, spec("int4"))->describe().c_str());
    check("decode: the default GPU decoder replays a kernel per operation as one CUDA graph",
          make_decoder(*gpu, w, spec("int4"))->describe().find("in one CUDA graph") == std::string::npos ? 1.0 : 0.0, 0.0);

    // The one-kernel step: against the CPU, and against the kernel per operation (graph replay).
    for (const char* f : {"fp32", "bf16", "int4"}) {
      DecodeSpec one = spec(f);
      one.one_kernel = true;
      CharGptGenerator ref(w.as_format(one));
      auto dk = make_decoder(*gpu, w, spec(f)), d1 = make_decoder(*gpu, w, one);
      check(std::string("decode: ") + f + " with one_kernel runs a token as one cooperative kernel",
            d1->describe().find("one cooperative kernel") == std::string::npos ? 1.0 : 0.0, 0.0);
      check(std::string("decode logits ") + f + ", the one-kernel step, vs CPU", logits_error(ref, *d1, toks, shape.vocab), 1e-4);
      check(std::string("decode logits ") + f + ": one-kernel step vs a kernel per operation", logits_error(*dk, *d1, toks, shape.vocab),
            1e-4);
    }

    // A window longer than the attention kernel's 512 threads (keys in several passes).
    {
      const DecodeWeights wl = model_weights(6, 600);
      const std::vector<int32_t> long_toks = token_sequence(600, shape.vocab);
      DecodeSpec one = spec("int4");
      one.one_kernel = true;
      for (const DecodeSpec& s : {spec("fp32"), spec("int4"), one}) {
        CharGptGenerator ref(wl.as_format(s));
        auto dec = make_decoder(*gpu, wl, s);
        check("decode logits " + s.label() + (s.one_kernel ? " (one kernel)" : "") + " over a 600-position window",
              logits_error(ref, *dec, long_toks, shape.vocab), 1e-4);
      }
    }

    // Wide layers take the tile GEMV's other shapes (kernels/decode.cu, launch_tile_rule): at dim
    // 1024, fc's 4,096 rows four a warp, out's long rows in pieces over 4 warps (bf16, fp32) or 2
    // (int8), qkv two rows a warp; at dim 768 int8 in groups of 48 (three 16-byte loads a group:
    // the scale index by division, not shift); at dim 2048 int4's out in pieces over 2 warps.
    {
      const CharGptConfig wide = config(24, 1024, 1, 8), mid = config(24, 768, 1, 12), xl = config(24, 2048, 1, 16);
      const DecodeWeights w1 = model_weights(7, 24, &wide), w2 = model_weights(8, 24, &mid), w3 = model_weights(9, 24, &xl);
      const std::vector<int32_t> wt = token_sequence(24, shape.vocab);
      const DecodeSpec i8_g48 = DecodeSpec::from_quant(QuantSpec{8, QuantGranularity::Group, 48});
      for (const auto& [wm, s] : std::vector<std::pair<const DecodeWeights*, DecodeSpec>>{
               {&w1, spec("fp32")}, {&w1, spec("bf16")}, {&w1, spec("int8")}, {&w1, spec("int4")}, {&w2, spec("bf16")}, {&w2, i8_g48},
               {&w3, spec("int4")}}) {
        CharGptGenerator ref(wm->as_format(s));
        auto dec = make_decoder(*gpu, *wm, s);
        check("decode logits " + s.label() + ", dim " + std::to_string(wm->shape.dim) + " (the tile GEMV's wide shapes) vs CPU",
              logits_error(ref, *dec, wt, shape.vocab), 1e-4);
      }
    }

    // Graph replay (with programmatic dependent launch) == eager launches one after the other, bit
    // for bit, and across reset().
    for (const char* f : {"fp32", "int4"}) {
      DecodeSpec g = spec(f), e = spec(f);
      g.one_kernel = e.one_kernel = false;
      e.cuda_graph = false;
      e.pdl = false;
      auto dg = make_decoder(*gpu, w, g), de = make_decoder(*gpu, w, e);
      double diff = logits_error(*de, *dg, toks, shape.vocab);
      diff = std::max(diff, logits_error(*de, *dg, token_sequence(10, shape.vocab), shape.vocab));  // after reset
      check(std::string("decode ") + f + ": CUDA graph replay vs eager launches (also after reset)", diff, 0.0);
    }

    // Greedy generation, prompt of 3, 100 tokens: the 48-position window restarts twice.
    for (const char* f : {"fp32", "bf16", "int4"}) {
      const DecodeSpec s = spec(f);
      CharGptGenerator ref(w.as_format(s));
      auto dec = make_decoder(*gpu, w, s);
      SampleOptions greedy;
      greedy.temperature = 0.0f;
      const std::vector<int32_t> prompt{1, 2, 3};
      const auto a = generate_tokens(ref, prompt, 100, greedy);
      const auto b = generate_tokens(*dec, prompt, 100, greedy);
      int64_t same = 0;
      while (same < 100 && a[static_cast<size_t>(same)] == b[static_cast<size_t>(same)]) ++same;
      std::printf("     %s: %lld of 100 greedy tokens equal before the first difference\n", f, static_cast<long long>(same));
      SampleOptions recompute = greedy;  // the window rerun for every token instead of the KV cache
      recompute.use_cache = false;
      const auto c = generate_tokens(*dec, prompt, 100, recompute);
      check(std::string("decode greedy tokens ") + f + ": KV cache vs full recompute on the GPU (tokens differing)",
            static_cast<double>(std::inner_product(b.begin(), b.end(), c.begin(), 0, std::plus<>(), std::not_equal_to<>())), 0.0);
      check(std::string("decode greedy tokens ") + f + ": tokens before the first CPU/GPU difference short of 60",
            static_cast<double>(std::max<int64_t>(0, 60 - same)), 0.0);
    }

    // Speculative decoding on the GPU decoder (truncate; push_rows one push a row, or one pass of
    // verification rows): a bf16 target with its int4 copy as the draft, k = 4, gives the target's
    // own greedy tokens (window restarts included), and the int4 draft agrees with it on most proposals.
    for (const int rows : {1, 5}) {
      DecodeSpec t = spec("bf16");
      t.verify_rows = rows;
      auto target = make_decoder(*gpu, w, t), draft = make_decoder(*gpu, w, spec("int4"));
      SampleOptions greedy;
      greedy.temperature = 0.0f;
      const std::vector<int32_t> prompt{1, 2, 3};
      const auto a = generate_tokens(*target, prompt, 100, greedy);
      SpeculativeStats st;
      const auto b = speculative_generate(*target, *draft, prompt, 100, 4, greedy, &st);
      std::printf("     speculative, %s, int4 draft, k 4: %.0f%% accepted, %.2f tokens a target pass\n",
                  target->describe().c_str(), 100.0 * st.acceptance_rate(), st.tokens_per_pass());
      check("decode speculative greedy tokens, bf16 target verifying " + std::to_string(rows) +
                " rows a pass + int4 draft, vs the target alone (tokens differing)",
            static_cast<double>(std::inner_product(a.begin(), a.end(), b.begin(), 0, std::plus<>(), std::not_equal_to<>())), 0.0);
    }

    // Verification rows (DecodeSpec::verify_rows, speculative decoding's target pass): push_rows
    // of 1..7 rows (5 a pass: 6 and 7 take two) equals pushing the tokens one by one on the same
    // decoder bit for bit, after a rollback too, in every format (fp32: the batched GEMV, the others
    // on tensor cores); against the CPU on the format's values to 1e-4 (speculative decoding with
    // a verifying target: above).
    for (const char* f : {"fp32", "bf16", "int8", "int4"}) {
      DecodeSpec v = spec(f);
      v.verify_rows = 5;
      auto rows = make_decoder(*gpu, w, v), ones = make_decoder(*gpu, w, v);
      CharGptGenerator ref(w.as_format(v));
      const auto V = static_cast<size_t>(shape.padded_vocab), n = static_cast<size_t>(shape.vocab);
      double differ = 0.0, worst = 0.0;
      int64_t pos = 0;
      for (int64_t len = 1; pos + len <= shape.context && len <= 7; ++len) {
        std::vector<int32_t> t;
        for (int64_t i = 0; i < len; ++i) t.push_back(static_cast<int32_t>((pos * 29 + i * 7 + 3) % shape.vocab));
        const std::vector<float> a = rows->push_rows(t), c = ref.push_rows(t);
        for (size_t i = 0; i < t.size(); ++i) {
          ones->push(t[i]);
          const std::vector<float> ra(a.begin() + i * V, a.begin() + i * V + n), ro(ones->logits().begin(), ones->logits().begin() + n),
              rc(c.begin() + i * V, c.begin() + i * V + n);
          differ += ra != ro;
          worst = std::max(worst, rel_err(ra, rc));
        }
        pos += len;
        if (len == 4) {  // roll all three back by two positions and go on from there
          rows->truncate(pos - 2), ones->truncate(pos - 2), ref.truncate(pos - 2);
          pos -= 2;
        }
      }
      check(std::string("decode verification rows ") + f + ": push_rows rows vs pushes on the same decoder (rows differing)",
            differ, 0.0);
      check(std::string("decode verification rows ") + f + ": vs the CPU on the format's values", worst, 1e-4);
    }
    {
      DecodeSpec bad = spec("bf16");
      bad.verify_rows = 3, bad.batch = 2;
      bool refused = false;
      try {
        make_decoder(*gpu, w, bad);
      } catch (const Error&) {
        refused = true;
      }
      check("decode verification rows with a batch of 2 refused with an Error", refused ? 0.0 : 1.0, 0.0);
    }

    // Batched decoding (batched GEMVs, attention over a grid dimension of sequences, a KV cache a
    // sequence): every row of every step against the CPU's batched decoder on the format's values
    // (itself bit-identical to each sequence alone, tests/unit/test_decoder.cpp), the sequences fed
    // different tokens; also over the 600-position window; graph replay == eager launches.
    {
      auto batch_spec = [&](const char* f, int b, bool graph = true) {
        DecodeSpec s = spec(f);
        s.batch = b;
        s.cuda_graph = s.pdl = graph;
        return s;
      };
      auto batch_error = [&](const DecodeWeights& wt, const DecodeSpec& s, int64_t steps, TokenDecoder* other = nullptr) {
        CharGptGenerator ref(wt.as_format(s), s.label(), s.batch);
        auto dec = make_decoder(*gpu, wt, s);
        TokenDecoder& cmp = other ? *other : ref;
        const auto V = static_cast<size_t>(wt.shape.padded_vocab), n = static_cast<size_t>(wt.shape.vocab);
        double worst = 0.0;
        cmp.reset();
        for (int64_t i = 0; i < steps; ++i) {
          std::vector<int32_t> t;
          for (int64_t b = 0; b < s.batch; ++b) t.push_back(static_cast<int32_t>((i * 37 + b * 13 + 11) % wt.shape.vocab));
          const std::vector<float> a = cmp.push_batch(t), g = dec->push_batch(t);
          for (size_t b = 0; b < static_cast<size_t>(s.batch); ++b) {
            const std::vector<float> ra(a.begin() + b * V, a.begin() + b * V + n), rg(g.begin() + b * V, g.begin() + b * V + n);
            worst = std::max(worst, other ? static_cast<double>(ra != rg) : rel_err(rg, ra));
          }
        }
        return worst;
      };
      for (const char* f : {"bf16", "int8", "int4"})  // these take the tensor-core GEMVs (decode_tc.cu)
        check(std::string("decode batch 4 ") + f + ": batched GEMVs on tensor cores",
              make_decoder(*gpu, w, batch_spec(f, 4))->describe().find("on tensor cores") != std::string::npos ? 0.0 : 1.0, 0.0);
      for (const char* f : {"fp32", "bf16", "int8", "int4"})
        for (const int b : {4, 16})
          check(std::string("decode batch ") + std::to_string(b) + " " + f + ": every sequence's logits vs the CPU batch",
                batch_error(w, batch_spec(f, b), shape.context), 1e-4);
      check("decode batch 4 int4 over a 600-position window vs the CPU batch",
            batch_error(model_weights(6, 600), batch_spec("int4", 4), 600), 1e-4);
      auto eager = make_decoder(*gpu, w, batch_spec("int4", 4, false));
      check("decode batch 4 int4: CUDA graph replay vs eager launches (rows differing)",
            batch_error(w, batch_spec("int4", 4), shape.context, eager.get()), 0.0);
      std::printf("     %s\n", eager->describe().c_str());
      DecodeSpec too_big = batch_spec("bf16", 17);
      bool refused = false;
      try {
        make_decoder(*gpu, w, too_big);
      } catch (const Error&) {
        refused = true;
      }
      check("decode batch 17 refused with an Error", refused ? 0.0 : 1.0, 0.0);
    }

    // Bytes a token: int4 g32 reads 4.5 bits a weight for the matrices.
    auto d32 = make_decoder(*gpu, w, spec("fp32")), d4 = make_decoder(*gpu, w, spec("int4"));
    std::printf("     weight bytes a token: fp32 %lld, int4-g32 %lld\n", static_cast<long long>(d32->weight_bytes_per_token()),
                static_cast<long long>(d4->weight_bytes_per_token()));
    check("decode int4-g32 reads fewer than 1/6 of fp32's weight bytes (ratio)",
          static_cast<double>(d4->weight_bytes_per_token()) / static_cast<double>(d32->weight_bytes_per_token()) > 1.0 / 6 ? 1.0 : 0.0,
          0.0);
  } catch (const std::exception& e) {
    std::printf("FAIL: exception: %s\n", e.what());
    ++g_fail;
  }
  return finish();
}
