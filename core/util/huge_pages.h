// Advice for large buffers about to be filled whole (a long run's record as it is read).
#pragma once
#include <cstddef>
#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace trainlab {

// Asks Linux for transparent huge pages (madvise MADV_HUGEPAGE, which THP's usual "madvise" mode
// waits for) over the whole 4 KiB pages of [data, data + bytes), before they are first written:
// filling 86 MB then takes 43 page faults of 2 MiB instead of 22,000 of 4 KiB. On the shared
// development VM a 4 KiB fault costs about 30 us: filling 86 MB took 0.67 s, 0.05 s with the advice
// (bench_record_load: an hour's record, docs/RUN_RECORD.md). Advice only: a buffer under 4 MiB, a
// kernel without THP or another system changes nothing, and no error is reported.
inline void advise_huge_pages(const void* data, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kPage = 4096;
  if (bytes < (size_t{4} << 20)) return;
  const auto begin = (reinterpret_cast<uintptr_t>(data) + kPage - 1) & ~(kPage - 1);
  const auto end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kPage - 1);
  if (end > begin) static_cast<void>(::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE));
#else
  static_cast<void>(data);
  static_cast<void>(bytes);
#endif
}

}  // namespace trainlab
