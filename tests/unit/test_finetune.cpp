// Fine-tuning (issue 40; core/finetune/, docs/FINETUNE.md) on micro char-gpts, a few steps each:
//   * NF4 (bitsandbytes' codebook, blocks of 64, double-quantized scales) has a lower mean squared
//     error than int4 with a scale per 64 weights on normally distributed weights (QLoRA's
//     argument), and takes 4 + 8/64 + 32/(64*256) bits a weight plus one fp32 offset a tensor;
//   * LoRA: B = 0 makes the first forward the base model's, bit for bit; the optimizer gets the
//     adapters only (the base has no optimizer state and keeps its weights); the adapters'
//     gradients match finite differences of the loss (lora and dora);
//   * a run pretrained on Shakespeare and adapted to the KJV text with lora: its merged weights
//     (trainlab's merge) evaluate to the run's own validation loss within 1e-5; the adapter file
//     has PEFT's names; the measured fine-tuning lines equal the planner's prediction;
//   * bad input: a rank above a target's smaller dimension, targets naming no layer, init-from a
//     model of another shape, a text with characters outside the base's vocabulary, lora and qlora
//     on the digits MLP, a safetensors header naming a tensor twice.
#include <QtTest>
#include <cmath>
#include <filesystem>
#include <random>

#include "backend/cpu_backend.h"
#include "compress/post_training.h"
#include "config/finetune_options.h"
#include "data/text.h"
#include "finetune/finetune_run.h"
#include "io/weights.h"
#include "nn/model.h"
#include "optim/optimizer.h"
#include "tensor/quant_format.h"
#include "test_support.h"
#include "train/trainer.h"
#include "util/paths.h"

using namespace trainlab;
using namespace trainlab::test;
namespace fs = std::filesystem;

namespace {

CharGptConfig micro_config() {
  CharGptConfig c;
  c.vocab = 10;
  c.layers = 1, c.heads = 2, c.dim = 16, c.context = 8;
  return c;
}

Tensor tokens(Backend& be, int64_t b, int64_t t, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> v(static_cast<size_t>(b * t));
  for (auto& x : v) x = static_cast<int32_t>(rng() % 10);
  Tensor x = be.empty({b, t}, DType::I32, MemCategory::Activations);
  be.upload(x, v.data(), DType::I32);
  return x;
}

// Mean cross-entropy of the model on (x, next tokens y) and, with `grad`, its gradients.
double loss_of(Backend& be, Model& m, const Tensor& x, const Tensor& y, bool grad) {
  Tensor logits = m.forward(be, x, grad);
  Tensor stats = be.empty({2}, DType::F32, MemCategory::Workspace);
  const int64_t n = x.numel();
  Tensor dl = be.empty(logits.shape(), DType::F32, MemCategory::Activations);
  m.cross_entropy(be, logits, y, grad ? &dl : nullptr, 1.0f / static_cast<float>(n), stats, false);
  if (grad) m.backward(be, dl, false);
  return download_f32(be, stats)[0] / static_cast<double>(n);
}

Config micro_run(const std::string& out, const std::string& data, long steps) {
  Config c;
  c.set("device.name", "cpu");
  c.set("device.calibration", "off");
  c.set("model.name", "char-gpt");
  c.set("model.layers", "1");
  c.set("model.heads", "2");
  c.set("model.dim", "32");
  c.set("model.context", "16");
  c.set("data.name", data);
  c.set("train.batch", "4");
  c.set("train.steps", std::to_string(steps));
  c.set("train.eval_windows", "8");
  c.set("train.seed", "3");
  c.set("run.out", out);
  return c;
}

}  // namespace

class TestFinetune : public QObject {
  Q_OBJECT
  fs::path m_dir;

 private slots:
  void initTestCase() {
    m_dir = fs::temp_directory_path() / ("trainlab_finetune_" + std::to_string(::getpid()));
    fs::remove_all(m_dir);
    fs::create_directories(m_dir);
  }
  void cleanupTestCase() { fs::remove_all(m_dir); }

  void nf4_beats_int4_on_normal_weights() {
    const int64_t n = 4 * 16384;
    std::mt19937_64 rng(7);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    std::vector<float> w(static_cast<size_t>(n)), nf4(w.size()), int4(w.size());
    for (float& x : w) x = normal(rng);
    const Nf4Tensor q = nf4_quantize(w.data(), n);
    nf4_dequantize(q, nf4.data());
    fake_quantize_host(w.data(), int4.data(), n, 4, 64);
    double e_nf4 = 0, e_int4 = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      e_nf4 += (nf4[i] - w[i]) * (nf4[i] - w[i]);
      e_int4 += (int4[i] - w[i]) * (int4[i] - w[i]);
    }
    QVERIFY2(e_nf4 < 0.9 * e_int4, qPrintable(QString("NF4 MSE %1, int4 %2").arg(e_nf4 / n).arg(e_int4 / n)));
    QCOMPARE(q.bits_per_weight(), 4.0 + 8.0 / 64 + 32.0 / (64 * 256) + 32.0 / n);
    for (uint8_t i = 0; i < 16; ++i) QCOMPARE(nf4_index(kNf4Code[i]), i);
  }

  void lora_starts_at_the_base_and_trains_only_adapters() {
    CpuBackend be(1);
    auto gpt = std::make_unique<CharGpt>(be, micro_config(), 5);
    const Tensor x = tokens(be, 2, 8, 1), y = tokens(be, 16, 1, 2).reshape({16});
    const std::vector<float> logits0 = download_f32(be, gpt->forward(be, x, false));
    std::vector<std::vector<float>> before;
    std::vector<Parameter*> base_params = gpt->parameters();
    for (Parameter* p : base_params) before.push_back(download_f32(be, p->master));
    FinetuneOptions o;
    o.method = FinetuneMethod::Lora;
    o.rank = 2;
    o.init_from = "unused";
    AdaptedModel m(be, std::move(gpt), o, 9);
    QCOMPARE(download_f32(be, m.forward(be, x, false)), logits0);  // B = 0
    for (Parameter* p : m.parameters()) QVERIFY(p->name.find(".lora_") != std::string::npos);
    OptimizerOptions oo;
    oo.lr = 1e-2;
    auto opt = make_optimizer(oo);
    std::vector<Parameter*> ps = m.parameters();
    opt->attach(be, ps);
    StepScalars sc;
    sc.lr = 1e-2f;
    sc.step = 1;
    be.set_step_scalars(sc);
    const double l0 = loss_of(be, m, x, y, true);
    opt->step(be, ps);
    // The base is frozen: no optimizer state, no gradient buffer, every value as it was (the
    // adapter products never form W' = W + s B A).
    for (size_t i = 0; i < base_params.size(); ++i) {
      Parameter* p = base_params[i];
      QVERIFY2(!p->m.defined() && !p->v.defined() && !p->grad.defined(), p->name.c_str());
      QCOMPARE(download_f32(be, p->master), before[i]);
    }
    for (Adapter& ad : m.adapters()) QVERIFY(!ad.frozen.defined());
    double l1 = l0;
    for (int s = 2; s < 8; ++s) {
      sc.step = static_cast<float>(s);
      be.set_step_scalars(sc);
      l1 = loss_of(be, m, x, y, true);
      opt->step(be, ps);
    }
    QVERIFY2(l1 < l0, qPrintable(QString("loss %1 -> %2").arg(l0).arg(l1)));
  }

  void adapter_gradients_match_finite_differences_data() {
    QTest::addColumn<int>("method");
    QTest::newRow("lora") << static_cast<int>(FinetuneMethod::Lora);
    QTest::newRow("qlora") << static_cast<int>(FinetuneMethod::Qlora);
    QTest::newRow("dora") << static_cast<int>(FinetuneMethod::Dora);
  }
  void adapter_gradients_match_finite_differences() {
    QFETCH(int, method);
    CpuBackend be(1);
    FinetuneOptions o;
    o.method = static_cast<FinetuneMethod>(method);
    o.rank = 2;
    o.targets = {"qkv", "fc2", "head"};
    AdaptedModel m(be, std::make_unique<CharGpt>(be, micro_config(), 5), o, 9);
    const Tensor x = tokens(be, 2, 8, 1), y = tokens(be, 16, 1, 2).reshape({16});
    for (Parameter* p : m.parameters()) {  // B away from 0, so that every path has a gradient
      std::vector<float> v = download_f32(be, p->master);
      const std::vector<float> r = random_vector(v.size(), 11, -0.2f, 0.2f);
      for (size_t i = 0; i < v.size(); ++i) v[i] += r[i];
      be.upload(p->master, v.data(), DType::F32);
    }
    loss_of(be, m, x, y, true);
    for (Parameter* p : m.parameters()) {
      const std::vector<float> g = download_f32(be, p->grad);
      std::vector<float> v = download_f32(be, p->master);
      for (size_t i : {size_t{0}, v.size() / 2, v.size() - 1}) {
        const float keep = v[i], h = 1e-2f;
        v[i] = keep + h;
        be.upload(p->master, v.data(), DType::F32);
        const double up = loss_of(be, m, x, y, false);
        v[i] = keep - h;
        be.upload(p->master, v.data(), DType::F32);
        const double down = loss_of(be, m, x, y, false);
        v[i] = keep;
        be.upload(p->master, v.data(), DType::F32);
        const double fd = (up - down) / (2 * h);
        QVERIFY2(std::fabs(fd - g[i]) < 2e-3 + 0.05 * std::fabs(fd),
                 qPrintable(QString("%1[%2]: fd %3, backward %4").arg(q(p->name)).arg(i).arg(fd).arg(g[i])));
      }
    }
  }

  // The adapter products against the effective-weight path they replaced: a plain copy of the base
  // with W' = W + s B A folded in, its dL/dW' = G, and dB = s G A^T, dA = s B^T G on the host.
  void lora_gradients_equal_the_folded_path() {
    CpuBackend be(1);
    FinetuneOptions o;
    o.method = FinetuneMethod::Lora;
    o.rank = 3;
    o.alpha = 6.0;
    o.targets = {"qkv", "proj", "fc1", "fc2", "head"};
    AdaptedModel m(be, std::make_unique<CharGpt>(be, micro_config(), 5), o, 9);
    const Tensor x = tokens(be, 2, 8, 3), y = tokens(be, 16, 1, 4).reshape({16});
    for (Parameter* p : m.parameters()) {
      std::vector<float> v = download_f32(be, p->master);
      const std::vector<float> r = random_vector(v.size(), 13, -0.3f, 0.3f);
      for (size_t i = 0; i < v.size(); ++i) v[i] += r[i];
      be.upload(p->master, v.data(), DType::F32);
    }
    const double loss = loss_of(be, m, x, y, true);
    CharGpt ref(be, micro_config(), 5);
    for (Adapter& ad : m.adapters()) {
      const std::vector<float> w = m.effective_weight(be, ad);
      be.upload(ref.find_parameter(ad.target.module + ".weight")->master, w.data(), DType::F32);
    }
    const double ref_loss = loss_of(be, ref, x, y, true);
    QVERIFY2(std::fabs(loss - ref_loss) < 1e-6, qPrintable(QString("%1 vs %2").arg(loss).arg(ref_loss)));
    const float s = static_cast<float>(o.scale());
    const int64_t r = o.rank;
    for (Adapter& ad : m.adapters()) {
      const int64_t out = ad.target.out, in = ad.target.in;
      const std::vector<float> g = download_f32(be, ref.find_parameter(ad.target.module + ".weight")->grad);
      const std::vector<float> a = download_f32(be, ad.a.master), b = download_f32(be, ad.b.master);
      const std::vector<float> da = download_f32(be, ad.a.grad), db = download_f32(be, ad.b.grad);
      double worst = 0.0, scale = 0.0;
      for (int64_t k = 0; k < r; ++k) {
        for (int64_t o2 = 0; o2 < out; ++o2) {  // dB[o2, k] = s sum_i G[o2, i] A[k, i]
          double acc = 0.0;
          for (int64_t i = 0; i < in; ++i) acc += double(g[size_t(o2 * in + i)]) * a[size_t(k * in + i)];
          worst = std::max(worst, std::fabs(s * acc - db[size_t(o2 * r + k)]));
          scale = std::max(scale, std::fabs(s * acc));
        }
        for (int64_t i = 0; i < in; ++i) {  // dA[k, i] = s sum_o B[o, k] G[o, i]
          double acc = 0.0;
          for (int64_t o2 = 0; o2 < out; ++o2) acc += double(b[size_t(o2 * r + k)]) * g[size_t(o2 * in + i)];
          worst = std::max(worst, std::fabs(s * acc - da[size_t(k * in + i)]));
          scale = std::max(scale, std::fabs(s * acc));
        }
      }
      QVERIFY2(scale > 1e-4, ad.target.module.c_str());  // a gradient that can fail the comparison
      QVERIFY2(worst < 1e-5 * scale + 1e-7,
               qPrintable(QString("%1: worst %2 of %3").arg(q(ad.target.module)).arg(worst).arg(scale)));
    }
  }

  void pretrain_adapt_merge() {
    const std::string base = (m_dir / "base").string(), lora = (m_dir / "lora").string();
    Trainer(micro_run(base, "tinyshakespeare", 3)).run();
    Config c = micro_run(lora, "kjv", 3);
    c.set("compress.init_from", base);  // a run folder: its model.safetensors
    c.set("finetune.method", "lora");
    c.set("finetune.rank", "4");
    c.set("finetune.targets", "qkv,fc1,head");
    std::vector<std::string> notices;
    const RunSummary sum = Trainer(c, {nullptr, [&](const std::string& n) { notices.push_back(n); }}).run();
    QCOMPARE(sum.status, std::string("completed"));
    const SafeTensorsFile adapters = read_safetensors(lora + "/adapter_model.safetensors");
    QVERIFY(adapters.find("base_model.model.blocks.0.qkv.lora_A.weight"));
    QVERIFY(adapters.find("base_model.model.head.lora_B.weight"));
    QCOMPARE(adapters.tensors.size(), size_t{6});
    // The merge of the run's adapters over its base evaluates to the run's own validation loss.
    const std::string merged = (m_dir / "merged" / "w.safetensors").string();
    fs::create_directories(m_dir / "merged");
    const MergeReport r = merge_run(lora, merged);
    QCOMPARE(r.adapters, int64_t{6});
    QVERIFY(fs::exists(m_dir / "merged" / "adapter_model.safetensors"));
    CpuBackend be(1);
    const SafeTensorsFile f = read_safetensors(merged);
    const std::string chars = Json::parse(f.metadata.at("trainlab_architecture")).at("chars").get<std::string>();
    const TextCorpus text = load_text_corpus(find_resource("data/kjv.txt"), 0.1, 3, &chars);
    const TextWeightsEval e = evaluate_text_weights(be, f, merged, text, 8, 4, 3);
    QVERIFY2(std::fabs(e.loss - sum.test_loss) < 1e-5, qPrintable(QString("%1 vs %2").arg(e.loss).arg(sum.test_loss)));
    // The measured lines are the planner's prediction.
    const Json measured = read_json(lora + "/finetune_memory.json");
    FinetuneOptions o = finetune_options(c);
    const Json arch = Json::parse(f.metadata.at("trainlab_architecture"));
    const CharGptConfig cfg = CharGptConfig::from_json(arch);
    int64_t params = 0;
    visit_architecture(arch, [&](const std::string&, const Shape& s) { params += shape_numel(s); });
    const FinetuneMemory predicted =
        predict_finetune_memory(finetune_targets(cfg.layers, cfg.dim, cfg.padded_vocab(), o), params, o, {}, 4);
    QCOMPARE(measured, predicted.to_json());
    // Adapter products: no W' and no base gradient, in the ledger and its lines.
    QCOMPARE(measured.at("effective_weight_bytes").get<int64_t>(), int64_t{0});
    QCOMPARE(measured.at("product_grad_workspace_bytes").get<int64_t>(), int64_t{0});
    QVERIFY(!notices.empty());
    for (const std::string& n : notices)
      QVERIFY2(n.find("W'") == std::string::npos && n.find("dL/dW") == std::string::npos, n.c_str());
  }

  void qlora_base_in_nf4() {
    const std::string base = (m_dir / "base").string(), out = (m_dir / "qlora").string();
    if (!fs::exists(base + "/model.safetensors")) Trainer(micro_run(base, "tinyshakespeare", 3)).run();
    Config c = micro_run(out, "kjv", 2);
    c.set("compress.init_from", base + "/model.safetensors");
    c.set("finetune.method", "qlora");
    c.set("finetune.targets", "fc1,fc2");
    QCOMPARE(Trainer(c).run().status, std::string("completed"));
    const Json m = read_json(out + "/finetune_memory.json");
    QCOMPARE(m.at("base_format").get<std::string>(), std::string("nf4"));
    // fc [128, 32] and out [32, 128]: 4096 weights each, 64 blocks, one scale block, one offset.
    QCOMPARE(m.at("base_bytes").get<int64_t>(), 2 * (2048 + 64 + 4 + 4));
    // The targets' weights exist only as NF4: one fp32 scratch of one [128, 32] product, no W', no
    // base gradient; the other frozen weights are every parameter but the two targets.
    QCOMPARE(m.at("dequant_scratch_bytes").get<int64_t>(), int64_t{4096 * 4});
    QCOMPARE(m.at("effective_weight_bytes").get<int64_t>(), int64_t{0});
    QCOMPARE(m.at("product_grad_workspace_bytes").get<int64_t>(), int64_t{0});
    CpuBackend be(1);
    const SafeTensorsFile f = read_safetensors(out + "/model.safetensors");
    const Json arch = Json::parse(f.metadata.at("trainlab_architecture"));
    int64_t params = 0;
    visit_architecture(arch, [&](const std::string&, const Shape& s) { params += shape_numel(s); });
    QCOMPARE(m.at("other_frozen_bytes").get<int64_t>(), 4 * (params - 2 * 4096));
  }

  void bad_input() {
    FinetuneOptions o;
    o.rank = 17;
    QVERIFY(error_of([&] { finetune_targets(1, 16, 10, o); }).find("finetune.rank 17 is larger than blocks.0.qkv") !=
            std::string::npos);
    QVERIFY(error_of([] { parse_finetune_targets("qkv,attn"); }).find("'attn' names no layer") != std::string::npos);
    QVERIFY(error_of([] { parse_finetune_targets("qkv,qkv"); }).find("named twice") != std::string::npos);
    const std::string base = (m_dir / "base").string();
    if (!fs::exists(base + "/model.safetensors")) Trainer(micro_run(base, "tinyshakespeare", 3)).run();
    Config wide = micro_run((m_dir / "wide").string(), "kjv", 1);
    wide.set("model.dim", "64");
    wide.set("compress.init_from", base);
    const std::string shape = error_of([&] { Trainer(wide).run(); });
    QVERIFY2(shape.find("1 layers x 2 heads x dim 32") != std::string::npos &&
                 shape.find("1 layers x 2 heads x dim 64") != std::string::npos,
             shape.c_str());
    std::string odd;
    while (odd.size() < 40000) odd += "And the LORD said, \xc3\xa9 is no letter of thine.\n";
    write_text((m_dir / "odd.txt").string(), odd);
    Config vocab = micro_run((m_dir / "vocab").string(), "text", 1);
    vocab.set("data.path", (m_dir / "odd.txt").string());
    vocab.set("compress.init_from", base);
    const std::string v = error_of([&] { Trainer(vocab).run(); });
    QVERIFY2(v.find("U+00E9") != std::string::npos && v.find("not in the model's vocabulary") != std::string::npos, v.c_str());
    for (const char* method : {"lora", "qlora"}) {
      Config d = digits_config((m_dir / (std::string("digits-") + method)).string(), 1);
      d.set("device.calibration", "off");
      d.set("compress.init_from", base);  // never read: the model is refused first
      d.set("finetune.method", method);
      const std::string e = error_of([&] { Trainer(d).run(); });
      QVERIFY2(e.find("wraps char-gpt's products") != std::string::npos, e.c_str());
      if (std::string(method) == "qlora") QVERIFY2(e.find("NF4") != std::string::npos, e.c_str());
    }
    Config none = micro_run((m_dir / "none").string(), "kjv", 1);
    none.set("finetune.method", "dora");
    QVERIFY(error_of([&] { Trainer(none).run(); }).find("set compress.init_from") != std::string::npos);
    // A safetensors header naming a tensor twice.
    const std::string header = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                               R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[static_cast<size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 255);
    bytes += header + std::string(4, '\0');
    const std::string twice = error_of([&] { parse_safetensors(bytes, "adapter.safetensors"); });
    QVERIFY2(twice.find("names 'a' twice") != std::string::npos, twice.c_str());
  }
};

QTEST_GUILESS_MAIN(TestFinetune)
#include "test_finetune.moc"
