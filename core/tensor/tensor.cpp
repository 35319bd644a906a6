#include "tensor/tensor.h"

#include "util/error.h"

namespace trainlab {

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

Storage::Storage(void* data, size_t bytes, MemCategory category, DeviceKind device, MemoryLedger* ledger,
                 Deleter del)
    : m_data(data), m_bytes(bytes), m_category(category), m_device(device), m_ledger(ledger), m_deleter(std::move(del)) {
  if (m_ledger) m_ledger->on_alloc(m_category, m_bytes);
}

Storage::~Storage() {
  if (m_ledger) m_ledger->on_free(m_category, m_bytes);
  if (m_deleter) m_deleter(m_data, m_bytes);
}

void Storage::set_category(MemCategory c) {
  if (m_ledger) m_ledger->move(m_category, c, m_bytes);
  m_category = c;
}

Tensor::Tensor(std::shared_ptr<Storage> storage, Shape shape, DType dtype, size_t byte_offset)
    : m_storage(std::move(storage)), m_shape(std::move(shape)), m_dtype(dtype), m_offset(byte_offset) {}

Tensor Tensor::reshape(Shape s) const {
  if (shape_numel(s) != numel())
    throw Error("cannot view a tensor of shape " + shape_str(m_shape) + " as " + shape_str(s));
  return Tensor(m_storage, std::move(s), m_dtype, m_offset);
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  if (m_shape.empty() || begin < 0 || end > m_shape[0] || begin > end)
    throw Error("row slice [" + std::to_string(begin) + ", " + std::to_string(end) + ") out of range for shape " +
                shape_str(m_shape));
  Shape s = m_shape;
  s[0] = end - begin;
  const int64_t row = m_shape[0] ? numel() / m_shape[0] : 0;
  return Tensor(m_storage, s, m_dtype, m_offset + dtype_bytes(m_dtype, static_cast<size_t>(begin * row)));
}

}  // namespace trainlab
