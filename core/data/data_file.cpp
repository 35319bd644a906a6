#include "data/data_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "util/error.h"

namespace trainlab {

namespace {

// Closes its descriptor (named apart from safetensors_read.cpp's Fd: one unity unit may hold both).
struct OpenFile {
  int fd;
  ~OpenFile() {
    if (fd >= 0) ::close(fd);
  }
};

std::string too_large(const std::string& origin, const char* what, int64_t max_bytes) {
  return origin + ": " + what + " more than " + std::to_string(max_bytes) + " bytes (expected a data file of at most " +
         std::to_string(max_bytes) + " bytes)";
}

}  // namespace

std::string read_regular_file(const std::string& path, int64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused just below).
  OpenFile f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)};
  if (f.fd < 0) throw Error(path + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) throw Error(path + ": cannot read (" + std::strerror(errno) + ")");
  if (S_ISDIR(st.st_mode)) throw Error(path + ": is a folder (expected a data file)");
  if (!S_ISREG(st.st_mode)) throw Error(path + ": not a regular file (a device, pipe or socket; expected a data file)");
  if (st.st_size > max_bytes) throw Error(too_large(path, "holds", max_bytes));
  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(path + ": cannot read (" + std::strerror(errno) + ")");
    }
    if (n == 0) break;
    if (static_cast<int64_t>(out.size()) + n > max_bytes) throw Error(too_large(path, "holds", max_bytes));  // it grew
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

std::string maybe_gunzip(std::string_view bytes, const std::string& origin, int64_t max_bytes) {
  const auto is_gzip = [](std::string_view b) {
    return b.size() >= 2 && static_cast<unsigned char>(b[0]) == 0x1f && static_cast<unsigned char>(b[1]) == 0x8b;
  };
  if (!is_gzip(bytes)) {
    if (static_cast<int64_t>(bytes.size()) > max_bytes) throw Error(too_large(origin, "holds", max_bytes));
    return std::string(bytes);
  }
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
    throw Error(origin + ": cannot start gzip decompression (out of memory?)");
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&zs};
  std::string out;
  size_t pos = 0;  // bytes handed to zlib so far
  char buf[1 << 16];
  for (;;) {
    if (zs.avail_in == 0 && pos < bytes.size()) {  // avail_in is 32 bits: feed at most 1 GiB at a time
      const size_t n = std::min<size_t>(bytes.size() - pos, size_t(1) << 30);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data() + pos));
      zs.avail_in = static_cast<uInt>(n);
      pos += n;
    }
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    const int rc = inflate(&zs, Z_NO_FLUSH);
    const size_t produced = sizeof buf - zs.avail_out;
    if (static_cast<int64_t>(out.size() + produced) > max_bytes)
      throw Error(too_large(origin, "decompresses to", max_bytes));
    out.append(buf, produced);
    if (rc == Z_STREAM_END) {
      // Another gzip member may follow (concatenated .gz files); anything else after the end is
      // ignored, as gzip and zlib's gzread do.
      const std::string_view rest = bytes.substr(pos - zs.avail_in);
      if (!is_gzip(rest)) break;
      if (inflateReset(&zs) != Z_OK) throw Error(origin + ": corrupt gzip data");
      continue;
    }
    if (rc == Z_BUF_ERROR || (rc == Z_OK && zs.avail_in == 0 && pos == bytes.size() && produced == 0))
      throw Error(origin + ": truncated gzip file (it ends in the middle of the compressed stream)");
    if (rc != Z_OK)
      throw Error(origin + ": corrupt gzip data (" + (zs.msg ? std::string(zs.msg) : std::string("zlib error")) + ")");
  }
  return out;
}

std::string read_maybe_gzip(const std::string& path, int64_t max_bytes) {
  return maybe_gunzip(read_regular_file(path, max_bytes), path, max_bytes);
}

}  // namespace trainlab
