// CudaBackend's device collectives in a build without NCCL (TRAINLAB_NCCL off): none.
#include "backend/collectives.h"
#include "backend/cuda/cuda_backend.h"

namespace trainlab::cuda {

bool CudaBackend::supports_collectives() const { return false; }

std::vector<uint8_t> CudaBackend::new_collectives_id() { return Backend::new_collectives_id(); }

std::unique_ptr<DeviceCollectives> CudaBackend::create_collectives(const std::vector<uint8_t>& id, int rank, int size) {
  return Backend::create_collectives(id, rank, size);
}

}  // namespace trainlab::cuda
