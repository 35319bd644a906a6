#include "train/precision.h"

#include "util/error.h"

namespace trainlab {

const std::vector<PrecisionPolicy>& precision_policies() {
  static const std::vector<PrecisionPolicy> table{
      {"fp32", DType::F32, false, MatmulMode::Native},
      {"tf32", DType::F32, false, MatmulMode::Tf32},
      {"bf16", DType::BF16, false, MatmulMode::Native},
      {"fp16", DType::F16, true, MatmulMode::Native},
      {"fp8", DType::F8E4M3, false, MatmulMode::Fp8},
  };
  return table;
}

const PrecisionPolicy& precision_policy(const std::string& name) {
  std::string names;
  for (const PrecisionPolicy& p : precision_policies()) {
    if (p.name == name) return p;
    names += (names.empty() ? "" : ", ") + p.name;
  }
  throw Error("unknown precision '" + name + "': expected one of " + names);
}

void require_precision(const Backend& be, const PrecisionPolicy& p) {
  if (be.supports(p.compute)) return;
  std::string have;
  for (DType t : be.info().formats) have += (have.empty() ? "" : ", ") + std::string(dtype_name(t));
  throw Error("precision " + p.name + " is not available on " + be.info().name + " (it has " + have + ")");
}

void apply_precision(Backend& be, Model& model, const PrecisionPolicy& p) {
  model.set_compute_dtype(be, p.compute);
  model.set_matmul_mode(p.matmul);
}

}  // namespace trainlab
