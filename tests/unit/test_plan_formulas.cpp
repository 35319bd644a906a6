// The planner's formulas (plan/transformer_memory.h, plan/memory_model.h, plan/step_time.h,
// plan/planner.h) against values worked out by hand, each one in a comment beside it. Notation of
// docs/PLANNER.md: s sequence, b micro-batch, h width, a heads, L layers, t TP, P stages, M
// micro-batches, eb bytes an element; sbh = s*b*h.
#include <QtTest>
#include <cmath>

#include "nn/transformer.h"
#include "plan/planner.h"
#include "train/plan_check.h"
#include "test_support.h"

using namespace trainlab;

namespace {

CharGptConfig shape(int64_t L, int64_t h, int64_t a, int64_t s, int64_t V, double dropout) {
  CharGptConfig c;
  c.layers = L;
  c.dim = h;
  c.heads = a;
  c.context = s;
  c.vocab = V;
  c.dropout = dropout;
  return c;
}

ActivationInputs inputs(int64_t b, int64_t s, int64_t eb, Recompute r = Recompute::None, int64_t every = 1) {
  ActivationInputs in;
  in.batch = b;
  in.seq = s;
  in.element_bytes = eb;
  in.recompute = r;
  in.recompute_every = every;
  return in;
}

int64_t cat(const MemoryByCategory& m, MemCategory c) { return m[static_cast<size_t>(c)]; }

// A setup with a model of `params` parameters on H200s in `precision` (fp32 or bf16) with AdamW.
PlanSetup params_setup(int64_t params, int64_t eb, int64_t gpus) {
  PlanSetup s;
  s.model.kind = PlanModelKind::Params;
  s.model.params = params;
  s.element_bytes = eb;
  s.precision = eb == 4 ? "fp32" : "bf16";
  s.gpus = gpus;
  return s;
}

}  // namespace

class TestPlanFormulas : public QObject {
  Q_OBJECT

 private slots:
  // Korthikanti et al. 2022, per layer, on GPT-3 175B's shape: s = 2048, b = 1, h = 12288, a = 96,
  // so sbh = 25,165,824 and a s^2 b = 402,653,184.
  void megatronPerLayer() {
    const CharGptConfig gpt3 = shape(96, 12288, 96, 2048, 51200, 0.1);
    // 16-bit, dropout, no TP: sbh (34 + 5 a s / h) = sbh (34 + 80) = 2,868,903,936.
    QCOMPARE(megatron_layer_bytes(gpt3, inputs(1, 2048, 2), 1), int64_t{2868903936});
    // TP 8: sbh (10 + 24/8 + 5 a s / (8 h)) = 23 sbh = 578,813,952.
    QCOMPARE(megatron_layer_bytes(gpt3, inputs(1, 2048, 2), 8), int64_t{578813952});
    // Selective, TP 8: sbh (10 + 24/8) = 13 sbh = 327,155,712.
    QCOMPARE(megatron_layer_bytes(gpt3, inputs(1, 2048, 2, Recompute::Selective), 8), int64_t{327155712});
    // Selective, no TP: 34 sbh = 855,638,016.
    QCOMPARE(megatron_layer_bytes(gpt3, inputs(1, 2048, 2, Recompute::Selective), 1), int64_t{855638016});
    // Full: the layer's input, 2 sbh = 50,331,648 (not split by TP without sequence parallelism).
    QCOMPARE(megatron_layer_bytes(gpt3, inputs(1, 2048, 2, Recompute::Full), 8), int64_t{50331648});
    // Without dropout: no masks, no dropout output: 32 sbh + 2 a s^2 b = 805,306,368 * 2.
    const CharGptConfig nodrop = shape(96, 12288, 96, 2048, 51200, 0.0);
    QCOMPARE(megatron_layer_bytes(nodrop, inputs(1, 2048, 2), 1), int64_t{1610612736});
    // fp32 (eb 4), dropout: 16 sbh 4 + 2 sbh + a s^2 b (2*4 + 1) = 66 sbh + 9 a s^2 b = 5,284,823,040.
    QCOMPARE(megatron_layer_bytes(gpt3, inputs(1, 2048, 4), 1), int64_t{5284823040});
  }

  // A small model by hand: L = 4, h = 8, a = 2, s = 4, b = 2, V = 16, dropout, eb = 2, so sbh = 64,
  // a s^2 b = 64 and a layer stores 34 * 64 + 5 * 64 = 2,496 bytes.
  void megatronPipelineStages() {
    const CharGptConfig c = shape(4, 8, 2, 4, 16, 0.1);
    const ActivationInputs none = inputs(2, 4, 2);
    QCOMPARE(megatron_layer_bytes(c, none, 1), int64_t{2496});
    // P = 2, M = 4 (1F1B): stage 0 holds 2 layers and keeps min(2, 4) = 2 micro-batches of them
    // and of the embedding's dropout mask (sbh = 64): 2 * (2 * 2496 + 64) = 10,112.
    const StageActivations first = megatron_stage_activations(c, none, {2, true, false, 1});
    QCOMPARE(first.stored, int64_t{2 * 2496 + 64});
    QCOMPARE(first.total(2), int64_t{10112});
    // Stage 1: 1 micro-batch of 2 layers, and the output layer once: the final LayerNorm's and the
    // head's inputs (2 sbh eb = 256) and fp32 logits (4 s b V = 512): 4,992 + 768 = 5,760.
    const StageActivations last = megatron_stage_activations(c, none, {2, false, true, 1});
    QCOMPARE(last.total(1), int64_t{5760});
    // Selective: the stored 34 sbh = 2,176 a layer, and one layer's recomputed scores (5 a s^2 b = 320).
    const StageActivations sel = megatron_stage_activations(c, inputs(2, 4, 2, Recompute::Selective), {2, true, false, 1});
    QCOMPARE(sel.total(2), int64_t{2 * (2 * 2176 + 64) + 320});
    // Full every layer: 2 inputs of 2 sbh = 128 each and the mask per micro-batch in flight, and
    // one layer recomputed in full: 2 * (256 + 64) + 2,496 = 3,136.
    const StageActivations full = megatron_stage_activations(c, inputs(2, 4, 2, Recompute::Full), {2, true, false, 1});
    QCOMPARE(full.total(2), int64_t{3136});
    // Full every 2 layers: one group input (128), two layers recomputed: 2 * (128 + 64) + 2 * 2,496.
    const StageActivations k2 = megatron_stage_activations(c, inputs(2, 4, 2, Recompute::Full, 2), {2, true, false, 1});
    QCOMPARE(k2.total(2), int64_t{2 * (128 + 64) + 2 * 2496});
  }

  // The lab's count, tiny's shape (d = 128, a = 4) at b = 4, s = 64 in bf16: N = 256 tokens,
  // N d eb = 65,536, LayerNorm statistics 16 N = 4,096, the log-sum-exp 4 N a = 4,096.
  void labPerLayerAndTensorParallel() {
    CharGptConfig c = CharGptConfig::preset("tiny");
    const ActivationInputs in = inputs(4, 64, 2);
    // One block, no TP: its full set and output, 16 N d eb + 16 N + 4 N a = 1,056,768; the rest
    // (embedding and final LN outputs, dx, dh: 4 N d eb; final statistics 8 N; logits and their
    // gradient 2 N V eb = 66,560; tokens 8 N) is what a slice of 0 layers holds.
    const StageActivations none0 = lab_stage_activations(c, in, {0, true, true, 1});
    const StageActivations none1 = lab_stage_activations(c, in, {1, true, true, 1});
    QCOMPARE(none1.total(1) - none0.total(1), int64_t{1056768});
    QCOMPARE(none0.total(1), int64_t{4 * 65536 + 8 * 256 + 66560 + 8 * 256});
    // TP 2 splits qkv, att, pre, f and the log-sum-exp: 4 N d eb + 16 N + (12 N d eb + 4 N a) / 2
    // = 262,144 + 4,096 + 393,216 + 2,048 = 661,504.
    const StageActivations t1 = lab_stage_activations(c, in, {1, false, false, 2});
    const StageActivations t0 = lab_stage_activations(c, in, {0, false, false, 2});
    QCOMPARE(t1.total(1) - t0.total(1), int64_t{661504});
    // At one stage and t = 1 the count is plan/memory_model.h's exact CharGpt formula plus the
    // step's int32 tokens, for every policy.
    for (CheckpointPolicy p : {CheckpointPolicy::Off, CheckpointPolicy::Selective, CheckpointPolicy::EveryBlock}) {
      ActivationInputs a = in;
      recompute_of_policy(p, 1, a.recompute, a.recompute_every);
      QCOMPARE(lab_stage_activations(c, a, {c.layers, true, true, 1}).total(1),
               char_gpt_activation_bytes(c, p, 1, 4, 64, 2, false) + token_step_activation_bytes(4, 64));
    }
  }

  // Parameters: tiny has 421,632 (shared/bench's peer prints the same); gpt2's preset with
  // tinyshakespeare's 65 characters: 12 (12 * 768^2 + 13 * 768) + 65 * 768 * 2 + 1024 * 768 + 2 * 768
  // = 85,942,272. Built models agree.
  void parameterCounts() {
    auto be = create_backend("cpu");
    for (const char* p : {"tiny", "small"}) {
      const CharGptConfig c = CharGptConfig::preset(p);
      CharGpt m(*be, c, 1);
      QCOMPARE(transformer_slice_params(c, {c.layers, true, true, 1}), m.parameter_count());
    }
    QCOMPARE(transformer_slice_params(CharGptConfig::preset("tiny"), {2, true, true, 1}), int64_t{421632});
    const CharGptConfig g = CharGptConfig::preset("gpt2");
    QCOMPARE(transformer_slice_params(g, {12, true, true, 1}), int64_t{85942272});
    QCOMPARE(plan_model_preset("char-gpt-gpt2", "--model").total_params(), int64_t{85942272});
    // TP 2: a block (12 d^2 + 7 d) / 2 + 6 d = 3,546,240; tok and head ceil(65/2) = 33 rows each,
    // pos whole: 12 * 3,546,240 + 2 * 33 * 768 + 1024 * 768 + 1536 = 43,393,536.
    QCOMPARE(transformer_slice_params(g, {12, true, true, 2}), int64_t{43393536});
    // Two stages: the blocks halve; the embeddings on the first, the LayerNorm and head on the last.
    QCOMPARE(transformer_slice_params(g, {6, true, false, 1}) + transformer_slice_params(g, {6, false, true, 1}),
             int64_t{85942272});
    QCOMPARE(plan_model_preset("digits-mlp", "--model").total_params(), int64_t{85002});
  }

  // ZeRO per rank, mixed-precision AdamW (eb 2, 8 bytes of moments, a 4-byte master), 10^6
  // parameters on 4 ranks: 2P + 2P + 12P = 16 MB at stage 0; 2 + 2 + 3 = 7 MB at 1;
  // 2 + 0.5 + 3 = 5.5 MB at 2; 0.5 + 0.5 + 3 = 4 MB at 3 (DOMAIN.md's 2N/W + 2N/W + 12N/W).
  void zeroPerRank() {
    TrainingMemoryInputs in;
    in.params = 1000000;
    in.element_bytes = 2;
    const int64_t expect[4][3] = {{2000000, 2000000, 12000000},
                                  {2000000, 2000000, 3000000},
                                  {2000000, 500000, 3000000},
                                  {500000, 500000, 3000000}};
    for (int stage = 0; stage < 4; ++stage) {
      const MemoryByCategory m = predict_rank_memory(in, {stage, 4, 1});
      QCOMPARE(cat(m, MemCategory::Weights), expect[stage][0]);
      QCOMPARE(cat(m, MemCategory::Gradients), expect[stage][1]);
      QCOMPARE(cat(m, MemCategory::Optimizer), expect[stage][2]);
    }
    // fp32 AdamW: 4 + 4 + 8 = 16 bytes a parameter, the weights being the master; stage 3 on 4: 4.
    in.element_bytes = 4;
    const MemoryByCategory f = predict_rank_memory(in, {3, 4, 0});
    QCOMPARE(cat(f, MemCategory::Weights) + cat(f, MemCategory::Gradients) + cat(f, MemCategory::Optimizer),
             int64_t{4000000});
    // 10 elements on 4 ranks: shards of ceil(10/4) = 3: [0,3) [3,6) [6,9) [9,10).
    QCOMPARE(zero_shard_range(10, 4, 0), std::make_pair(int64_t{0}, int64_t{3}));
    QCOMPARE(zero_shard_range(10, 4, 3), std::make_pair(int64_t{9}, int64_t{10}));
    QCOMPARE(zero_shard_range(2, 4, 3), std::make_pair(int64_t{2}, int64_t{2}));
    in.params = 10;
    QCOMPARE(cat(predict_rank_memory(in, {3, 4, 3}), MemCategory::Weights), int64_t{1 * 4});
    // One rank, no sharding: the trainer's prediction.
    QCOMPARE(predict_rank_memory(in, {}), predict_training_memory(in));
    QVERIFY(test::error_of([&] { predict_rank_memory(in, {4, 2, 0}); }).find("ZeRO stage 4") != std::string::npos);
    QVERIFY(test::error_of([&] { predict_rank_memory(in, {1, 2, 2}); }).find("rank 2 of 2") != std::string::npos);
  }

  // Each precision through train/precision.h's table on an H200: element bytes 4 (fp32, tf32) or
  // 2 (bf16, fp16, fp8: bf16 storage), the datasheet peak of its products, fp8's casts; and the
  // bytes of 1,000 parameters with AdamW: fp32 4 + 4 + 8 = 16, the 16-bit ones 2 + 2 + (8 + 4) = 16;
  // SGD with momentum keeps 4 bytes of state: 2 + 2 + 8 in bf16. An A100 has no fp8 units.
  void precisions() {
    const struct {
      const char* name;
      int64_t eb;
      double peak;
      bool fp8;
    } table[] = {{"fp32", 4, 66.9e12, false}, {"tf32", 4, 494.7e12, false}, {"bf16", 2, 989.4e12, false},
                 {"fp16", 2, 989.4e12, false}, {"fp8", 2, 1978.9e12, true}};
    for (const auto& p : table) {
      PlanSetup s = params_setup(1000, 4, 1);
      resolve_plan_setup(s, p.name, "adamw", "h200");
      QCOMPARE(s.element_bytes, p.eb);
      QCOMPARE(s.peak_flops, p.peak);
      QCOMPARE(s.fp8_matmul, p.fp8);
      QCOMPARE(s.fp8_copies, p.fp8);
      const PlanResult r = plan_layout(s, {});
      QCOMPARE(cat(r.per_gpu, MemCategory::Weights), 1000 * p.eb);
      QCOMPARE(cat(r.per_gpu, MemCategory::Gradients), 1000 * p.eb);
      QCOMPARE(cat(r.per_gpu, MemCategory::Optimizer), int64_t{1000} * (p.eb == 4 ? 8 : 12));
    }
    PlanSetup s = params_setup(1000, 4, 1);
    resolve_plan_setup(s, "bf16", "sgd", "a100");
    QCOMPARE(s.optimizer_state_bytes, 4.0);
    QCOMPARE(s.peak_flops, 312e12);
    QCOMPARE(s.gpu_memory_bytes, 80e9);
    QCOMPARE(cat(plan_layout(s, {}).per_gpu, MemCategory::Optimizer), int64_t{8000});
    resolve_plan_setup(s, "fp8", "adamw", "a100");
    QVERIFY(test::error_of([&] { plan_layout(s, {}); }).find("the a100 has no peak") != std::string::npos);
  }

  // The CUDA backend's fp8 casts. tiny at b = 4, s = 64 (N = 256, d = 128): per block, the inputs
  // of qkv, proj, fc (d wide) and out (4d) twice over, 2 N 7d = 458,752 activation bytes; the
  // weights 2 * 12 d^2 = 393,216; the output gradients 2 N (3d + d + 4d + d) = 589,824; the head
  // (65 outputs, not a multiple of 16) runs in bf16. The digits MLP at batch 64: 64->256 and
  // 256->256 (ReLU) in fp8, 256->10 not: activations 2*64*(64+256), weights 2*256*(64+256),
  // gradients 2*64*(256+256); with GELU hidden layers (a GELU epilogue) none.
  void fp8Copies() {
    const MemoryByCategory t = fp8_copy_bytes(char_gpt_linear_shapes(CharGptConfig::preset("tiny"), 2, true, 4, 64));
    QCOMPARE(cat(t, MemCategory::Activations), int64_t{2 * 458752});
    QCOMPARE(cat(t, MemCategory::Weights), int64_t{2 * 393216});
    QCOMPARE(cat(t, MemCategory::Gradients), int64_t{2 * 589824});
    const MemoryByCategory m = fp8_copy_bytes(mlp_linear_shapes({64, 256, 256, 10}, 64, false));
    QCOMPARE(cat(m, MemCategory::Activations), int64_t{2 * 64 * (64 + 256)});
    QCOMPARE(cat(m, MemCategory::Weights), int64_t{2 * 256 * (64 + 256)});
    QCOMPARE(cat(m, MemCategory::Gradients), int64_t{2 * 64 * (256 + 256)});
    QCOMPARE(fp8_copy_bytes(mlp_linear_shapes({64, 256, 256, 10}, 64, true)), MemoryByCategory{});
    // The planner adds them to an fp8 plan on a GPU with fp8 units (and not in bf16).
    PlanSetup s;
    s.model = plan_model_preset("char-gpt-tiny", "--model");
    s.micro_batch = 4;
    s.element_bytes = 2;
    s.fp8_matmul = s.fp8_copies = true;
    const PlanResult with = plan_layout(s, {});
    s.fp8_copies = false;
    const PlanResult without = plan_layout(s, {});
    QCOMPARE(cat(with.per_gpu, MemCategory::Weights) - cat(without.per_gpu, MemCategory::Weights), int64_t{2 * 393216});
  }

  // Communication per GPU and step, and the bubble.
  void communicationAndBubble() {
    // Ring all-reduce of 1 GB over 8 ranks: 2 * 7/8 = 1.75 GB sent per rank; ZeRO 3: 1.5 x = 2.625.
    QCOMPARE(ring_allreduce_bytes(1e9, 8), 1.75e9);
    QCOMPARE(data_parallel_bytes(1e9, 8, 2), 1.75e9);
    QCOMPARE(data_parallel_bytes(1e9, 8, 3), 2.625e9);
    QCOMPARE(ring_allreduce_bytes(1e9, 1), 0.0);
    // TP 2, 2 layers, 1 micro-batch of 1 MB activations: 4 all-reduces of 2 * 1/2 * 1 MB a layer
    // = 8 MB; full recomputation repeats the forward's two: 12 MB.
    QCOMPARE(tensor_parallel_bytes(2, 1, 1e6, 2, false), 8e6);
    QCOMPARE(tensor_parallel_bytes(2, 1, 1e6, 2, true), 12e6);
    // The whole step as the lab sends it: + the embedding's all-reduce and the output layer's input
    // gradient's (10 MB). Sequence parallel: 10 halves (0.5 MB) a layer, 2 + 3 at the ends, and the
    // LayerNorm gradients' all-reduces (4 h eb a layer, 2 h eb at the end: 1 KB here).
    TensorParallelTraffic tt;
    tt.layers = 2;
    tt.tp = 2;
    tt.activation_bytes = 1e6;
    tt.layernorm_bytes = 256;
    QCOMPARE(tensor_parallel_step_bytes(tt), 10e6);
    tt.sequence_parallel = true;
    QCOMPARE(tensor_parallel_step_bytes(tt), (2 * 10 + 5) * 0.5e6 + 2 * 1024 + 512);
    tt.full_recompute = true;
    QCOMPARE(tensor_parallel_step_bytes(tt), (2 * 14 + 5) * 0.5e6 + 2 * 1024 + 512);
    tt.tp = 1;
    QCOMPARE(tensor_parallel_step_bytes(tt), 0.0);
    // PP: each of 4 micro-batches sends 1 MB forward and 1 MB backward: 8 MB.
    QCOMPARE(pipeline_parallel_bytes(4, 1e6, 2), 8e6);
    QCOMPARE(pipeline_parallel_bytes(4, 1e6, 1), 0.0);
    // Bubble (p - 1) / (m + p - 1): 4 stages, 8 micro-batches: 3/11.
    QCOMPARE(pipeline_bubble_fraction(4, 8), 3.0 / 11.0);
    // A step: 1 s compute + 0.5 s TP on a pipeline of 4 stages and 8 micro-batches stretches by
    // (m + p - 1) / m = 11/8: bubble 1.5 * 3/8 = 0.5625 s; with 0.25 s of DP: 2.3125 s.
    StepTimeInputs in;
    in.hardware_flops = 8e12;
    in.gpus = 8;
    in.peak_flops = 2e12;
    in.mfu = 0.5;
    in.tp_bytes = 0.5e9;
    in.tp_link = 1e9;
    in.dp_bytes = 0.25e9;
    in.dp_link = 1e9;
    in.pp = 4;
    in.micro_batches = 8;
    const StepTime t = step_time(in);
    QCOMPARE(t.compute_s, 1.0);
    QCOMPARE(t.bubble_s, 0.5625);
    QCOMPARE(t.step_s, 2.3125);
    QCOMPARE(t.bubble_fraction, 3.0 / 11.0);
  }

  // FLOPs a token of gpt2's shape: 6 (85,942,272 - 786,432) + 12 * 12 * 768 * 1024 = 624,181,248.
  // Full recomputation: 12 more layer forwards of 24 d^2 + 4 d s = 207,618,048 (Megatron);
  // the lab's every-block does not recompute the last block: 11/12 of that.
  void flops() {
    const CharGptConfig g = CharGptConfig::preset("gpt2");
    QCOMPARE(transformer_train_flops_per_token(g, 1024), 624181248.0);
    QCOMPARE(transformer_recompute_flops_per_token(g, 1024, Recompute::Full, 1, ActivationCount::Megatron), 207618048.0);
    QCOMPARE(transformer_recompute_flops_per_token(g, 1024, Recompute::Full, 1, ActivationCount::Lab), 207618048.0 * 11 / 12);
    QCOMPARE(transformer_recompute_flops_per_token(g, 1024, Recompute::Selective, 1, ActivationCount::Megatron),
             4.0 * 768 * 1024 * 12);
    QCOMPARE(transformer_recompute_flops_per_token(g, 1024, Recompute::None, 1, ActivationCount::Megatron), 0.0);
  }

  // A whole plan by hand: gpt2's preset, micro-batch 8, bf16 AdamW, 8 H200s, DP 8, ZeRO 1.
  void wholePlan() {
    PlanSetup s;
    s.model = plan_model_preset("char-gpt-gpt2", "--model");
    s.micro_batch = 8;
    s.element_bytes = 2;
    s.precision = "bf16";
    s.gpus = 8;
    s.peak_flops = 989.4e12;
    Layout l;
    l.dp = 8;
    l.zero = 1;
    const PlanResult r = plan_layout(s, l);
    const int64_t P = 85942272;
    QCOMPARE(cat(r.per_gpu, MemCategory::Weights), 2 * P);
    QCOMPARE(cat(r.per_gpu, MemCategory::Gradients), 2 * P);
    QCOMPARE(cat(r.per_gpu, MemCategory::Optimizer), 12 * ((P + 7) / 8));  // ceil(P/8) = 10,742,784
    // The lab's activations of gpt2 at b = 8 (the exact CharGpt formula plus the step's tokens).
    QCOMPARE(cat(r.per_gpu, MemCategory::Activations),
             char_gpt_activation_bytes(s.model.transformer, CheckpointPolicy::Off, 1, 8, 1024, 2, false) +
                 token_step_activation_bytes(8, 1024));
    // Time: 65,536 tokens x 624,181,248 FLOPs / 8 GPUs / (989.4 TFLOP/s x 0.4) = 0.012920 s of
    // compute; DP sends 1.75 x 2P = 300,797,952 bytes over NVLink (450 GB/s): 0.000668 s.
    QCOMPARE(r.time.tokens, 65536.0);
    QVERIFY(std::fabs(r.time.compute_s - 0.0129201859) < 1e-9);
    QCOMPARE(r.time.dp_bytes, 300797952.0);
    QVERIFY(std::fabs(r.time.dp_s - 300797952.0 / 450e9) < 1e-12);
    QCOMPARE(r.time.step_s, r.time.compute_s + r.time.dp_s);
    QVERIFY(r.fits);
  }

  // The schedule sets the bubble and the in-flight micro-batches: 4 stages of a 16-layer shape and
  // 8 micro-batches (simulated) and 40,000 (p m above 2^16: the closed forms), per schedule.
  void pipelineSchedules() {
    PlanSetup s;
    s.model.transformer = shape(16, 256, 4, 64, 1000, 0.0);
    s.count = ActivationCount::Megatron;
    s.gpus = 4;
    using dist::PipelineSchedule;
    const struct {
      PipelineSchedule kind;
      int64_t v;
      double bubble;  // (p - 1) / (... ) at m = 8
      int64_t first;  // in flight at stage 0, m = 8
    } cases[] = {{PipelineSchedule::OneFOneB, 1, 3.0 / 11.0, 4},
                 {PipelineSchedule::GPipe, 1, 3.0 / 11.0, 8},
                 {PipelineSchedule::Interleaved, 2, 3.0 / 19.0, 6},
                 {PipelineSchedule::ZbH1, 1, 3.0 / 27.0, 4}};
    for (const auto& c : cases) {
      Layout l;
      l.pp = 4;
      l.micro_batches = 8;
      l.schedule = c.kind;
      l.virtual_stages = c.v;
      const PlanResult r = plan_layout(s, l);
      QCOMPARE(r.time.bubble_fraction, c.bubble);
      QCOMPARE(r.stages[0].in_flight, c.first);
      QCOMPARE(r.stages[3].in_flight, c.kind == PipelineSchedule::GPipe ? int64_t{8} : c.kind == PipelineSchedule::Interleaved ? int64_t{3} : int64_t{1});
      // The step stretches by (idle + busy) / busy of the pipeline's busy time.
      const double busy = r.time.compute_s + r.time.tp_s + r.time.pp_s;
      QVERIFY(std::fabs(r.time.bubble_s - busy * c.bubble / (1 - c.bubble)) <= 1e-12 * busy);
      l.micro_batches = 40000;
      const PlanResult big = plan_layout(s, l);
      QCOMPARE(big.time.bubble_fraction, dist::pipeline_bubble(c.kind, 4, 40000, c.v).fraction());
    }
    Layout l;
    l.pp = 4;
    l.micro_batches = 40000;
    QCOMPARE(plan_layout(s, l).time.bubble_fraction, 3.0 / 40003.0);
    l.micro_batches = 2;  // m < p: planned, with the note
    QVERIFY(QString::fromStdString(plan_layout(s, l).pipeline_warning).startsWith("the bubble grows"));
  }

  // Pipeline and tensor parallel plan: 4 stages of a 16-layer shape, 8 micro-batches; the first
  // stage holds 4 micro-batches in flight and is the fullest; ZeRO 3's gather buffers and the
  // pipeline's send/receive buffers are communication bytes.
  void pipelinePlan() {
    PlanSetup s;
    s.model.transformer = shape(16, 1024, 16, 512, 32000, 0.1);
    s.count = ActivationCount::Megatron;
    s.micro_batch = 2;
    s.element_bytes = 2;
    s.gpus = 16;
    s.nodes = 2;
    Layout l;
    l.tp = 2;
    l.pp = 4;
    l.dp = 2;
    l.zero = 3;
    l.micro_batches = 8;
    const PlanResult r = plan_layout(s, l);
    QCOMPARE(r.stages.size(), size_t{4});
    QCOMPARE(r.stages[0].in_flight, int64_t{4});
    QCOMPARE(r.stages[3].in_flight, int64_t{1});
    QCOMPARE(r.worst, size_t{0});
    const ModelSlice first{4, true, false, 2};
    ActivationInputs ai = inputs(2, 512, 2);
    ai.step_buffers = false;
    QCOMPARE(cat(r.stages[0].bytes, MemCategory::Activations),
             megatron_stage_activations(s.model.transformer, ai, first).total(4));
    // ZeRO 3 over DP 2: the stage's parameters halve (ceil); gather two blocks; send/receive b s h eb twice.
    const int64_t p0 = transformer_slice_params(s.model.transformer, first);
    QCOMPARE(cat(r.stages[0].bytes, MemCategory::Weights), (p0 + 1) / 2 * 2);
    QCOMPARE(cat(r.stages[0].bytes, MemCategory::Communication),
             2 * transformer_block_params(s.model.transformer, 2) * 2 + 2 * 2 * 512 * 1024 * 2);
    // Links: 8 GPUs a node; TP 2 and TP x PP = 8 stay in a node (NVLink), DP crosses nodes.
    const double act = 2.0 * 512 * 1024 * 2;
    // The first stage's: its 4 blocks' 4 all-reduces and the vocabulary-parallel embedding's.
    QCOMPARE(r.time.tp_bytes, tensor_parallel_bytes(4, 8, act, 2, false) + 8 * ring_allreduce_bytes(act, 2));
    QCOMPARE(r.time.tp_s, r.time.tp_bytes / s.nvlink_bytes_per_s);
    QCOMPARE(r.time.pp_s, r.time.pp_bytes / s.nvlink_bytes_per_s);
    QCOMPARE(r.time.dp_s, r.time.dp_bytes / s.network_bytes_per_s);
    QCOMPARE(r.time.bubble_fraction, 3.0 / 11.0);
  }

  // The search on 8 GPUs for gpt2's preset: TP in {1, 2, 4} (divides 12 heads), PP in {1, 2, 4}
  // (divides 12 layers), TP x PP divides 8: 8 pairs, DP 8, 4, 2, 4, 2, 1, 2, 1; ZeRO 0-3 where DP > 1
  // (one where DP = 1), 3 recomputations: 3 x (6 x 4 + 2) = 78 layouts.
  void search() {
    PlanSetup s;
    s.model = plan_model_preset("char-gpt-gpt2", "--model");
    s.micro_batch = 4;
    s.element_bytes = 2;
    s.gpus = 8;
    const SearchResult r = search_layouts(s, {});
    QCOMPARE(r.considered, int64_t{78});
    QCOMPARE(r.global_batch, int64_t{32});
    QVERIFY(!r.fit.empty());
    for (size_t i = 0; i < r.fit.size(); ++i) {
      QVERIFY(r.fit[i].fits);
      QCOMPARE(r.fit[i].layout.dp * r.fit[i].layout.micro_batches * 4, int64_t{32});  // the global batch
      if (i > 0) QVERIFY(r.fit[i - 1].time.step_s <= r.fit[i].time.step_s);
    }
    // A GPU too small for all but the sharded, recomputing layouts.
    s.gpu_memory_bytes = 0.6e9;
    const SearchResult small = search_layouts(s, {});
    QVERIFY(small.fit.size() < r.fit.size());
    for (const PlanResult& p : small.fit) QVERIFY(static_cast<double>(p.per_gpu_total) <= 0.6e9);
    // Fixed values: TP 2 only.
    SearchSpace sp;
    sp.tp = {2};
    for (const PlanResult& p : search_layouts(s, sp).fit) QCOMPARE(p.layout.tp, int64_t{2});
  }

  // Ranges and divisibility name the option and the expected range.
  void validation() {
    PlanSetup s;
    s.model = plan_model_preset("char-gpt-gpt2", "--model");
    s.gpus = 8;
    Layout l;
    l.dp = 1;
    l.tp = 8;
    QVERIFY(test::error_of([&] { plan_layout(s, l); }).find("--tp 8 must divide --heads 12") != std::string::npos);
    l = Layout{};
    l.dp = 1;
    l.pp = 8;
    QVERIFY(test::error_of([&] { plan_layout(s, l); }).find("--pp 8 must divide --layers 12") != std::string::npos);
    l = Layout{};
    l.dp = 8;
    s.mfu = std::nan("");
    QVERIFY(test::error_of([&] { plan_layout(s, l); }).find("--mfu nan: expected a number in (0, 1]") != std::string::npos);
    s.mfu = 0.4;
    l.zero = 5;
    QVERIFY(test::error_of([&] { plan_layout(s, l); }).find("--zero 5: expected an integer in [0, 3]") != std::string::npos);
    PlanSetup p = params_setup(1000, 2, 1);
    Layout one;
    one.zero = 1;
    QVERIFY(test::error_of([&] { plan_layout(p, one); }).find("needs DP >= 2") != std::string::npos);
    one.zero = 0;
    one.recompute = Recompute::Full;
    QVERIFY(test::error_of([&] { plan_layout(p, one); }).find("applies to transformers") != std::string::npos);
    // Beyond 10^18 bytes a GPU: refused, not overflowed.
    l.zero = 0;
    s.model.transformer.context = 1 << 24;
    s.micro_batch = 1 << 20;
    QVERIFY(test::error_of([&] { plan_layout(s, l); }).find("too large to plan") != std::string::npos);
  }
};

QTEST_APPLESS_MAIN(TestPlanFormulas)
#include "test_plan_formulas.moc"
