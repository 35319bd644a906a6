// Optimizer offload (optim.offload cpu): the fp32 master weights and the optimizer state live in
// host memory (the backend's empty_host: pinned on a GPU, counted as MemCategory::Host), and the
// update runs on the CPU with the CPU backend's own optimizer kernels (the wrapped optimizer's
// step on a CpuBackend: one implementation of each update, so an offloaded run computes exactly
// the fp32 numbers of a run on the CPU).
//
// One step, the parameters split into up to kMaxParts parts (one a core) of about equal size at
// parameter boundaries:
//   1. each part's gradient is copied down (Backend::copy_to_host_async, a transfer stream that
//      waits for backward);
//   2. as each part lands, a thread of its own updates it on a CpuBackend of its own (master,
//      state, and the compute copy rounded to the weights' format): the update is element-wise,
//      so the parts' threads give the same numbers as one pass;
//   3. as each part's update ends, its weights are copied up (copy_from_host_async);
//   4. join_transfers: the device's next work (the next step's forward) waits for the uploads.
// What overlaps: the parts' updates with each other (threads: the project does not use OpenMP;
// each part's loops are the CPU backend's vectorised ones) and with the other parts' downloads
// and uploads. What does not: the next forward with the update (it needs every updated weight),
// and the downloads with backward (the gradients are copied once backward has finished; bucket by
// bucket as backward produces them is DDP's hook machinery, not used here).
//
// Device memory: 16-bit runs keep only the 16-bit weights and gradients on the device (each
// Parameter's master becomes a view of the host buffer, which the device still reads when a
// checkpoint or the weights are saved); fp32 runs keep the fp32 weights (the master's role moves
// to a host copy). Host memory: masters (4 n), state, gradient staging (eb n) and, in 16-bit
// runs, weight staging (eb n) -- plan/memory_model.h's offload_host_bytes.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu_backend.h"
#include "optim/optimizer.h"

namespace trainlab {

class OffloadedOptimizer final : public Optimizer {
 public:
  static constexpr size_t kMaxParts = 16;
  // `inner` must keep its state in per-element buffers (state_buffers(): adamw, sgd, lion).
  explicit OffloadedOptimizer(std::unique_ptr<Optimizer> inner);

  std::string name() const override { return m_inner->name(); }
  void step(Backend& be, std::vector<Parameter*>& params) override;
  std::vector<ParamBuffer> state_buffers() const override { return m_inner->state_buffers(); }
  Op backend_op() const override { return m_inner->backend_op(); }
  DType state_dtype() const override { return m_inner->state_dtype(); }
  // Moves the masters to host memory and creates the (zero) state there.
  void attach(Backend& be, const std::vector<Parameter*>& params) override;
  bool host_step() const override { return true; }
  const Optimizer& inner() const { return *m_inner; }

 protected:
  std::vector<std::string> state_names() const override { return m_inner->state_names(); }
  // The state exists from attach; in fp32 runs the host masters are re-read from the device's
  // weights (a resumed run has just written them there).
  void create_state(Backend& be, const std::vector<Parameter*>& params) override;
  std::vector<StateView> state_views(const std::vector<Parameter*>& params) const override;

 private:
  Tensor host_range(const Tensor& flat, int64_t begin, int64_t end) const;

  std::unique_ptr<Optimizer> m_inner;
  std::vector<std::unique_ptr<CpuBackend>> m_cpu;  // one a part: each runs its part's update
  std::vector<Parameter> m_host;        // views into the host buffers, one per device parameter
  std::vector<Parameter*> m_host_ptrs;
  std::vector<Parameter*> m_device;     // the attached parameters
  Tensor m_master, m_value, m_grad;     // host flat buffers (m_value: 16-bit runs only)
  std::vector<size_t> m_chunk_begin;    // parameter index where each part starts (+ the end)
  bool m_fp32 = false;                  // the device's weights are its masters
};

}  // namespace trainlab
