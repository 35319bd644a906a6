#include "util/safe_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <zlib.h>

#include "util/error.h"

namespace trainlab {

void throw_file_error(const std::string& path, const std::string& operation, int err) {
  if (err == ELOOP)
    throw Error(path +
                " is a symbolic link: the lab does not write through links in a run folder (remove the link "
                "or choose another folder)");
  throw Error(path + ": " + operation + " (" + std::strerror(err) + ")");
}

namespace {

// Writes all `n` bytes; returns 0, or the errno of the write that failed (after `*done` bytes).
int write_all(int fd, const char* p, size_t n, size_t* done) {
  *done = 0;
  while (*done < n) {
    const ssize_t w = ::write(fd, p + *done, n - *done);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (w == 0) return EIO;
    *done += static_cast<size_t>(w);
  }
  return 0;
}

// fsync of the folder holding `path`, so that a rename survives a power loss. Filesystems that
// cannot sync a folder (EINVAL) are left alone.
void sync_parent(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL && err != EROFS) throw_file_error(dir, "cannot sync the folder", err);
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : m_path(std::move(path)), m_tmp(m_path + ".part") {
  // A .part left by a killed writer (or a link planted there) is removed, not followed.
  if (::unlink(m_tmp.c_str()) != 0 && errno != ENOENT) throw_file_error(m_tmp, "cannot replace", errno);
  m_fd = ::open(m_tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (m_fd < 0) throw_file_error(m_tmp, "cannot write", errno);
}

AtomicFile::~AtomicFile() {
  if (m_fd >= 0) {
    ::close(m_fd);
    ::unlink(m_tmp.c_str());
  }
}

void AtomicFile::write(const void* data, size_t n) {
  if (m_fd < 0) throw Error(m_path + ": written after it was committed");
  size_t done = 0;
  if (const int err = write_all(m_fd, static_cast<const char*>(data), n, &done))
    throw_file_error(m_path, "cannot write", err);
}

void AtomicFile::commit() {
  if (m_fd < 0) throw Error(m_path + ": committed twice");
  if (::fsync(m_fd) != 0) throw_file_error(m_path, "cannot write", errno);
  const int fd = m_fd;
  m_fd = -1;
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(m_tmp.c_str());
    throw_file_error(m_path, "cannot write", err);
  }
  if (::rename(m_tmp.c_str(), m_path.c_str()) != 0) {
    const int err = errno;
    ::unlink(m_tmp.c_str());
    throw_file_error(m_path, "cannot move into place", err);
  }
  sync_parent(m_path);
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  AtomicFile f(path);
  f.write(bytes);
  f.commit();
}

AppendFile::AppendFile(std::string path, bool truncate) : m_path(std::move(path)) {
  m_fd =
      ::open(m_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC | (truncate ? O_TRUNC : 0), 0644);
  if (m_fd < 0) throw_file_error(m_path, "cannot write", errno);
  struct stat st {};
  if (::fstat(m_fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(m_fd);
    m_fd = -1;
    throw Error(m_path + ": cannot write (not a regular file)");
  }
  m_size = static_cast<int64_t>(st.st_size);
}

AppendFile::~AppendFile() {
  if (m_fd >= 0) ::close(m_fd);
}

void AppendFile::append(std::string_view bytes) {
  size_t done = 0;
  if (const int err = write_all(m_fd, bytes.data(), bytes.size(), &done)) {
    // Keep whole records only: cut a partial one back (best effort; the error is the write's).
    if (done > 0 && ::ftruncate(m_fd, static_cast<off_t>(m_size)) != 0) m_size += static_cast<int64_t>(done);
    throw_file_error(m_path, "cannot write", err);
  }
  m_size += static_cast<int64_t>(bytes.size());
}

std::pair<uint64_t, uint32_t> file_size_and_crc32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot be opened");
  uLong crc = crc32(0L, Z_NULL, 0);
  uint64_t size = 0;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto got = in.gcount();
    if (got <= 0) break;
    crc = crc32(crc, reinterpret_cast<const Bytef*>(buf.data()), static_cast<uInt>(got));
    size += static_cast<uint64_t>(got);
  }
  if (in.bad()) throw Error(path + ": read failed");
  return {size, static_cast<uint32_t>(crc)};
}

}  // namespace trainlab
