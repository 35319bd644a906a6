// The training benchmarks of `trainlab-cli bench` (the cases of ../shared/bench, the PyTorch
// peer): same work as the peer, one JSON object per case and mode, whose keys
// tools/bench_tables.py and BENCHMARKS.md read. Benchmarks, not tests. Each case chooses its
// formats through the precision policy (train/precision.h).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "backend/backend.h"
#include "train/training_step.h"

namespace trainlab {

// `warmup` untimed steps, then the mean wall time in seconds of `steps` whole training steps (the
// backend's step capture on, replayed under `key`), synchronised at both ends so that
// asynchronous devices are timed properly. The ledger's peaks restart after the warm-up.
double seconds_per_training_step(Backend& be, TrainingStep& step, float lr, const std::string& key, long warmup,
                                 long steps);

// case digits: the digits training step, MLP 64-256-256-10, batch 128, AdamW lr 1e-3, one fixed
// batch. mode: a precision (fp32, tf32, bf16, fp16, fp8), "-nograph" appended to run without
// CUDA graphs.
nlohmann::json bench_digits_step(const std::string& device, const std::string& mode, long steps, long warmup);

// case digits-train: the whole digits training as the CPU peer runs it (batch 64, AdamW 1e-3,
// 80/20 split) for `epochs` epochs, through the Trainer, in a temporary run folder.
nlohmann::json bench_digits_train(const std::string& device, const std::string& precision, long epochs);

// cases char-tiny, char-small, char-gpt2: the peer's character-GPT training step
// (peer_torch_cpu.py char-tiny, peer_torch.py char-small / char-gpt2): same shapes, batch, AdamW,
// one fixed batch of random windows of the first 100,000 (tiny) / 200,000 characters. mode:
// fp32, tf32, bf16 (CUDA: fp16 too), each with -ckpt for checkpointing every block. peak_mib is
// the ledger's peak of every allocation the lab made (parameters, gradients, optimizer state,
// activations, workspaces), the counterpart of torch.cuda.max_memory_allocated;
// activation_predicted_mib is plan/memory_model.h's count of the step's activation buffers.
nlohmann::json bench_char_step(const std::string& device, const std::string& name, const std::string& mode, long steps,
                               long warmup);

// case scaling: data parallelism's measured scaling efficiency. The digits MLP trains `steps`
// steps of a global batch of kScalingBatch (seed 1) through `trainlab-cli train` twice: on one
// rank, then on `ranks` ranks with dist.strategy `strategy` (ddp, zero1..3; mpirun starts them as
// --ranks does, each rank with its share of the cores or its GPU). From each run record, the mean
// step time of steps 2.. (step 1 warms up): speedup = t1 / tN, scaling_efficiency = speedup / N
// (strong scaling: 1.0 when N ranks take 1/N of the time). efficiency_estimate is the N-rank run's
// own figure (metrics.h, DistTimeTotals). Runs only inside trainlab-cli (it starts itself).
inline constexpr int kScalingBatch = 256;
nlohmann::json bench_scaling(const std::string& device, const std::string& strategy, int ranks, long steps);

// case optim: the optimizer step alone over the parameters of the char-gpt preset (char-gpt2: 85M
// parameters) in bf16 mixed precision (bf16 weights and gradients, fp32 masters), the gradients a
// constant: mean wall time of `steps` steps after `warmup` (synchronised at both ends), the state's
// bytes measured by the ledger (optimizer memory without the fp32 masters) beside
// plan/memory_model.h's optimizer_state_bytes. mode: adamw, sgd, adamw8bit, adafactor, lion,
// lion-bf16. The PyTorch side: tools/optim_peer.py (torch.optim.AdamW fused on the same shapes).
nlohmann::json bench_optim_step(const std::string& device, const std::string& preset, const std::string& mode,
                                long steps, long warmup);

}  // namespace trainlab
