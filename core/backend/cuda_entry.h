// The CUDA backend's entry points. The backend is a separate shared module (libtrainlab_cuda.so,
// built from core/backend/cuda/) that backend_factory.cpp -- the one place where
// TRAINLAB_WITH_CUDA is tested -- loads with dlopen at run time, so a binary built with CUDA
// still runs on a machine with no GPU, no driver and no CUDA libraries. The module exports these
// C symbols; errors come back as text in `err` (C++ exceptions do not cross the boundary).
#pragma once

namespace trainlab {
class Backend;
struct DeviceOptions;
}

// 2: Backend::create_decoder (token decoding). 3: matrix-product modes as arguments,
// supports(Op, DType), DeviceOptions at creation; create_decoder takes DecodeWeights. 5: device
// collectives (supports_collectives, new_collectives_id, create_collectives: backend/collectives.h).
#define TRAINLAB_CUDA_MODULE_ABI 5

extern "C" {
// TRAINLAB_CUDA_MODULE_ABI of the module.
typedef int (*trainlab_cuda_abi_fn)();
// Number of usable CUDA devices; 0 with the reason in `why` (no driver, driver too old, no device).
typedef int (*trainlab_cuda_device_count_fn)(char* why, int why_len);
// A new CudaBackend on device `index` computing as `options` say (config/device_options.h; the
// struct of the same source tree, which the ABI number pins), or nullptr with the reason in `err`.
typedef trainlab::Backend* (*trainlab_cuda_create_fn)(int index, const trainlab::DeviceOptions* options, char* err,
                                                      int err_len);
}
