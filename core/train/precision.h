// The precision policy: one table from a precision name (precision.dtype, the benchmarks' modes)
// to what the name means, used by the trainer and the benchmarks alike:
//
//   name  compute format  parameters/activations  loss scaling  matrix products
//   fp32  F32             fp32                    off           Native (fp32 inputs)
//   tf32  F32             fp32                    off           Tf32 (inputs rounded to a 10-bit mantissa)
//   bf16  BF16            bf16, fp32 master       off           Native (bf16 inputs, fp32 accumulation)
//   fp16  F16             fp16, fp32 master       dynamic       Native (fp16 inputs, fp32 accumulation)
//   fp8   F8E4M3          bf16, fp32 master       off           Fp8 (e4m3 forward, e5m2 gradients, per-tensor
//                                                               scales; CPU: emulated exactly; no fp8 units: bf16)
//
// The compute format is what Model::set_compute_dtype receives (an fp8 run's parameters are
// stored in bf16: nn/parameter.cpp). The device's peak throughput for MFU is looked up by it.
#pragma once
#include <string>
#include <vector>

#include "backend/backend.h"
#include "nn/model.h"
#include "plan/memory_model.h"

namespace trainlab {

struct PrecisionPolicy {
  std::string name;
  DType compute = DType::F32;          // Model::set_compute_dtype; also the format Backend::supports is asked
  bool loss_scaling = false;           // dynamic loss scaling (optim/loss_scaler.h) when the config enables it
  MatmulMode matmul = MatmulMode::Native;
  // Bytes per element of parameters, gradients and activations in the memory prediction
  // (plan/memory_model.h's precision_element_bytes): 4 for fp32 and tf32, 2 for the 16-bit
  // formats and fp8 (bf16 storage).
  int64_t element_bytes() const { return precision_element_bytes(compute); }
};

// Every policy, in the order of the table above.
const std::vector<PrecisionPolicy>& precision_policies();
// The policy of `name`; throws Error naming the valid names for any other.
const PrecisionPolicy& precision_policy(const std::string& name);

// Throws Error when `be` cannot compute in the policy's format, naming the formats it has.
void require_precision(const Backend& be, const PrecisionPolicy& p);
// Applies a policy to a built model: its compute format and the matrix-product mode the model
// passes to every product. The one place a run's matmul mode is set.
void apply_precision(Backend& be, Model& model, const PrecisionPolicy& p);

}  // namespace trainlab
