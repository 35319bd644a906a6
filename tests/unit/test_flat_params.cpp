// Flat parameter buffers (nn/flat_params.h): every parameter's master, value, gradient and
// optimizer state are views of one Storage per role at consecutive offsets in parameters()
// order; a range of a buffer is the concatenation of the parameters it covers; an optimizer step
// over the flat views is bit-identical to the same step over separately allocated parameters; a
// change of compute format re-creates the value and gradient buffers as flat views again.
#include <QtTest>
#include <cstring>

#include "backend/backend.h"
#include "nn/flat_params.h"
#include "nn/linear.h"
#include "nn/model.h"
#include "nn/transformer.h"
#include "optim/optimizer.h"
#include "test_support.h"

using namespace trainlab;
using namespace trainlab::test;

namespace {

size_t offset_in_storage(const Tensor& t) {
  return static_cast<size_t>(static_cast<const char*>(t.raw()) - static_cast<const char*>(t.storage()->data()));
}

// Every parameter's tensor for `b` is a view of one Storage of exactly the flat size, at the
// running element offset (no padding). Returns "" or what is wrong.
std::string check_views(Model& model, ParamBuffer b) {
  std::vector<Parameter*> ps = model.parameters();
  const Tensor& first = param_tensor(*ps.front(), b);
  int64_t at = 0;
  for (Parameter* p : ps) {
    const Tensor& t = param_tensor(*p, b);
    if (!t.same_storage(first)) return p->name + ": another storage";
    if (t.shape() != p->shape) return p->name + ": shape " + shape_str(t.shape());
    if (offset_in_storage(t) != dtype_bytes(first.dtype(), static_cast<size_t>(at)))
      return p->name + ": offset " + std::to_string(offset_in_storage(t));
    at += p->numel();
  }
  if (first.storage()->bytes() != dtype_bytes(first.dtype(), static_cast<size_t>(at)))
    return "storage of " + std::to_string(first.storage()->bytes()) + " bytes for " + std::to_string(at) + " elements";
  if (!model.flat_params().is_flat(b)) return "is_flat says no";
  return "";
}

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A copy of `src` with master, value and gradient each allocated on its own (the layout before
// flat buffers): the reference for the optimizer step.
Parameter standalone_copy(Backend& be, Parameter& src) {
  Parameter p;
  p.name = src.name;
  p.shape = src.shape;
  p.decay = src.decay;
  p.master = be.empty(p.shape, DType::F32, MemCategory::Weights);
  be.copy(src.master, p.master);
  p.value = p.master;
  p.grad = be.empty(p.shape, DType::F32, MemCategory::Gradients);
  be.copy(src.grad, p.grad);
  return p;
}

CharGptConfig small_gpt() {
  CharGptConfig c;
  c.vocab = 11;
  c.layers = 2;
  c.heads = 2;
  c.dim = 6;
  c.context = 5;
  return c;
}

}  // namespace

class TestFlatParams : public QObject {
  Q_OBJECT
 private slots:
  void mlpViewsAreConsecutive() {
    auto be = create_backend("cpu");
    Mlp model(*be, {7, 5, 3}, Activation::ReLU, 3);
    for (ParamBuffer b : {ParamBuffer::Master, ParamBuffer::Value, ParamBuffer::Grad})
      QVERIFY2(check_views(model, b).empty(), check_views(model, b).c_str());
    QVERIFY(model.parameters().front()->value.same_storage(model.parameters().front()->master));
    const FlatParams flat = model.flat_params();
    QCOMPARE(flat.numel(), model.parameter_count());
    QCOMPARE(flat.numel(), int64_t(7 * 5 + 5 + 5 * 3 + 3));
    QCOMPARE(flat.offset(2), int64_t(7 * 5 + 5));  // net.2.weight after net.0.weight and net.0.bias
    // The ledger counts the same bytes as one allocation per parameter.
    QCOMPARE(be->ledger().current(MemCategory::Weights), flat.numel() * 4);
    QCOMPARE(be->ledger().current(MemCategory::Gradients), flat.numel() * 4);
  }

  // The initial values are the per-parameter draws in declaration order: W then b of each layer,
  // U(-1/sqrt(in), 1/sqrt(in)) from one stream.
  void mlpInitDrawOrder() {
    auto be = create_backend("cpu");
    Mlp model(*be, {4, 3, 2}, Activation::GELU, 17);
    std::mt19937_64 rng(17);
    std::vector<float> expect;
    for (Parameter* p : model.parameters()) {
      const float bound = 1.0f / std::sqrt(static_cast<float>(p->name.rfind("net.0.", 0) == 0 ? 4 : 3));
      for (int64_t i = 0; i < p->numel(); ++i) expect.push_back(uniform_pm(rng, bound));
    }
    QVERIFY(bits_equal(download_f32(*be, model.flat_params().buffer(ParamBuffer::Master)), expect));
  }

  void charGptViewsAreConsecutive() {
    auto be = create_backend("cpu");
    CharGpt model(*be, small_gpt(), 5);
    for (ParamBuffer b : {ParamBuffer::Master, ParamBuffer::Value, ParamBuffer::Grad})
      QVERIFY2(check_views(model, b).empty(), check_views(model, b).c_str());
    QCOMPARE(model.flat_params().numel(), model.parameter_count());
    // LayerNorm weights start at 1, biases at 0 (no draws), wherever they sit in the buffer.
    const std::vector<float> ln = download_f32(*be, model.find_parameter("blocks.1.ln2.weight")->master);
    for (float x : ln) QCOMPARE(x, 1.0f);
  }

  // A range of a buffer is the parameters' tensors end to end; ranges may cut parameters.
  void rangeIsTheConcatenation() {
    auto be = create_backend("cpu");
    Mlp model(*be, {6, 4, 3}, Activation::ReLU, 9);
    std::vector<float> all;
    for (Parameter* p : model.parameters()) {
      const std::vector<float> w = download_f32(*be, p->master);
      all.insert(all.end(), w.begin(), w.end());
    }
    const FlatParams flat = model.flat_params();
    QVERIFY(bits_equal(download_f32(*be, flat.buffer(ParamBuffer::Master)), all));
    const std::vector<float> mid = download_f32(*be, flat.range(ParamBuffer::Master, 20, 33));
    QVERIFY(bits_equal(mid, std::vector<float>(all.begin() + 20, all.begin() + 33)));
    // Writing through a range writes the parameters' gradients (a bucket is this memory).
    Tensor bucket = flat.range(ParamBuffer::Grad, 22, 30);
    be->fill(bucket, 2.0f);
    const std::vector<float> g0 = download_f32(*be, model.parameters()[0]->grad);  // elements 0..23
    const std::vector<float> g1 = download_f32(*be, model.parameters()[1]->grad);  // 24..27
    QCOMPARE(g0[21], 0.0f);
    QCOMPARE(g0[22], 2.0f);
    QCOMPARE(g0[23], 2.0f);
    for (float x : g1) QCOMPARE(x, 2.0f);
    QVERIFY(!error_of([&] { flat.range(ParamBuffer::Grad, 30, flat.numel() + 1); }).empty());
    QVERIFY(error_of([&] { flat.range(ParamBuffer::M, 0, 1); }).find("not views of one flat buffer") != std::string::npos);
  }

  // AdamW over the flat views equals AdamW over separately allocated parameters, bit for bit,
  // over several steps; its state is one flat buffer per moment at the model's offsets.
  void adamwFlatEqualsPerParameter() {
    auto be = create_backend("cpu");
    Mlp model(*be, {5, 4, 3}, Activation::ReLU, 11);
    std::vector<Parameter*> flat_ps = model.parameters();
    flat_ps[1]->decay = false;
    std::vector<Parameter> ref;
    ref.reserve(flat_ps.size());
    for (Parameter* p : flat_ps) ref.push_back(standalone_copy(*be, *p));
    std::vector<Parameter*> ref_ps;
    for (Parameter& p : ref) ref_ps.push_back(&p);
    AdamW a(AdamWHyper{0.9f, 0.999f, 1e-8f, 0.1f}), b(AdamWHyper{0.9f, 0.999f, 1e-8f, 0.1f});
    for (int t = 1; t <= 4; ++t) {
      for (size_t i = 0; i < flat_ps.size(); ++i) {
        const std::vector<float> g = random_vector(static_cast<size_t>(flat_ps[i]->numel()), 100 * t + i);
        be->upload(flat_ps[i]->grad, g.data(), DType::F32);
        be->upload(ref[i].grad, g.data(), DType::F32);
      }
      StepScalars sc;
      sc.lr = 0.01f;
      sc.step = static_cast<float>(t);
      be->set_step_scalars(sc);
      a.step(*be, flat_ps);
      b.step(*be, ref_ps);
    }
    for (size_t i = 0; i < flat_ps.size(); ++i) {
      QVERIFY(bits_equal(download_f32(*be, flat_ps[i]->master), download_f32(*be, ref[i].master)));
      QVERIFY(bits_equal(download_f32(*be, flat_ps[i]->m), download_f32(*be, ref[i].m)));
      QVERIFY(bits_equal(download_f32(*be, flat_ps[i]->v), download_f32(*be, ref[i].v)));
    }
    QVERIFY2(check_views(model, ParamBuffer::M).empty(), check_views(model, ParamBuffer::M).c_str());
    QVERIFY2(check_views(model, ParamBuffer::V).empty(), check_views(model, ParamBuffer::V).c_str());
    QCOMPARE(flat_ps[0]->m.category(), MemCategory::Optimizer);
  }

  // SGD with momentum: one flat momentum buffer, the same numbers as per parameter.
  void sgdFlatEqualsPerParameter() {
    auto be = create_backend("cpu");
    Mlp model(*be, {3, 4, 2}, Activation::None, 12);
    std::vector<Parameter*> flat_ps = model.parameters();
    std::vector<Parameter> ref;
    ref.reserve(flat_ps.size());
    for (Parameter* p : flat_ps) ref.push_back(standalone_copy(*be, *p));
    std::vector<Parameter*> ref_ps;
    for (Parameter& p : ref) ref_ps.push_back(&p);
    Sgd a(SgdHyper{0.9f, 0.01f, true}), b(SgdHyper{0.9f, 0.01f, true});
    for (int t = 1; t <= 3; ++t) {
      for (size_t i = 0; i < flat_ps.size(); ++i) {
        const std::vector<float> g = random_vector(static_cast<size_t>(flat_ps[i]->numel()), 7 * t + i);
        be->upload(flat_ps[i]->grad, g.data(), DType::F32);
        be->upload(ref[i].grad, g.data(), DType::F32);
      }
      StepScalars sc;
      sc.lr = 0.05f;
      sc.step = static_cast<float>(t);
      be->set_step_scalars(sc);
      a.step(*be, flat_ps);
      b.step(*be, ref_ps);
    }
    for (size_t i = 0; i < flat_ps.size(); ++i)
      QVERIFY(bits_equal(download_f32(*be, flat_ps[i]->master), download_f32(*be, ref[i].master)));
    QVERIFY2(check_views(model, ParamBuffer::M).empty(), check_views(model, ParamBuffer::M).c_str());
    QVERIFY(!flat_ps[0]->v.defined());
  }

  // fp32 -> bf16 -> fp32 mid-run: value and gradient buffers re-created flat in the new format,
  // values the rounded masters, the master counted as optimizer memory in bf16, the optimizer
  // state kept; back in fp32 every value is its master again.
  void computeFormatChangeKeepsViews() {
    auto be = create_backend("cpu");
    CharGpt model(*be, small_gpt(), 6);
    const int64_t n = model.parameter_count();
    std::vector<Parameter*> ps = model.parameters();
    AdamW opt(AdamWHyper{});
    StepScalars sc;
    sc.lr = 0.01f;
    be->set_step_scalars(sc);
    opt.step(*be, ps);
    const Tensor m_before = ps[3]->m;

    model.set_compute_dtype(*be, DType::BF16);
    for (ParamBuffer b : {ParamBuffer::Master, ParamBuffer::Value, ParamBuffer::Grad, ParamBuffer::M})
      QVERIFY2(check_views(model, b).empty(), check_views(model, b).c_str());
    QCOMPARE(ps[0]->value.dtype(), DType::BF16);
    QCOMPARE(ps[0]->grad.dtype(), DType::BF16);
    QVERIFY(!ps[0]->value.same_storage(ps[0]->master));
    QVERIFY(ps[3]->m.same_storage(m_before) && ps[3]->m.raw() == m_before.raw());
    const FlatParams flat = model.flat_params();
    const std::vector<float> master = download_f32(*be, flat.buffer(ParamBuffer::Master));
    const std::vector<float> value = download_f32(*be, flat.buffer(ParamBuffer::Value));
    for (size_t i = 0; i < master.size(); ++i) QCOMPARE(value[i], round_to(DType::BF16, master[i]));
    for (float g : download_f32(*be, flat.buffer(ParamBuffer::Grad))) QCOMPARE(g, 0.0f);
    QCOMPARE(be->ledger().current(MemCategory::Weights), n * 2);
    QCOMPARE(be->ledger().current(MemCategory::Gradients), n * 2);
    QCOMPARE(be->ledger().current(MemCategory::Optimizer), n * 12);  // master + m + v

    // fp8 keeps parameters in bf16: the value buffer stays, rewritten from the masters.
    const void* value_at = ps[0]->value.raw();
    model.set_compute_dtype(*be, DType::F8E4M3);
    QCOMPARE(ps[0]->value.raw(), value_at);
    QVERIFY2(check_views(model, ParamBuffer::Value).empty(), check_views(model, ParamBuffer::Value).c_str());

    model.set_compute_dtype(*be, DType::F32);
    for (Parameter* p : ps) QVERIFY(p->value.same_storage(p->master) && p->value.raw() == p->master.raw());
    QVERIFY2(check_views(model, ParamBuffer::Grad).empty(), check_views(model, ParamBuffer::Grad).c_str());
    QCOMPARE(ps[0]->grad.dtype(), DType::F32);
    QCOMPARE(be->ledger().current(MemCategory::Weights), n * 4);
    QCOMPARE(be->ledger().current(MemCategory::Gradients), n * 4);
    QCOMPARE(be->ledger().current(MemCategory::Optimizer), n * 8);
  }

  // A layer built on its own keeps its weight and bias in flat buffers of its own.
  void standaloneLinear() {
    auto be = create_backend("cpu");
    std::mt19937_64 rng(2);
    Linear layer(*be, 3, 2, Activation::None, true, rng);
    QVERIFY(layer.weight().master.same_storage(layer.bias()->master));
    QVERIFY(FlatParams(layer.parameters()).is_flat(ParamBuffer::Grad));
    QCOMPARE(layer.weight().master.storage()->bytes(), size_t(8 * 4));
  }
};

QTEST_APPLESS_MAIN(TestFlatParams)
#include "test_flat_params.moc"
