#include "nn/parameter.h"

namespace trainlab {

DType parameter_storage_dtype(DType compute) {
  return (compute == DType::F8E4M3 || compute == DType::F8E5M2) ? DType::BF16 : compute;
}

void Parameter::set_compute_dtype(Backend& be, DType dtype) {
  // 16-bit formats keep an fp32 master (counted with the optimizer).
  const DType store = parameter_storage_dtype(dtype);
  if (store == DType::F32) {
    master.set_category(MemCategory::Weights);
    value = master;
  } else {
    master.set_category(MemCategory::Optimizer);
    if (!value.defined() || value.same_storage(master) || value.dtype() != store) {
      value = Tensor();
      value = be.empty(shape, store, MemCategory::Weights);
    }
    be.copy(master, value);
  }
  if (!grad.defined() || grad.dtype() != store) {
    grad = Tensor();
    grad = be.empty(shape, store, MemCategory::Gradients);
    be.fill(grad, 0.0f);
  }
}

}  // namespace trainlab
