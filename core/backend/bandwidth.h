// The streaming bandwidth of a device, measured: bytes read plus bytes written a second by a large
// copy on it (cudaMemcpyAsync device to device on a GPU, memmove on the CPU), as
// shared/bench/peer_torch_decode.py measures PyTorch's. It is the ceiling that weight-bound work
// approaches -- decoding one token reads every weight once -- so decode figures are stated as a
// fraction of it rather than of a datasheet number.
#pragma once
#include <cstdint>

namespace trainlab {

class Backend;

struct CopyBandwidth {
  double bytes_per_s = 0.0;  // (read + written) bytes / s, the best of `reps` timed copies
  int64_t buffer_bytes = 0;  // the size of one copy's source
  int reps = 0;
};

// Copies a `buffer_bytes` buffer (0: 1 GiB on a GPU, 256 MiB on the CPU, both far beyond the
// caches) after two untimed copies; each of `reps` copies is timed on its own and the fastest
// counts. The figure is cached per device name for the process (the first call takes about
// 0.1 s on a GPU, 0.5 s on the CPU).
CopyBandwidth measure_copy_bandwidth(Backend& be, int64_t buffer_bytes = 0, int reps = 5);

}  // namespace trainlab
