// The CUDA backend's entry points, seen by backend_factory.cpp only (the one place where
// TRAINLAB_WITH_CUDA is tested). Implemented in core/backend/cuda/.
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"

namespace trainlab {

// Number of usable CUDA devices; 0 with `why` set (no driver, driver too old, no device) otherwise.
int cuda_device_count(std::string* why);
std::unique_ptr<Backend> create_cuda_backend(int device_index);

}  // namespace trainlab
