// Files written so that a fault (a full disk, a file size limit, a crash) never passes silently
// and never leaves a torn file where a whole one was, and so that a symbolic link planted where the
// lab writes is never followed:
//  - AtomicFile / write_file_atomic: the bytes go to <path>.part, created afresh (a stale one is
//    removed first; O_EXCL | O_NOFOLLOW), every write(2) checked; commit() fsyncs, closes (checked)
//    and renames it over <path> (rename replaces a link at <path>, it does not write through it),
//    then fsyncs the folder. Readers see the old file or the new one, never part of one; a
//    temporary file that was never committed is removed.
//  - AppendFile: an append-only file (metrics.jsonl) written a record at a time with write(2):
//    there is no user-space buffer, so nothing waits for a flush, and every append is checked. An
//    append that fails part-way is cut back (ftruncate), so the file keeps whole records only.
// Every failure throws trainlab::Error "<path>: cannot write (<strerror>)"; a link where the lab
// writes: "<path> is a symbolic link: ...".
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace trainlab {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();  // removes the temporary file unless committed

  void write(const void* data, size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  void commit();
  const std::string& path() const { return m_path; }

 private:
  std::string m_path, m_tmp;
  int m_fd = -1;
};

// The whole of `bytes` as `path`, atomically (AtomicFile).
void write_file_atomic(const std::string& path, std::string_view bytes);

// A file's size in bytes and the CRC-32 (zlib's) of its bytes, read in 1 MiB pieces. Throws
// "<path>: cannot be opened" or "<path>: read failed".
std::pair<uint64_t, uint32_t> file_size_and_crc32(const std::string& path);

class AppendFile {
 public:
  // Opens `path` for appending (created when missing; emptied first when `truncate`). A symbolic
  // link at `path` is refused (O_NOFOLLOW).
  AppendFile(std::string path, bool truncate);
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  ~AppendFile();

  // Appends all of `bytes` or, on failure, nothing (a partial write is cut back) and throws.
  void append(std::string_view bytes);
  int64_t size() const { return m_size; }
  const std::string& path() const { return m_path; }

 private:
  std::string m_path;
  int m_fd = -1;
  int64_t m_size = 0;
};

// Throws the Error for an `operation` ("cannot write", "cannot open") on `path` that failed with
// errno `err`, naming a symbolic link as such.
[[noreturn]] void throw_file_error(const std::string& path, const std::string& operation, int err);

}  // namespace trainlab
