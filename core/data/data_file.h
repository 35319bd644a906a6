// The bytes of a data file (digits CSV, IDX, text), read with every bound checked before a byte is
// parsed: only regular files are read (a folder, a device such as /dev/zero, a FIFO or a socket is
// refused before any read), a file larger than its bound is refused from its size, and gzip data is
// inflated (every member, as gzip does) only up to the same bound, so a gzip bomb ends in an error
// instead of exhausting memory. Errors name the file and what was expected; never its bytes.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace trainlab {

// 1 GiB: the most bytes a data file (or its gunzipped content) may hold. Fashion-MNIST's largest
// file is 47 MB; tokens and sample indices are int32, and IDX pixels become 4-byte floats.
constexpr int64_t kMaxDataFileBytes = int64_t(1) << 30;

// The whole of a regular file, at most `max_bytes` long. Throws Error naming `path`.
std::string read_regular_file(const std::string& path, int64_t max_bytes = kMaxDataFileBytes);

// `bytes` inflated when they start with the gzip magic number (1f 8b), else as they are; at most
// `max_bytes` out. Throws Error naming `origin` for corrupt, truncated or oversized data.
std::string maybe_gunzip(std::string_view bytes, const std::string& origin, int64_t max_bytes = kMaxDataFileBytes);

// read_regular_file then maybe_gunzip: the content of a data file, gzip-compressed or plain.
std::string read_maybe_gzip(const std::string& path, int64_t max_bytes = kMaxDataFileBytes);

}  // namespace trainlab
