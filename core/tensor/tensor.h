// Tensor: a typed, shaped view of a Storage allocated by a backend. Row-major, contiguous.
//
// Storage is reference counted and returns its bytes to the backend (and the MemoryLedger) when
// the last Tensor that refers to it goes away. Tensors are cheap handles: copying one never copies
// data; use Backend::copy for that.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/memory_ledger.h"

namespace trainlab {

enum class DeviceKind : uint8_t { Cpu, Cuda };

using Shape = std::vector<int64_t>;
int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);

class Storage {
 public:
  using Deleter = std::function<void(void*, size_t)>;
  Storage(void* data, size_t bytes, MemCategory category, DeviceKind device, MemoryLedger* ledger, Deleter del);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return m_data; }
  size_t bytes() const { return m_bytes; }
  MemCategory category() const { return m_category; }
  DeviceKind device() const { return m_device; }
  void set_category(MemCategory c);

 private:
  void* m_data;
  size_t m_bytes;
  MemCategory m_category;
  DeviceKind m_device;
  MemoryLedger* m_ledger;
  Deleter m_deleter;
};

class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<Storage> storage, Shape shape, DType dtype, size_t byte_offset = 0);

  bool defined() const { return static_cast<bool>(m_storage); }
  const Shape& shape() const { return m_shape; }
  int64_t dim(int i) const { return m_shape.at(i < 0 ? m_shape.size() + i : i); }
  int rank() const { return static_cast<int>(m_shape.size()); }
  int64_t numel() const { return shape_numel(m_shape); }
  size_t bytes() const { return dtype_bytes(m_dtype, static_cast<size_t>(numel())); }
  DType dtype() const { return m_dtype; }
  DeviceKind device() const { return m_storage ? m_storage->device() : DeviceKind::Cpu; }
  MemCategory category() const { return m_storage->category(); }
  void set_category(MemCategory c) { m_storage->set_category(c); }
  const std::shared_ptr<Storage>& storage() const { return m_storage; }
  size_t byte_offset() const { return m_offset; }
  bool same_storage(const Tensor& o) const { return m_storage == o.m_storage; }

  void* raw() const { return static_cast<char*>(m_storage->data()) + m_offset; }
  template <class T>
  T* data() const {
    return static_cast<T*>(raw());
  }

  // A view of the same bytes with another shape of the same element count.
  Tensor reshape(Shape s) const;
  // Rows [begin, end) of the first dimension.
  Tensor slice_rows(int64_t begin, int64_t end) const;

 private:
  std::shared_ptr<Storage> m_storage;
  Shape m_shape;
  DType m_dtype = DType::F32;
  size_t m_offset = 0;
};

}  // namespace trainlab
