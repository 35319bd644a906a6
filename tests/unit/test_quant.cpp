// Quantization (DOMAIN.md section 5): fake quantization against the formula, granularity on a
// tensor with one huge row, packed int4 (and other widths) round trips, the quantized weights
// file with its exact size (4-bit groups of 32 = 4.5 bits a weight), the straight-through
// estimator of QAT, and QAT switched on mid-run through the trainer; GPTQ and AWQ (issue 40)
// against round-to-nearest on a layer's calibration inputs, AWQ's folds, their bad input.
#include <QtTest>
#include <cmath>
#include <cstdio>
#include <functional>
#include <filesystem>
#include <random>
#include <set>

#include "backend/cpu_backend.h"
#include "compress/compression.h"
#include "compress/gptq.h"
#include "compress/ptq_methods.h"
#include "compress/quant.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "nn/linear.h"
#include "nn/model.h"
#include "nn/transformer.h"
#include "tensor/dtype.h"
#include "config/train_options.h"
#include "data/data_sources.h"
#include "train/trainer.h"
#include "cli_support.h"

using namespace trainlab;
using namespace trainlab::test;

namespace {
// The formula, written out independently of the library.
float formula(float w, float amax, int bits) {
  const float qmax = static_cast<float>((1 << (bits - 1)) - 1);
  const float s = round_to(DType::F16, amax / qmax);
  if (s == 0.0f) return 0.0f;
  float q = std::nearbyint(w / s);
  q = std::fmax(-qmax, std::fmin(qmax, q));
  return s * q;
}

// A config that trains with QAT at `bits` per `granularity`.
Config qat_config(const char* bits, const char* granularity) {
  Config c;
  c.set("quant.mode", "qat");
  c.set("quant.bits", bits);
  c.set("quant.granularity", granularity);
  return c;
}

std::vector<float> huge_row_tensor(int64_t rows, int64_t cols) {
  std::mt19937_64 rng(3);
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (auto& v : w) v = uniform_pm(rng, 0.1f);
  for (int64_t c = 0; c < cols; ++c) w[static_cast<size_t>(c)] *= 1000.0f;  // row 0 is huge
  return w;
}

// Calibration inputs X [n, cols] with correlated channels (X = Z A, Z normal): a Hessian that is
// not diagonal, where GPTQ's error feedback has something to spread. `outliers` channels x 30.
std::vector<float> correlated_inputs(int64_t n, int64_t cols, int outliers, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<float> a(static_cast<size_t>(cols * cols)), z(static_cast<size_t>(cols)), x(static_cast<size_t>(n * cols));
  for (auto& v : a) v = nd(rng) / std::sqrt(static_cast<float>(cols));
  for (int64_t i = 0; i < cols; ++i) a[static_cast<size_t>(i * cols + i)] += 1.0f;
  for (int64_t r = 0; r < n; ++r) {
    for (auto& v : z) v = nd(rng);
    for (int64_t j = 0; j < cols; ++j) {
      float acc = 0.0f;
      for (int64_t k = 0; k < cols; ++k) acc += z[static_cast<size_t>(k)] * a[static_cast<size_t>(k * cols + j)];
      x[static_cast<size_t>(r * cols + j)] = acc * (j < outliers ? 30.0f : 1.0f);
    }
  }
  return x;
}

std::vector<float> normal_weights(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.1f);
  std::vector<float> w(static_cast<size_t>(n));
  for (auto& v : w) v = nd(rng);
  return w;
}

// Mean squared output error of W' against W on X, computed directly: ||X (W' - W)^T||^2 / (n rows).
double direct_output_error(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& wq,
                           int64_t rows, int64_t cols) {
  const int64_t n = static_cast<int64_t>(x.size()) / cols;
  double e = 0.0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = 0; r < rows; ++r) {
      double d = 0.0;
      for (int64_t j = 0; j < cols; ++j)
        d += static_cast<double>(x[static_cast<size_t>(i * cols + j)]) * (wq[static_cast<size_t>(r * cols + j)] - w[static_cast<size_t>(r * cols + j)]);
      e += d * d;
    }
  return e / static_cast<double>(n * rows);
}

SafeTensorsFile random_model_file(Backend& be, Model& m) { return model_to_file(be, m); }

std::vector<float> logits_of(Backend& be, const SafeTensorsFile& f, const CalibrationBatch& b) {
  auto m = model_from_file(be, f, "weights");
  Tensor x = be.empty(b.shape, b.tokens.empty() ? DType::F32 : DType::I32, MemCategory::Workspace);
  if (b.tokens.empty())
    be.upload(x, b.features.data(), DType::F32);
  else
    be.upload(x, b.tokens.data(), DType::I32);
  Tensor y = m->forward(be, x, false);
  std::vector<float> out(static_cast<size_t>(y.numel()));
  be.download(y, out.data(), DType::F32);
  return out;
}

double mean_abs_err_excluding_row0(const std::vector<float>& w, const std::vector<float>& q, int64_t cols) {
  double e = 0.0;
  for (size_t i = static_cast<size_t>(cols); i < w.size(); ++i) e += std::fabs(w[i] - q[i]);
  return e / static_cast<double>(w.size() - static_cast<size_t>(cols));
}
}  // namespace

class TestQuant : public QObject {
  Q_OBJECT
 private slots:
  void errorAgainstFormula() {
    CpuBackend be(1);
    const int64_t rows = 6, cols = 64;
    const auto w = huge_row_tensor(rows, cols);
    Tensor tw = be.empty({rows, cols}, DType::F32, MemCategory::Workspace);
    Tensor tq = be.empty({rows, cols}, DType::F32, MemCategory::Workspace);
    be.upload(tw, w.data(), DType::F32);
    for (int bits : {2, 3, 4, 8}) {
      for (QuantGranularity g : {QuantGranularity::Tensor, QuantGranularity::Channel, QuantGranularity::Group}) {
        QuantSpec spec;
        spec.bits = bits;
        spec.granularity = g;
        spec.group = 32;
        const int64_t group = spec.group_size(rows, cols);
        be.fake_quantize(tw, tq, bits, group);
        std::vector<float> q(w.size());
        be.download(tq, q.data(), DType::F32);
        for (int64_t g0 = 0; g0 < rows * cols; g0 += group) {
          float amax = 0.0f;
          for (int64_t i = g0; i < g0 + group; ++i) amax = std::fmax(amax, std::fabs(w[static_cast<size_t>(i)]));
          const float s = round_to(DType::F16, amax / static_cast<float>((1 << (bits - 1)) - 1));
          for (int64_t i = g0; i < g0 + group; ++i) {
            QCOMPARE(q[static_cast<size_t>(i)], formula(w[static_cast<size_t>(i)], amax, bits));
            QVERIFY(std::fabs(q[static_cast<size_t>(i)] - w[static_cast<size_t>(i)]) <= 0.5f * s * 1.001f);
          }
        }
      }
    }
    // One huge row: a per-tensor scale is coarse for every other row, per channel is not.
    std::vector<float> qt(w.size()), qc(w.size());
    be.fake_quantize(tw, tq, 4, rows * cols);
    be.download(tq, qt.data(), DType::F32);
    be.fake_quantize(tw, tq, 4, cols);
    be.download(tq, qc.data(), DType::F32);
    const double et = mean_abs_err_excluding_row0(w, qt, cols), ec = mean_abs_err_excluding_row0(w, qc, cols);
    // per tensor: s = 100/7, so every small weight (|w| < 0.1) rounds to 0: error = mean |w| ~ 0.05
    QVERIFY2(et > 0.03, qPrintable(QString("per-tensor error %1").arg(et)));
    for (size_t i = static_cast<size_t>(cols); i < w.size(); ++i) QCOMPARE(qt[i], 0.0f);
    // per channel: s ~ 0.1/7, error <= s/2 ~ 0.007 and on average ~ s/4
    QVERIFY2(ec < 0.005, qPrintable(QString("per-channel error %1").arg(ec)));
    QVERIFY(et > 10.0 * ec);
  }

  void zeroGroupAndClamp() {
    std::vector<float> w = {0, 0, 0, 0, 1.0f, -1.0f, 0.5f, -0.25f};
    std::vector<float> s(2);
    std::vector<int8_t> q(8);
    quantize_groups(w.data(), 8, 3, 4, s.data(), q.data());
    QCOMPARE(s[0], 0.0f);
    for (int i = 0; i < 4; ++i) QCOMPARE(int(q[i]), 0);
    QCOMPARE(int(q[4]), 3);
    QCOMPARE(int(q[5]), -3);
    QCOMPARE(s[1], round_to(DType::F16, 1.0f / 3.0f));
  }

  void packedInt4RoundTrip() {
    std::mt19937 rng(5);
    std::vector<int8_t> codes(1001);
    for (auto& c : codes) c = static_cast<int8_t>(static_cast<int>(rng() % 16) - 8);  // -8..7
    const auto packed = pack_codes(codes, 4);
    QCOMPARE(packed.size(), size_t(501));  // two a byte
    QCOMPARE(unpack_codes(packed, 1001, 4), codes);
    // Same layout as DType::I4 (low nibble first, two's complement).
    std::vector<float> f(codes.size());
    convert_to_f32(DType::I4, packed.data(), f.data(), f.size());
    for (size_t i = 0; i < codes.size(); ++i) QCOMPARE(f[i], static_cast<float>(codes[i]));
    QCOMPARE(int(packed[0] & 0xF), codes[0] & 0xF);
    for (int bits = 2; bits <= 8; ++bits) {
      const int qmax = (1 << (bits - 1)) - 1;
      std::vector<int8_t> c(777);
      for (auto& v : c) v = static_cast<int8_t>(static_cast<int>(rng() % (2 * qmax + 1)) - qmax);
      const auto p = pack_codes(c, bits);
      QCOMPARE(p.size(), (c.size() * bits + 7) / 8);
      QCOMPARE(unpack_codes(p, 777, bits), c);
    }
  }

  void quantizedFileSizeAndRoundTrip() {
    std::mt19937_64 rng(9);
    SafeTensorsFile f;
    f.metadata["trainlab_architecture"] = R"({"kind":"mlp","sizes":[64,128,10],"activation":"relu"})";
    auto add = [&](const std::string& name, Shape shape) {
      SafeTensor t;
      t.name = name;
      t.dtype = "F32";
      t.shape = shape;
      std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
      for (auto& x : v) x = uniform_pm(rng, 0.2f);
      t.bytes.resize(v.size() * 4);
      std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
      f.tensors.push_back(t);
    };
    add("net.0.weight", {128, 64});
    add("net.0.bias", {128});
    add("net.2.weight", {10, 128});
    add("net.2.bias", {10});
    QuantSpec spec;
    spec.bits = 4;
    spec.granularity = QuantGranularity::Group;
    spec.group = 32;
    QuantFileReport rep;
    SafeTensorsFile q = quantize_weights(f, QuantPlan::parse(spec, ""), &rep);
    QCOMPARE(rep.bits_per_weight(), 4.5);  // exactly: 4 + 16/32
    const int64_t n = 128 * 64 + 10 * 128;
    QCOMPARE(rep.code_bytes, n / 2);
    QCOMPARE(rep.scale_bytes, n / 32 * 2);
    QCOMPARE(rep.other_bytes, int64_t((128 + 10) * 4));
    const std::string path = (std::filesystem::temp_directory_path() / "trainlab_test_quant.safetensors").string();
    write_safetensors(path, q);
    const SafeTensorsFile back = read_safetensors(path);
    QVERIFY(is_quantized_file(back));
    QCOMPARE(back.find("net.0.weight.qweight")->dtype, std::string("U8"));
    QCOMPARE(back.find("net.0.weight.scales")->dtype, std::string("F16"));
    const SafeTensorsFile dq = dequantize_weights(back);
    for (const char* name : {"net.0.weight", "net.2.weight"}) {
      const SafeTensor* o = f.find(name);
      const SafeTensor* d = dq.find(name);
      QVERIFY(d && d->shape == o->shape);
      const int64_t k = shape_numel(o->shape);
      std::vector<float> expect(static_cast<size_t>(k));
      fake_quantize_host(reinterpret_cast<const float*>(o->bytes.data()), expect.data(), k, 4, 32);
      const float* got = reinterpret_cast<const float*>(d->bytes.data());
      for (int64_t i = 0; i < k; ++i) QCOMPARE(got[i], expect[static_cast<size_t>(i)]);
    }
    QCOMPARE(std::memcmp(f.find("net.0.bias")->bytes.data(), dq.find("net.0.bias")->bytes.data(), 128 * 4), 0);
    // Per-layer override: the classifier at 8 bits per channel, stored as int8.
    SafeTensorsFile q8 = quantize_weights(f, QuantPlan::parse(spec, "net.2:8:channel"), &rep);
    QCOMPARE(q8.find("net.2.weight.qweight")->dtype, std::string("I8"));
    QCOMPARE(rep.code_bytes, int64_t(128 * 64 / 2 + 10 * 128));
    std::filesystem::remove(path);
    checkQuantMetadata(q);
  }

  // io/weights.h validate_weights_metadata: every way a quantized file's metadata can disagree with
  // its tensors is refused naming the weight and the fault (and dequantization refuses it too).
  void checkQuantMetadata(const SafeTensorsFile& q) {
    QVERIFY(validate_weights_metadata(q, "q").quantized);
    QCOMPARE(validate_weights_metadata(q, "q").quant.size(), size_t(2));
    auto fault = [&](const std::function<void(SafeTensorsFile&)>& edit) {
      SafeTensorsFile bad = q;
      edit(bad);
      try {
        dequantize_weights(bad, "bad.safetensors");
      } catch (const Error& e) {
        return std::string(e.what());
      }
      return std::string("no error");
    };
    auto tensor = [](SafeTensorsFile& f, const std::string& name) -> SafeTensor& {
      for (auto& t : f.tensors)
        if (t.name == name) return t;
      throw Error("test: no tensor " + name);
    };
    std::string e = fault([&](SafeTensorsFile& f) {
      SafeTensor& q = tensor(f, "net.0.weight.qweight");
      q.bytes.resize(100);
      q.shape = {100};
    });
    QVERIFY2(e.find("bad.safetensors") != std::string::npos && e.find("net.0.weight") != std::string::npos &&
                 e.find("code bytes, expected 4096") != std::string::npos,
             e.c_str());
    e = fault([&](SafeTensorsFile& f) {
      SafeTensor& s = tensor(f, "net.2.weight.scales");
      s.shape = {3};
      s.bytes.resize(6);
    });
    QVERIFY2(e.find("net.2.weight") != std::string::npos && e.find("3 scales, expected 40") != std::string::npos, e.c_str());
    e = fault([&](SafeTensorsFile& f) {
      SafeTensor& sc = tensor(f, "net.0.weight.scales");
      sc.dtype = "F32";
      sc.shape = {static_cast<int64_t>(sc.bytes.size() / 4)};
    });
    QVERIFY2(e.find("F16") != std::string::npos, e.c_str());
    e = fault([&](SafeTensorsFile& f) {
      Json m = Json::parse(f.metadata.at("trainlab_quant"));
      m["net.0.weight"]["group"] = 48;  // does not divide the 64 input features
      f.metadata["trainlab_quant"] = m.dump();
    });
    QVERIFY2(e.find("net.0.weight") != std::string::npos && e.find("does not divide") != std::string::npos, e.c_str());
    e = fault([&](SafeTensorsFile& f) {
      Json m = Json::parse(f.metadata.at("trainlab_quant"));
      m.erase("net.2.weight");
      f.metadata["trainlab_quant"] = m.dump();
    });
    QVERIFY2(e.find("net.2.weight.qweight") != std::string::npos && e.find("no entry") != std::string::npos, e.c_str());
    e = fault([&](SafeTensorsFile& f) { f.metadata["trainlab_architecture"] = "[1, 2"; });
    QVERIFY2(e.find("trainlab_architecture") != std::string::npos && e.find("not valid JSON") != std::string::npos, e.c_str());
  }

  // QAT's straight-through estimator: forward and the input gradients use Q(w), and the weight
  // gradient handed to the fp32 master is dL/dQ(w) unchanged (the rounding treated as identity).
  void steGradient() {
    CpuBackend be(1);
    Config c = qat_config("3", "channel");
    const int64_t B = 5;
    auto qat_model = std::unique_ptr<Model>(new Mlp(be, {8, 12, 4}, Activation::ReLU, 11));
    Compression comp(compress_options(c), be);
    auto model = comp.attach(std::move(qat_model), B, 1);
    comp.before_step(0);
    // Reference: a plain model whose weights ARE Q(w).
    Mlp ref(be, {8, 12, 4}, Activation::ReLU, 99);
    auto mp = model->parameters(), rp = ref.parameters();
    for (size_t i = 0; i < mp.size(); ++i) {
      QVERIFY(i % 2 == 1 || !mp[i]->value.same_storage(mp[i]->master));
      be.copy(mp[i]->value, rp[i]->master);  // value = Q(master) for weights, = master for biases
    }
    std::mt19937_64 rng(4);
    std::vector<float> hx(static_cast<size_t>(B * 8));
    for (auto& v : hx) v = uniform_pm(rng, 1.0f);
    std::vector<int32_t> hy = {0, 1, 2, 3, 1};
    Tensor x = be.empty({B, 8}, DType::F32, MemCategory::Workspace);
    Tensor y = be.empty({B}, DType::I32, MemCategory::Workspace);
    be.upload(x, hx.data(), DType::F32);
    be.upload(y, hy.data(), DType::I32);
    Tensor stats = be.empty({2}, DType::F32, MemCategory::Workspace);
    auto loss_and_grads = [&](Model& m) {
      Tensor z = m.forward(be, x, true);
      Tensor dz = be.empty(z.shape(), DType::F32, MemCategory::Workspace);
      be.softmax_xent(z, y, &dz, 1.0f / B, stats, false);
      m.backward(be, dz, false);
      float st[2];
      be.download(stats, st, DType::F32);
      return st[0] / B;
    };
    const float lq = loss_and_grads(*model);
    const float lr = loss_and_grads(ref);
    QCOMPARE(lq, lr);
    for (size_t i = 0; i < mp.size(); ++i) {
      std::vector<float> g1(static_cast<size_t>(mp[i]->numel())), g2(g1.size());
      be.download(mp[i]->grad, g1.data(), DType::F32);
      be.download(rp[i]->grad, g2.data(), DType::F32);
      QCOMPARE(g1, g2);
    }
    // ... and that gradient is dL/dQ(w): central differences on the reference's weights.
    Parameter* w0 = rp[0];
    std::vector<float> g(static_cast<size_t>(w0->numel())), wv(g.size());
    be.download(w0->grad, g.data(), DType::F32);
    be.download(w0->master, wv.data(), DType::F32);
    for (size_t k : {size_t(0), size_t(17), size_t(50), size_t(95)}) {
      const float h = 1e-2f, keep = wv[k];
      wv[k] = keep + h;
      be.upload(w0->master, wv.data(), DType::F32);
      const float lp = loss_and_grads(ref);
      wv[k] = keep - h;
      be.upload(w0->master, wv.data(), DType::F32);
      const float lm = loss_and_grads(ref);
      wv[k] = keep;
      be.upload(w0->master, wv.data(), DType::F32);
      const float fd = (lp - lm) / (2 * h);
      QVERIFY2(std::fabs(fd - g[k]) < 2e-3f + 0.05f * std::fabs(g[k]), qPrintable(QString("%1 vs %2").arg(fd).arg(g[k])));
    }
    // The master keeps full precision: only the compute copy is on the grid.
    std::vector<float> master(static_cast<size_t>(mp[0]->numel())), value(master.size());
    be.download(mp[0]->master, master.data(), DType::F32);
    be.download(mp[0]->value, value.data(), DType::F32);
    QVERIFY(master != value);
  }

  // QAT quantizes every linear weight, the classifier included, even when pruning is told to leave
  // the classifier out (prune.include_output=false): the stored low-bit file quantizes them all.
  void qatCoversClassifierWhenPruningSkipsIt() {
    CpuBackend be(1);
    Config c = qat_config("2", "tensor");
    c.set("prune.include_output", "false");
    auto m = std::unique_ptr<Model>(new Mlp(be, {8, 12, 4}, Activation::ReLU, 5));
    Compression comp(compress_options(c), be);
    auto model = comp.attach(std::move(m), 4, 1);
    comp.before_step(0);
    auto ps = model->parameters();
    for (size_t i = 0; i < ps.size(); i += 2) {  // weights (biases sit between them)
      Parameter* w = ps[i];
      QVERIFY2(!w->value.same_storage(w->master), w->name.c_str());
      std::vector<float> v(static_cast<size_t>(w->numel()));
      be.download(w->value, v.data(), DType::F32);
      std::set<float> levels(v.begin(), v.end());
      QVERIFY2(levels.size() <= 4, qPrintable(QString("%1: %2 distinct values at 2 bits").arg(w->name.c_str()).arg(levels.size())));
    }
  }

  // QAT switched on in the middle of a run applies at the next step and ends with a real
  // quantized weights file whose accuracy is the trainer's.
  void qatMidRun() {
    const std::string dir = (std::filesystem::temp_directory_path() / "trainlab_test_qat_run").string();
    std::filesystem::remove_all(dir);
    Config c;
    c.set("device.name", "cpu");
    c.set("train.steps", "60");
    c.set("model.name", "mlp");
    c.set("model.hidden", "[32]");
    c.set("run.out", dir);
    c.set("quant.bits", "4");
    c.set("quant.granularity", "group");
    c.set("quant.group", "32");
    Trainer* tp = nullptr;
    std::vector<std::string> events(61);
    TrainerCallbacks cb;
    cb.on_step = [&](const StepMetrics& m) {
      events[static_cast<size_t>(m.step)] = m.event;
      if (m.step == 20) tp->set("quant.mode", Json("qat"));
    };
    Trainer t(c, cb);
    tp = &t;
    const RunSummary s = t.run();
    QCOMPARE(s.status, std::string("completed"));
    QVERIFY2(events[21].find("qat") != std::string::npos, events[21].c_str());
    QVERIFY(events[20].empty());
    const SafeTensorsFile q = read_safetensors(dir + "/model.quant.safetensors");
    QVERIFY(is_quantized_file(q));
    CpuBackend be(1);
    Config dc;
    const TrainTestSplit data = load_classification_data(data_options(dc));
    QVERIFY(std::fabs(file_accuracy(be, q, data.test) - s.test_accuracy) <= 1.5 / data.test.size());
    std::filesystem::remove_all(dir);
  }

  // GPTQ's output error on its calibration inputs is below round-to-nearest's at 3 and 4 bits,
  // per channel and in groups of 32, in column order and act-order; its codes are the lab's
  // format (the file written with them decodes to GPTQ's values), and output_error is the direct
  // ||X dW^T||^2.
  void gptqBelowRtn() {
    const int64_t rows = 48, cols = 128, n = 512;
    const auto x = correlated_inputs(n, cols, 0, 21);
    const auto w = normal_weights(rows * cols, 22);
    std::vector<double> gram;
    accumulate_gram(x.data(), n, cols, gram);
    for (int bits : {3, 4})
      for (QuantGranularity g : {QuantGranularity::Channel, QuantGranularity::Group})
        for (bool act_order : {false, true}) {
          QuantSpec spec;
          spec.bits = bits;
          spec.granularity = g;
          GptqOptions o;
          o.act_order = act_order;
          const QuantizedMatrix q = gptq_quantize(w.data(), rows, cols, gram, n, spec, o);
          const auto wq = q.dequantized(), wr = rtn_quantize(w.data(), rows, cols, spec).dequantized();
          const double eg = direct_output_error(x, w, wq, rows, cols), er = direct_output_error(x, w, wr, rows, cols);
          const QString what = QString("%1 bits %2 act-order %3: gptq %4, rtn %5").arg(bits).arg(granularity_name(g)).arg(act_order).arg(eg).arg(er);
          QVERIFY2(eg < 0.7 * er, qPrintable(what));
          QVERIFY2(std::fabs(output_error(w.data(), wq.data(), rows, cols, gram, n) - eg) < 1e-6 * (1.0 + eg), qPrintable(what));
          SafeTensorsFile f;
          SafeTensor t;
          t.name = "net.0.weight";
          t.dtype = "F32";
          t.shape = {rows, cols};
          t.bytes.resize(w.size() * 4);
          std::memcpy(t.bytes.data(), w.data(), t.bytes.size());
          f.tensors.push_back(t);
          const auto spec_for = [&](const std::string&) { return spec; };
          const SafeTensorsFile file = quantize_weights(f, spec_for, nullptr, {{"net.0.weight", QuantCodes{q.scales, q.codes}}});
          const SafeTensorsFile back = dequantize_weights(file);
          QVERIFY(std::memcmp(back.find("net.0.weight")->bytes.data(), wq.data(), wq.size() * 4) == 0);
        }
  }

  // AWQ on a layer whose inputs have outlier channels: its output error is below
  // round-to-nearest's (alpha > 0 chosen), and at alpha = 0 it is round-to-nearest itself; so is
  // its clipping search's.
  void awqBelowRtnWithOutlierChannels() {
    const int64_t rows = 32, cols = 64, n = 256;
    const auto x = correlated_inputs(n, cols, 4, 31);
    const auto w = normal_weights(rows * cols, 32);
    std::vector<double> gram;
    accumulate_gram(x.data(), n, cols, gram);
    std::vector<float> mean_abs(static_cast<size_t>(cols), 0.0f);
    for (size_t i = 0; i < x.size(); ++i) mean_abs[i % static_cast<size_t>(cols)] += std::fabs(x[i]) / static_cast<float>(n);
    for (int bits : {3, 4}) {
      QuantSpec spec;
      spec.bits = bits;
      spec.granularity = QuantGranularity::Channel;
      const AwqResult r = awq_search(w.data(), rows, cols, mean_abs, gram, n, spec);
      const auto wr = rtn_quantize(w.data(), rows, cols, spec).dequantized();
      const double er = direct_output_error(x, w, wr, rows, cols);
      QVERIFY2(std::fabs(r.rtn_error - er) < 1e-6 * (1.0 + er), qPrintable(QString("%1 vs %2").arg(r.rtn_error).arg(er)));
      QVERIFY2(r.alpha > 0.0 && r.error < 0.8 * er, qPrintable(QString("%1 bits: awq %2 (alpha %3), rtn %4").arg(bits).arg(r.error).arg(r.alpha).arg(er)));
      // The clipping search on the output error: below rtn's (whose scale is its first candidate).
      const double ec = direct_output_error(x, w, clip_quantize(w.data(), rows, cols, gram, spec).dequantized(), rows, cols);
      QVERIFY2(ec < er, qPrintable(QString("%1 bits: clipped %2, rtn %3").arg(bits).arg(ec).arg(er)));
    }
  }

  // AWQ's folds leave the model's function unchanged (the scaled fp32 file computes the same
  // logits): the MLP's previous ReLU layer, char-gpt's LayerNorms and the v rows of qkv. GPTQ's
  // layer errors on the calibration data (the layers quantized in order) are below rtn's.
  void methodsOnModels() {
    CpuBackend be(1);
    Mlp mlp(be, {16, 32, 24, 4}, Activation::ReLU, 3);
    CharGptConfig cfg;
    cfg.vocab = 11;
    cfg.layers = 2;
    cfg.heads = 2;
    cfg.dim = 32;
    cfg.context = 8;
    CharGpt gpt(be, cfg, 4);
    std::mt19937_64 rng(5);
    CalibrationSet mlp_cal, gpt_cal;
    for (int b = 0; b < 3; ++b) {
      CalibrationBatch fb{{64, 16}, std::vector<float>(64 * 16), {}};
      for (auto& v : fb.features) v = uniform_pm(rng, 1.0f);
      mlp_cal.batches.push_back(fb);
      CalibrationBatch tb{{6, 8}, {}, std::vector<int32_t>(48)};
      for (auto& t : tb.tokens) t = static_cast<int32_t>(rng() % 11);
      gpt_cal.batches.push_back(tb);
    }
    QuantSpec spec;
    spec.bits = 3;
    const QuantPlan plan = QuantPlan::parse(spec, "");
    PtqMethodOptions awq;
    awq.method = "awq";
    awq.awq_alpha = 0.5;  // every foldable layer scaled (a search may keep alpha 0 on a random model)
    for (Model* m : {static_cast<Model*>(&mlp), static_cast<Model*>(&gpt)}) {
      const CalibrationSet& cal = m == &mlp ? mlp_cal : gpt_cal;
      const SafeTensorsFile f = random_model_file(be, *m);
      Json layers;
      const SafeTensorsFile scaled = awq_scaled_weights(be, f, "w", plan, awq, cal, &layers);
      int folded = 0;
      for (const Json& l : layers) folded += l["folded"].get<bool>() && l["alpha"].get<double>() == 0.5;
      QVERIFY2(folded == (m == &mlp ? 2 : 7), layers.dump().c_str());  // mlp: net.2, net.4; gpt: 3 a block + head
      const auto a = logits_of(be, f, cal.batches[0]), b = logits_of(be, scaled, cal.batches[0]);
      for (size_t i = 0; i < a.size(); ++i) QVERIFY2(std::fabs(a[i] - b[i]) < 1e-4f * (1.0f + std::fabs(a[i])), m->kind().c_str());
      PtqMethodOptions gptq;
      gptq.method = "gptq";
      Json info;
      const SafeTensorsFile q = quantize_by_method(be, f, "w", plan, gptq, cal, nullptr, &info);
      QVERIFY(is_quantized_file(q));
      QVERIFY(!info["layers"].empty());
      for (const Json& l : info["layers"]) QVERIFY2(l["error"].get<double>() < l["rtn_error"].get<double>(), l.dump().c_str());
      logits_of(be, q, cal.batches[0]);  // the file loads as a model
    }
  }

  // Bad input: gptq / awq without calibration data, an unknown method, damp outside (0, 1]: an
  // Error naming what to give, from the library and from trainlab-cli.
  void methodBadInput() {
    CpuBackend be(1);
    Mlp mlp(be, {8, 8, 2}, Activation::ReLU, 1);
    const SafeTensorsFile f = model_to_file(be, mlp);
    const QuantPlan plan = QuantPlan::parse(QuantSpec{}, "");
    auto error_of = [&](const PtqMethodOptions& o) -> std::string {
      try {
        quantize_by_method(be, f, "w", plan, o, CalibrationSet{}, nullptr);
      } catch (const Error& e) {
        return e.what();
      }
      return "";
    };
    PtqMethodOptions o;
    for (const char* m : {"gptq", "awq"}) {
      o.method = m;
      const std::string e = error_of(o);
      QVERIFY2(e.find("needs calibration data") != std::string::npos && e.find("--calibration") != std::string::npos, e.c_str());
    }
    o.method = "gptx";
    QVERIFY2(error_of(o).find("expected rtn, gptq or awq") != std::string::npos, error_of(o).c_str());
    o.method = "gptq";
    for (double d : {0.0, 1.5, -0.1}) {
      o.damp = d;
      QVERIFY2(error_of(o).find("quant.damp") != std::string::npos, error_of(o).c_str());
    }
    CliResult r = run_cli({"quantize", "--weights", "/nonexistent.safetensors", "--method", "gptx"}, 30000);
    QVERIFY2(r.code > 0 && r.err.contains("expected rtn, gptq or awq"), qPrintable(describe(r)));
    r = run_cli({"quantize", "--weights", "/nonexistent.safetensors", "--method", "gptq", "--damp", "0"}, 30000);
    QVERIFY2(r.code > 0 && r.err.contains("--damp"), qPrintable(describe(r)));
  }
};

QTEST_APPLESS_MAIN(TestQuant)
#include "test_quant.moc"
