// Argument checks every backend makes the same way (internal to core/backend): rank-2 operands
// and the products' shapes, with the messages the tests and the user see.
#pragma once

#include <cstdint>
#include <string>

#include "tensor/tensor.h"
#include "util/error.h"

namespace trainlab {

inline void check_matrix(const Tensor& t, const char* what) {
  if (t.rank() != 2) throw Error(std::string(what) + " must be a matrix, got shape " + shape_str(t.shape()));
}

// m, n, k of c = op(a) op(b) after checking that a, b, c are matrices of matching shapes.
struct GemmDims {
  int64_t m, n, k;
};
inline GemmDims gemm_dims(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c) {
  check_matrix(a, "gemm A");
  check_matrix(b, "gemm B");
  check_matrix(c, "gemm C");
  const int64_t m = trans_a ? a.dim(1) : a.dim(0);
  const int64_t k = trans_a ? a.dim(0) : a.dim(1);
  const int64_t kb = trans_b ? b.dim(1) : b.dim(0);
  const int64_t n = trans_b ? b.dim(0) : b.dim(1);
  if (k != kb || c.dim(0) != m || c.dim(1) != n)
    throw Error("gemm shape mismatch: " + shape_str(a.shape()) + (trans_a ? "^T" : "") + " x " +
                shape_str(b.shape()) + (trans_b ? "^T" : "") + " -> " + shape_str(c.shape()));
  return {m, n, k};
}

// m, n, k of y [m, n] = x [m, k] w^T (w [n, k]) after checking the three shapes.
inline GemmDims linear_dims(const Tensor& x, const Tensor& w, const Tensor& y) {
  check_matrix(x, "linear input");
  check_matrix(w, "linear weight");
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  if (w.dim(1) != k || y.dim(0) != m || y.dim(1) != n)
    throw Error("linear shape mismatch: x " + shape_str(x.shape()) + ", w " + shape_str(w.shape()) + ", y " +
                shape_str(y.shape()));
  return {m, n, k};
}

// The bytes of one row of dst [idx.numel(), ...] = src[idx[i], ...] after checking that the
// indices are int32, that source and destination share a format and that dst holds exactly
// idx.numel() rows of src's row size. The indices' values live on the device and are checked where
// they are read: the CPU throws on one out of range; the CUDA kernels write a zero row for it
// (they cannot throw, and the host has no copy of the indices to check without a sync).
inline size_t gather_rows_row_bytes(const Tensor& src, const Tensor& idx, const Tensor& dst) {
  if (idx.dtype() != DType::I32) throw Error("gather_rows: indices must be int32");
  if (src.dtype() != dst.dtype()) throw Error("gather_rows: source and destination formats differ");
  if (src.rank() < 1 || dst.rank() < 1)
    throw Error("gather_rows: source and destination must have rows, got " + shape_str(src.shape()) + " -> " +
                shape_str(dst.shape()));
  const int64_t rows = idx.numel();
  const size_t row_bytes = src.shape()[0] ? src.bytes() / static_cast<size_t>(src.shape()[0]) : 0;
  if (dst.shape()[0] != rows || dst.bytes() != row_bytes * static_cast<size_t>(rows))
    throw Error("gather_rows: destination " + shape_str(dst.shape()) + " does not fit " + std::to_string(rows) +
                " rows of " + shape_str(src.shape()));
  return row_bytes;
}

}  // namespace trainlab
