// The schema of every config key. Each section is one function; later features add a section.
//
// Ranges are what a careful user expects of each quantity, not the widest a type holds: a
// learning rate in (0, 10] (SGD diverges on the digits MLP well below 10), moment decays in [0, 1),
// counts of steps bounded by 1e9 (a billion steps is days of the smallest model), widths up to
// 65536. Float keys never take NaN or infinities (NumberRange::contains).
#include <cmath>

#include "config/config.h"

namespace trainlab {

namespace {

ConfigKey key_int(std::string k, int64_t def, double mn, double mx, std::string help, bool mid = false) {
  return {std::move(k), KeyType::Int, def, mn, mx, {}, std::move(help), mid};
}
ConfigKey key_float(std::string k, double def, double mn, double mx, std::string help, bool mid = false) {
  return {std::move(k), KeyType::Float, def, mn, mx, {}, std::move(help), mid};
}
// A float key whose range has an open end: (mn, mx] when min_open, [mn, mx) when max_open.
ConfigKey key_float_open(std::string k, double def, double mn, double mx, bool min_open, bool max_open, std::string help,
                         bool mid = false) {
  ConfigKey c = key_float(std::move(k), def, mn, mx, std::move(help), mid);
  c.min_open = min_open;
  c.max_open = max_open;
  return c;
}
ConfigKey key_bool(std::string k, bool def, std::string help, bool mid = false) {
  return {std::move(k), KeyType::Bool, def, 0, 1, {}, std::move(help), mid};
}
ConfigKey key_string(std::string k, std::string def, std::string help) {
  return {std::move(k), KeyType::String, def, 0, 0, {}, std::move(help), false};
}
ConfigKey key_enum(std::string k, std::string def, std::vector<std::string> choices, std::string help, bool mid = false) {
  return {std::move(k), KeyType::Enum, def, 0, 0, std::move(choices), std::move(help), mid};
}

void model_keys(std::vector<ConfigKey>& s) {
  s.push_back(key_enum("model.name", "digits-mlp", {"digits-mlp", "mlp", "char-gpt"},
                       "Network to train. digits-mlp: the 64-256-256-10 ReLU MLP (85,002 parameters); mlp: an MLP "
                       "with the hidden sizes of model.hidden. Input and output sizes come from the data set. char-gpt: "
                       "the character-level transformer of model.preset (trained on tinyshakespeare unless data.name "
                       "names another text). Choosing another model (or char-gpt preset) sets its own run length, "
                       "batch, learning rate, evaluation interval, data set and run name, except the ones you set "
                       "yourself."));
  s.push_back({"model.hidden", KeyType::IntList, Json::array({256, 256}), 1, 65536, {},
               "Hidden layer widths of the MLP. Parameters = sum over layers of (in + 1) x out; training costs about "
               "6 FLOPs per parameter per sample.",
               false});
  s.push_back(key_enum("model.activation", "relu", {"relu", "gelu"},
                       "Activation after each hidden layer: ReLU max(0, x), or GELU x * Phi(x) (exact erf form)."));
}

void data_keys(std::vector<ConfigKey>& s) {
  s.push_back(key_enum("data.name", "digits", {"digits", "fashion-mnist", "idx", "tinyshakespeare", "kjv", "text"},
                       "Data set. digits: 1,797 8x8 handwritten digits shipped with the lab; fashion-mnist: 70,000 "
                       "28x28 images from Debian's dataset-fashion-mnist; idx: MNIST-format files in data.path; "
                       "tinyshakespeare: 1.1M characters of Shakespeare (for char-gpt, also its default); kjv: 1.0M "
                       "characters of the King James Bible (Genesis to Judges, from Debian's bible-kjv-text, written "
                       "in Shakespeare's characters: a second style to fine-tune to); text: any UTF-8 text file in "
                       "data.path, one token per character."));
  s.push_back(key_string("data.path", "",
                         "File (digits CSV, gzip or plain) or folder (IDX files) to read; empty means the shipped "
                         "digits or /usr/share/datasets/fashion-mnist."));
  s.push_back(key_float("data.test_fraction", 0.2, 0.01, 0.99,
                        "Share of the digits held out as the test split after a seeded shuffle (0.2: 1,437 train / 360 "
                        "test). IDX data sets use their own test files."));
}

void train_keys(std::vector<ConfigKey>& s) {
  s.push_back(key_int("train.epochs", 30, 0, 1e6, "Passes over the training split (ignored when train.steps > 0)."));
  s.push_back(key_int("train.steps", 0, 0, 1e9, "Optimizer steps to run; 0 means train.epochs decides."));
  s.push_back(key_int("train.batch", 64, 1, 1 << 24,
                      "Samples per micro-batch. An uneven last batch of an epoch is dropped (drop-last)."));
  s.push_back(key_int("train.accumulate", 1, 1, 1 << 16,
                      "Gradient accumulation: k micro-batches forward and backward (loss scaled by 1/k), then one "
                      "optimizer step. Same gradient as a k-times larger batch, activation memory of one micro-batch.",
                      true));
  s.push_back(key_int("train.micro_batches", 0, 0, 1 << 16,
                      "Micro-batches per optimizer step, m: the same quantity as train.accumulate under the name the "
                      "pipeline schedules use (a pipeline step runs m micro-batches through its stages). 0: "
                      "train.accumulate decides; set either one (both set to different values is an error)."));
  s.push_back(key_int("train.seed", 1, 0, 9.2e18, "Seed of the initial weights, the split and the shuffles. Same seed and "
                                                  "config on the CPU: bit-identical results."));
  s.push_back(key_int("train.eval_every", 0, 0, 1e9,
                      "Evaluate on the test split every N optimizer steps (0: at the end of every epoch)."));
}

void optim_keys(std::vector<ConfigKey>& s) {
  s.push_back(key_enum("optim.name", "adamw", {"adamw", "sgd", "adamw8bit", "adafactor", "lion"},
                       "Optimizer (fixed for a run: its state cannot be carried into another's). AdamW keeps two "
                       "moments (8 bytes a parameter) with bias correction and decoupled weight decay; SGD with "
                       "momentum keeps one buffer (4 bytes); adamw8bit is AdamW with both moments stored as 8-bit "
                       "codes and one fp32 scale per block (optim.block_size; about 2 bytes); adafactor factors the "
                       "second moment of each matrix into row and column averages (4 (rows + cols) bytes a matrix, "
                       "4 a vector element; no first moment unless optim.adafactor_beta1 > 0); lion keeps one "
                       "momentum and steps by its sign (4 bytes, or 2 with optim.lion_state bf16; use a learning "
                       "rate 3-10 times smaller than AdamW's). Not with dist.strategy zero1-3 for adamw8bit, "
                       "adafactor and lion."));
  s.push_back(key_float_open("optim.lr", 1e-3, 0, 10, true, false,
                             "Peak learning rate (eta). Choosing a model sets its own (MLPs 1e-3, char-gpt tiny 2e-3, "
                             "small 1e-3, gpt2 6e-4, for AdamW), and choosing an optimizer scales it, unless you set "
                             "it yourself: Lion takes a tenth of AdamW's rate, because its sign update is larger than "
                             "Adam's (Chen et al. 2023 use 3-10 times smaller); SGD with momentum 50 times AdamW's, "
                             "as its step is not divided by the gradient's size; adamw8bit and Adafactor AdamW's.",
                             true));
  s.push_back(key_float_open("optim.beta1", 0.9, 0, 1, false, true,
                             "First-moment decay of AdamW and adamw8bit (m = b1 m + (1-b1) g) and Lion's "
                             "interpolation (c = b1 m + (1-b1) g)."));
  s.push_back(key_float_open("optim.beta2", 0.999, 0, 1, false, true,
                             "Second-moment decay of AdamW and adamw8bit (v = b2 v + (1-b2) g^2); Lion's momentum "
                             "decay (m = b2 m + (1-b2) g). Choosing Lion sets 0.99, its paper's value (a shorter "
                             "memory suits the sign update), and AdamW 0.999."));
  // eps > 0: with 0, a weight whose gradient is always 0 (a pruned one, an unused vocabulary row)
  // gets 0 / 0 = NaN.
  s.push_back(key_float_open("optim.eps", 1e-8, 0, 1, true, false, "AdamW denominator term: m_hat / (sqrt(v_hat) + eps)."));
  s.push_back(key_float("optim.weight_decay", 0.01, 0, 10,
                        "Decoupled weight decay: w -= lr * wd * w each step (AdamW, Lion), or added to the gradient "
                        "(SGD). Choosing an optimizer divides it by the factor its rate was multiplied by, as lr * "
                        "wd is the decay a step applies: Lion 10 times AdamW's (Chen et al. 2023), SGD a fiftieth "
                        "(2e-4 for AdamW's 0.01, SGD's customary L2)."));
  s.push_back(key_float_open("optim.momentum", 0.9, 0, 1, false, true, "SGD momentum: buf = mu buf + g; w -= lr buf."));
  s.push_back(key_bool("optim.nesterov", false, "SGD with Nesterov momentum: w -= lr (g + mu buf)."));
  s.push_back(key_int("optim.block_size", 2048, 256, 2048,
                      "adamw8bit: elements per quantization block, each with one fp32 scale (absmax) for m and for "
                      "v: 2048 or 256 (256 is finer, 0.03 bytes a parameter more)."));
  s.push_back(key_bool("optim.stable_embedding", false,
                       "adamw8bit: keep the embeddings' moments in 32 bit (8 bytes a parameter), as bitsandbytes' "
                       "StableEmbedding does; the other parameters stay 8-bit."));
  s.push_back(key_enum("optim.lion_state", "fp32", {"fp32", "bf16"},
                       "lion: the momentum's format, fp32 (4 bytes a parameter) or bf16 (2, rounded to nearest even)."));
  s.push_back(key_float_open("optim.adafactor_beta1", 0.0, 0, 1, false, true,
                             "adafactor: first-moment decay of the clipped update; 0 keeps no first moment."));
  s.push_back(key_bool("optim.relative_step", false,
                       "adafactor: step size min(1e-2, 1/sqrt(t)) * max(1e-3, RMS(w)) per tensor instead of the "
                       "learning rate (the schedule is then not used). Choosing adafactor turns it on, as its "
                       "authors (Shazeer and Stern 2018) and Hugging Face's Adafactor default it."));
  s.push_back(key_enum("optim.offload", "none", {"none", "cpu"},
                       "Where the fp32 master weights and the optimizer state live: none keeps them on the device; "
                       "cpu keeps them in pinned host memory, copies the gradients down after backward, runs the "
                       "update on the CPU (the CPU backend's optimizer) and copies the updated weights up (about 12 "
                       "bytes a parameter less device memory with AdamW in 16-bit, for the transfers' time). On the "
                       "CPU host memory is the device's: nothing is saved, the offload path still runs. With adamw, "
                       "sgd or lion; not with dist.strategy zero1-3, QAT or pruning; fixed for a run."));
  s.push_back(key_float("optim.clip_norm", 0.0, 0, 1e6,
                        "Gradient clipping: when the L2 norm of the whole gradient (every parameter together, and "
                        "every rank's share when several ranks train) exceeds this, the gradient is scaled down to "
                        "it before the update: g *= clip / norm. 0: no clipping. A step whose gradient is not finite "
                        "is not clipped (fp16 loss scaling skips it)."));
}

void schedule_keys(std::vector<ConfigKey>& s) {
  s.push_back(key_enum("schedule.name", "constant", {"constant", "warmup-cosine"},
                       "Learning-rate schedule: constant (after an optional linear warm-up), or linear warm-up then a "
                       "cosine decay to schedule.min_lr at the last step."));
  s.push_back(key_int("schedule.warmup_steps", 0, 0, 1e9, "Steps of linear warm-up from lr/warmup to lr."));
  s.push_back(key_float("schedule.min_lr", 0.0, 0, 10, "Learning rate at the end of the cosine decay."));
}

void precision_keys(std::vector<ConfigKey>& s) {
  s.push_back(key_enum("precision.dtype", "fp32", {"fp32", "tf32", "bf16", "fp16", "fp8"},
                       "Number format of weights, activations and gradients; fp32 master weights, fp32 accumulation, "
                       "softmax and loss in fp32. bf16 keeps fp32's range with 8 bits of precision; fp16 has 11 bits "
                       "but a range up to 65,504, so it needs loss scaling; tf32 rounds matrix-product inputs to 10 "
                       "mantissa bits; fp8 casts the linear layers' matrix-product inputs (e4m3 forward, e5m2 gradients, "
                       "per-tensor delayed scales): on fp8 units of a GPU, emulated exactly on the CPU (bf16 on a GPU "
                       "without them). "
                       "16-bit formats halve the bytes of weights, gradients and activations.",
                       true));
  s.push_back(key_float("precision.loss_scale.init", 65536.0, 1e-8, 1e30,
                        "fp16 dynamic loss scaling: initial scale S. The loss is multiplied by S before backward and "
                        "the gradients divided by S before the update."));
  s.push_back(key_int("precision.loss_scale.growth_interval", 2000, 1, 1e9,
                      "fp16 loss scaling: double S after this many good steps in a row (an inf/NaN gradient halves S "
                      "and skips the update)."));
  s.push_back(key_bool("precision.loss_scale.enabled", true, "Use dynamic loss scaling with fp16."));
}

void device_keys(std::vector<ConfigKey>& s) {
  s.push_back(key_string("device.name", "auto",
                         "cpu, cuda, cuda:N, or auto (the GPU when one works, otherwise the CPU with a notice)."));
  s.push_back(key_bool("device.cuda_graph", true,
                       "Capture the whole training step as a CUDA graph and replay it (removes launch overhead; a "
                       "tiny network is launch-bound)."));
  s.push_back(key_bool("device.kernel_timing", false,
                       "Time every kernel (CUDA events on a GPU, the host clock on the CPU; slower): shows where a "
                       "step's time goes and places each kernel on the roofline."));
  s.push_back(key_enum("device.calibration", "cached", {"cached", "measure", "off"},
                       "The device's measured peak FLOP/s per precision and bandwidth, for MFU and the roofline "
                       "(backend/calibration.h). cached: measured once per device, driver and lab version and kept "
                       "in the user's cache folder; measure: measured again now; off: MFU against the datasheet."));
  // How the CUDA backend computes (config/device_options.h; formerly the environment variables
  // TRAINLAB_FP32_GEMM, TRAINLAB_LT_AUTOTUNE and TRAINLAB_ATTN_WGMMA). The CPU ignores them.
  s.push_back(key_enum("device.fp32_gemm", "native", {"native", "bf16x9", "auto"},
                       "CUDA: how fp32 matrix products run on cuBLASLt. native: plain fp32 FMA; bf16x9: cuBLAS's "
                       "FP32-accurate emulation on the bf16 tensor cores (each operand split in three bf16 parts) "
                       "wherever it can; auto: the emulation only where cuBLAS expects it to be faster."));
  s.push_back(key_bool("device.lt_autotune", false,
                       "CUDA: time cuBLASLt's first 8 algorithms per product shape and keep the fastest (products "
                       "are then not bit-reproducible between runs)."));
  s.push_back(key_bool("device.attention_wgmma", true,
                       "CUDA: use the warpgroup-MMA attention kernels on compute capability 9.0 GPUs (bf16, head "
                       "dim 64); off runs the mma.sync kernels, with bit-identical results."));
}

void run_keys(std::vector<ConfigKey>& s) {
  s.push_back(key_string("run.out", "", "Run record folder; empty means runs/<date>-<time>-<model>-<precision>."));
  s.push_back(key_string("run.name", "", "A label for the run (shown in the runs table and reports)."));
  s.push_back(key_bool("run.save_weights", true, "Write the trained weights to model.safetensors."));
  s.push_back(key_int("run.checkpoint_every", 0, 0, 1e9,
                      "Write a checkpoint into the run folder every N steps and when the run is stopped: weights, "
                      "optimizer state, loss scaler, data order, RNG states and the step (atomically: the previous one "
                      "is kept until the new one is whole). trainlab-cli train --resume DIR (or Resume in the runs "
                      "table) then continues the run after any interruption, kill -9 included; on the CPU its losses "
                      "are bit-identical to an uninterrupted run's. 0: no checkpoints."));
}

// Compression (issue 5): quantization-aware training, pruning, distillation. The logic is in
// core/compress/compression.cpp.
void compress_keys(std::vector<ConfigKey>& s) {
  s.push_back(key_enum("quant.mode", "none", {"none", "qat"},
                       "Quantization-aware training: qat rounds every linear weight to quant.bits in the forward pass "
                       "(s = max|w|/qmax per granularity, q = clamp(round(w/s), -qmax, qmax)) and passes the gradient "
                       "through the rounding unchanged (straight-through estimator) to the fp32 master. Can be switched "
                       "on and off mid-run (applies at the next step).",
                       true));
  s.push_back(key_int("quant.bits", 4, 2, 8, "Bits a weight for QAT and the quantized weights file (2..8; qmax = 2^(b-1)-1).",
                      true));
  s.push_back(key_enum("quant.granularity", "channel", {"tensor", "channel", "group"},
                       "One scale for the whole tensor, per output channel (row), or per group of quant.group consecutive "
                       "weights along the input dimension. Finer scales cost 16 bits each: 4 bits with groups of 32 is "
                       "4.5 bits a weight.",
                       true));
  s.push_back(key_int("quant.group", 32, 1, 4096, "Weights per scale with granularity group (32, 64 or 128; must divide each "
                                                  "layer's input size).",
                      true));
  s.push_back(key_string("quant.overrides", "",
                         "Per-layer choices that replace the defaults: layer:bits[:granularity[:group]], comma separated, "
                         "e.g. net.4:8:channel keeps the classifier at 8 bits."));
  s.push_back(key_enum("quant.method", "rtn", {"rtn", "gptq", "awq"},
                       "Post-training quantization (trainlab-cli quantize, the sweep, the allocation, the quantize dialog): "
                       "rtn rounds each weight to nearest; gptq (Frantar et al. 2023) quantizes column by column and "
                       "spreads each rounding error over the columns not yet quantized through the Cholesky factor of "
                       "the inverse Hessian 2 X X^T of the layer's calibration inputs; awq (Lin et al. 2024) scales each "
                       "input channel by s = mean|x|^alpha (alpha searched in [0, 1] for the smallest output error), "
                       "folds 1/s into the operation before the layer, then rounds to nearest. Same file format."));
  s.push_back(key_int("quant.calibration", 16, 0, 1 << 16,
                      "gptq and awq: calibration data from the training split, batches of train.batch rows (digits) or "
                      "windows of the model's context (char-gpt). 0 = none (rtn needs none)."));
  s.push_back(key_float_open("quant.damp", 0.01, 0, 1, true, false,
                             "gptq: dampening added to the Hessian's diagonal, as a fraction of its mean diagonal "
                             "(0.01 = the paper's 1%). Raise it when the Hessian is reported not positive definite."));
  s.push_back(key_bool("quant.act_order", false,
                       "gptq: quantize the columns by descending Hessian diagonal (the inputs with the most energy "
                       "first); group scales are then taken from the original weights (static groups)."));
  s.push_back(key_int("quant.calibration_batches", 8, 1, 1 << 20,
                      "W8A8: batches of the training split used to calibrate the activation scales (max |x| / 127 per "
                      "layer input)."));
  s.push_back(key_enum("prune.method", "none", {"none", "magnitude", "gradual", "2:4"},
                       "Pruning: magnitude removes the smallest |w| once at prune.start_step (fine-tuning for the rest of "
                       "the run); gradual raises sparsity on Zhu and Gupta's cubic schedule s_t = s_f + (s_i - s_f)(1 - "
                       "(t - t0)/(n dt))^3 at t0, t0+dt, ..., t0+n dt; 2:4 keeps the 2 largest of every 4 weights along "
                       "the input dimension. Masks stay applied through every later update."));
  s.push_back(key_float("prune.sparsity", 0.9, 0.0, 0.999, "Target (final) fraction of linear weights set to zero."));
  s.push_back(key_float("prune.initial_sparsity", 0.0, 0.0, 0.999, "Gradual pruning: sparsity s_i at the first pruning step."));
  s.push_back(key_int("prune.start_step", 0, 0, 1e9, "Step of one-shot or 2:4 pruning, or t0 of the gradual schedule."));
  s.push_back(key_int("prune.interval", 10, 1, 1e9, "Gradual pruning: steps dt between pruning steps (fine-tuning between)."));
  s.push_back(key_int("prune.n_steps", 10, 1, 1e9, "Gradual pruning: number n of pruning steps after t0; the final sparsity "
                                                   "is reached at t0 + n dt."));
  s.push_back(key_enum("prune.scope", "layer", {"layer", "global"},
                       "Magnitude threshold per layer (each matrix to the target sparsity) or one global threshold over "
                       "all pruned matrices (layers end up with different sparsities)."));
  s.push_back(key_bool("prune.include_output", true, "Prune the output (classifier) layer too."));
  s.push_back(key_bool("prune.rewind", false,
                       "Lottery ticket: after one-shot magnitude pruning, reset the surviving weights (and all biases) to "
                       "their values at prune.rewind_step and restart the optimizer's moments."));
  s.push_back(key_int("prune.rewind_step", 0, 0, 1e9, "Lottery ticket: step whose weights the ticket rewinds to (0: the "
                                                       "initialisation)."));
  s.push_back(key_float("prune.now", 0.0, 0.0, 0.999,
                        "Prune now: set mid-run to a sparsity to remove the smallest weights at the next step (by magnitude, "
                        "prune.scope); 0 does nothing.",
                        true));
  s.push_back(key_string("compress.init_from", "",
                         "Weights file (fp32 or quantized) to start from instead of the seeded initialisation: fine-tuning "
                         "a trained run (pruning + fine-tune, QAT from a trained model)."));
  s.push_back(key_string("distill.teacher", "",
                         "Teacher weights file (a finished run's model.safetensors, any MLP size): the student learns "
                         "L = alpha T^2 KL(p_t^T || p_s^T) + (1 - alpha) CE. Empty: no distillation."));
  s.push_back(key_float("distill.alpha", 0.5, 0.0, 1.0, "Distillation: weight alpha of the soft (teacher) term."));
  s.push_back(key_float("distill.temperature", 4.0, 0.05, 100.0,
                        "Distillation: temperature T softening both distributions; T^2 keeps the soft gradient's size."));
}

// The character transformer (issue 4): nn/transformer.h.
void transformer_keys(std::vector<ConfigKey>& s) {
  s.push_back(key_enum("model.preset", "tiny", {"tiny", "small", "gpt2"},
                       "char-gpt size: tiny 2 layers x 4 heads x 128 wide, context 64 (0.4M parameters; the peer "
                       "uses batch 32); small 6 x 6 x 384, context 256 (10.7M; batch 64); gpt2 12 x 12 x 768, context "
                       "1024 (85M; batch 16). model.layers/heads/dim/context override single dimensions."));
  s.push_back(key_int("model.layers", 0, 0, 1024, "char-gpt transformer blocks (0: from model.preset)."));
  s.push_back(key_int("model.heads", 0, 0, 1024, "char-gpt attention heads; must divide model.dim (0: from model.preset)."));
  s.push_back(key_int("model.dim", 0, 0, 65536, "char-gpt width d of the residual stream; the MLP is 4d wide (0: from "
                                                "model.preset)."));
  s.push_back(key_int("model.context", 0, 0, 1 << 20, "char-gpt context: characters a window holds (0: from model.preset)."));
  s.push_back(key_bool("model.pad_vocab", false,
                       "Pad the vocabulary (65 characters) up to a multiple of 64 (128): the embedding and the "
                       "classifier get rows for tokens that never occur, in exchange for matrix shapes that tile "
                       "evenly. The weights then have 128-row shapes."));
  s.push_back(key_float("model.dropout", 0.0, 0.0, 0.9, "char-gpt dropout probability p: during training the embedding output and each residual branch keep an element with probability 1-p, scaled by 1/(1-p) (nanoGPT uses 0.2 on Shakespeare)."));
  s.push_back(key_enum("checkpoint.policy", "off", {"off", "every-block", "every-k", "selective"},
                       "Activation checkpointing: off keeps every activation for backward; every-block keeps only each "
                       "block's input and recomputes the block during backward; every-k keeps the input of every "
                       "k-th block (k = checkpoint.k, memory ~ L/k + k blocks); selective keeps the matrix-product "
                       "outputs and recomputes LayerNorm and GELU outputs. Gradients are bit-identical in every mode.",
                       true));
  s.push_back(key_int("checkpoint.k", 0, 0, 1024, "Blocks per segment for every-k (0: round(sqrt(layers))).", true));
  s.push_back(key_float("data.val_fraction", 0.1, 0.01, 0.9,
                        "Text data: share of the text held out for validation, as whole chunks of 16,384 characters "
                        "chosen by a seeded shuffle (0.1: 90/10)."));
  s.push_back(key_int("train.eval_windows", 256, 1, 1 << 24,
                      "Text data: validation windows (a fixed, seeded set) averaged for the validation loss."));
}

// Several ranks (issue 17): core/dist, config/dist_options.h. dist.* keys cannot change mid-run:
// every rank must apply a change at the same step, which a per-process command queue cannot promise.
void dist_keys(std::vector<ConfigKey>& s) {
  s.push_back(key_enum("dist.strategy", "ddp", {"ddp", "zero1", "zero2", "zero3"},
                       "How several ranks (processes, one device each) train one model. ddp: every rank keeps the "
                       "whole model and optimizer and the ranks sum their gradients (all-reduce). zero1: each rank "
                       "keeps the optimizer state of its 1/N of the parameters (reduce-scatter of the gradients, "
                       "update of the shard, all-gather of the parameters); zero2: the gradients too; zero3: the "
                       "parameters too, gathered layer by layer for the forward and backward. train.batch is the "
                       "global batch: each rank computes batch/N of it. With one rank, ddp is plain training and a "
                       "ZeRO stage is an error."));
  s.push_back(key_float("dist.bucket_mb", 25.0, 0.001, 4096,
                        "MiB of gradients per bucket: a bucket is reduced over the ranks as soon as the backward pass "
                        "has written its last gradient, while the backward goes on (as PyTorch DDP's 25 MiB)."));
  s.push_back(key_int("dist.ranks", 0, 0, 4096,
                      "Ranks to start on this machine: trainlab-cli train --ranks N starts N processes through "
                      "mpirun (--gpus N: one GPU each). 0: as many as the launcher (mpirun, srun) started, 1 without "
                      "one. Under a launcher, a value other than 0 must equal its number of ranks."));
  s.push_back(key_float("dist.timeout_s", 300.0, 1, 86400,
                        "Seconds a rank waits for one collective before it ends the whole job with an error naming "
                        "the collective (a rank that died or hangs never leaves the others waiting for ever)."));
  s.push_back(key_int("dist.tp", 1, 1, 4096,
                      "Tensor-parallel degree t (char-gpt only): each block split over t adjacent ranks as in "
                      "Megatron-LM: qkv and fc column-parallel, proj and out row-parallel, the heads split, the "
                      "embedding and the output layer split by vocabulary with a cross-entropy that never gathers "
                      "the logits. The ranks form ranks/t data-parallel replicas (dist.strategy over them). t must "
                      "divide the ranks, model.heads and 4 x model.dim."));
  s.push_back(key_bool("dist.sequence_parallel", false,
                       "With dist.tp > 1: LayerNorm, dropout and the residual stream on 1/t of each micro-batch's "
                       "tokens per rank (Korthikanti et al. 2022): all-gather before the column-parallel products "
                       "and reduce-scatter after the row-parallel ones instead of the all-reduces. The context must "
                       "divide by dist.tp."));
  s.push_back(key_int("dist.pp", 1, 1, 1024,
                      "Pipeline-parallel degree p (char-gpt only): the blocks split into p consecutive stages on p "
                      "ranks (the embedding on the first, the final LayerNorm, the output layer and the loss on the "
                      "last), activations sent forward and their gradients back point to point, train.micro_batches "
                      "micro-batches a step in the order of dist.schedule. The ranks are dist.tp x data-parallel "
                      "replicas x dist.pp (Megatron-LM's order: tensor innermost, pipeline outermost); p must not "
                      "exceed model.layers."));
  s.push_back(key_enum("dist.schedule", "1f1b", {"gpipe", "1f1b", "interleaved", "zb-h1"},
                       "Pipeline schedule (with dist.pp > 1). gpipe: all forwards, then all backwards (holds every "
                       "micro-batch's activations); 1f1b: warm-up, one forward one backward, cool-down (stage i holds "
                       "min(p - i, m)); interleaved: dist.virtual_stages chunks of layers per rank, a bubble v times "
                       "smaller (m a multiple of p, p x v dividing model.layers); zb-h1: 1f1b with each backward split "
                       "into the input gradient and the weight gradient, which fills the bubble (Qi et al. 2023)."));
  s.push_back(key_int("dist.virtual_stages", 1, 1, 1024,
                      "Model chunks per pipeline rank, v (dist.schedule interleaved only; 1 otherwise): chunk c of "
                      "rank s is virtual stage c p + s."));
  {
    ConfigKey k{"dist.stage_layers", KeyType::IntList, Json::array(), 0, 1024, {},
                "Blocks of each pipeline stage, first to last (p entries, or p x v under interleaving, each at "
                "least 1, summing to model.layers). Empty: balanced (model.layers / stages each, the first stages "
                "one more where it does not divide).",
                false};
    k.empty_list_ok = true;
    s.push_back(k);
  }
  s.push_back(key_enum("dist.transport", "auto", {"auto", "nccl", "mpi"},
                       "How GPU ranks exchange tensors. nccl: device buffers through NCCL (one GPU a rank); mpi: "
                       "device buffers staged through host memory and sent with MPI (several ranks may share one GPU, "
                       "which NCCL refuses: a correctness setup, not a fast one); auto: nccl where every rank has a "
                       "GPU of its own, else mpi. CPU ranks always use MPI."));
}

// Fine-tuning a trained model (core/finetune/, docs/FINETUNE.md): compress.init_from names it.
void finetune_keys(std::vector<ConfigKey>& s) {
  s.push_back(key_enum("finetune.method", "full", {"full", "lora", "qlora", "dora"},
                       "How the weights of compress.init_from are adapted. full: every weight trains; lora: the "
                       "targets' weights W are frozen and W x + (alpha/rank) B A x trains A and B only; qlora: lora "
                       "over a frozen base stored in NF4 (blocks of 64, double-quantized scales: 4.127 bits a "
                       "weight); dora: lora's direction plus a trained magnitude per output row. lora, qlora and "
                       "dora need char-gpt, compress.init_from and the CPU device."));
  s.push_back(key_int("finetune.rank", 8, 1, 4096,
                      "Rank r of the adapters A [r, in] and B [out, r]; at most a target's smaller dimension."));
  s.push_back(key_float_open("finetune.alpha", 16.0, 0.0, 1e4, true, false,
                             "Adapter scale numerator: the product adds (alpha / rank) B A x."));
  s.push_back(key_string("finetune.targets", "qkv,proj,fc1,fc2",
                         "Comma-separated char-gpt products the adapters wrap: any of qkv, proj, fc1 (fc), fc2 (out) "
                         "and head, in every block."));
}

std::vector<ConfigKey> build_schema() {
  std::vector<ConfigKey> s;
  model_keys(s);
  data_keys(s);
  train_keys(s);
  optim_keys(s);
  schedule_keys(s);
  precision_keys(s);
  device_keys(s);
  run_keys(s);
  transformer_keys(s);
  compress_keys(s);
  dist_keys(s);
  finetune_keys(s);
  return s;
}

}  // namespace

const std::vector<ConfigKey>& config_schema() {
  static const std::vector<ConfigKey> schema = build_schema();
  return schema;
}

}  // namespace trainlab
