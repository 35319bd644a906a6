// FlatParams: a model's parameters laid out end to end in flat buffers, in parameters() order.
//
// Layout: parameter i occupies elements [offset(i), offset(i) + numel(i)) of every buffer, with
// offset(0) = 0 and offset(i+1) = offset(i) + numel(i): no padding, so the ledger counts exactly
// the bytes of the per-parameter layout (sum of numel times the element size). One buffer each:
//   Master  fp32 (weights in fp32 runs, optimizer memory in 16-bit runs)
//   Value   the compute copy; in fp32 runs it IS Master (every value is the master's view)
//   Grad    compute format
//   M, V    optimizer state, fp32, created by the optimizer on its first step
// Each Parameter's tensor is a view (a byte offset into the buffer's one Storage), so kernels and
// layers see ordinary tensors while a gradient bucket or a ZeRO shard is a range [begin, end) of
// one buffer: range() returns it as a 1-D tensor. Element offsets are not padded, so a view's
// address is aligned only to its element size; the CUDA code checks alignment before vector loads.
//
// A FlatParams is a description over a list of Parameter* (it owns no memory: the Storages live
// as long as some Parameter's view refers to them), cheap to build from model.parameters().
#pragma once
#include <functional>
#include <vector>

#include "nn/parameter.h"

namespace trainlab {

enum class ParamBuffer : uint8_t { Master, Value, Grad, M, V };
const char* param_buffer_name(ParamBuffer b);
// The Parameter's tensor for buffer b.
Tensor& param_tensor(Parameter& p, ParamBuffer b);

class FlatParams {
 public:
  FlatParams() = default;
  explicit FlatParams(std::vector<Parameter*> params);

  size_t size() const { return m_params.size(); }
  int64_t numel() const { return m_total; }  // elements of each buffer
  int64_t offset(size_t i) const { return m_offsets.at(i); }
  const std::vector<Parameter*>& parameters() const { return m_params; }

  // True when every parameter's tensor for b is a view of one Storage at the offsets above, all
  // in one format (false when any is undefined, e.g. M before the first optimizer step).
  bool is_flat(ParamBuffer b) const;
  // Elements [begin, end) of buffer b as a 1-D tensor over the shared Storage. Throws Error when
  // the buffer is not flat or the range is outside [0, numel()].
  Tensor range(ParamBuffer b, int64_t begin, int64_t end) const;
  Tensor buffer(ParamBuffer b) const { return range(b, 0, m_total); }

  // Gives every parameter a view of one fresh buffer of `dtype` (contents undefined). The old
  // views are dropped first, so an old buffer referenced only by them is freed before the new
  // one is allocated.
  void allocate(Backend& be, ParamBuffer b, DType dtype, MemCategory category);
  // Gives every parameter a view of `flat` (numel() elements, any format and memory: e.g. a
  // backend's empty_host buffer) at its offset, for buffer b.
  void assign_views(ParamBuffer b, const Tensor& flat);
  // For optimizer state: parameters whose tensor for b is undefined get zeros in `dtype` (fp32,
  // or bf16 for Lion's momentum), all of them in one new buffer (the whole list on a first step).
  void ensure_zeros(Backend& be, ParamBuffer b, MemCategory category, DType dtype = DType::F32);

  // Switches the compute format (fp8 is kept as bf16, see Parameter::set_compute_dtype):
  // fp32: every value becomes its master's view and Master is counted as weights; 16-bit: Value
  // is one buffer in the format (kept when it already is one), rewritten from Master by one
  // copy (round to nearest even, as the per-parameter copies were), and Master is counted as
  // optimizer memory. Grad is re-created as zeros when its format changes, else kept. Master
  // must be flat.
  void set_compute_dtype(Backend& be, DType dtype);

 private:
  std::vector<Parameter*> m_params;
  std::vector<int64_t> m_offsets;
  int64_t m_total = 0;
};

// Collects a model's parameters while its layers are constructed and then places them in flat
// buffers. Initial values are produced by generators that run in declaration order at finish(),
// so the random draws are the same, in the same order, as when each parameter was filled as it
// was declared (and only one parameter's host values exist at a time).
class FlatParamsBuilder {
 public:
  using Init = std::function<std::vector<float>()>;  // numel() fp32 values
  // Declares p (its name and shape already set); p must stay at this address until finish().
  void add(Parameter& p, Init init);
  // Lays the declared parameters out in `order` (the model's parameters() order: each declared
  // parameter exactly once), allocates Master (fp32, weights) and uploads the initial values,
  // sets every value to its master's view and allocates Grad (fp32 zeros). Returns the layout.
  FlatParams finish(Backend& be, const std::vector<Parameter*>& order);

 private:
  std::vector<std::pair<Parameter*, Init>> m_declared;
};

}  // namespace trainlab
