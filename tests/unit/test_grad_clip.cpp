// Gradient clipping by the global norm (optim.clip_norm): the backend's sum of squares, the
// update's size once clipped (SGD without momentum moves the weights by exactly lr * clip), the
// norm recorded per step, and no change at all below the threshold. (Over several ranks:
// test_dist_ranks, clippingAgreesAcrossRanks.)
#include <QtTest>
#include <cmath>

#include "backend/cpu_backend.h"
#include "config/optim_options.h"
#include "io/safetensors.h"
#include "test_support.h"

using namespace trainlab;
using namespace trainlab::test;

namespace {

// The digits MLP, one SGD step (no momentum, no decay) at learning rate `lr`.
Config sgd_step(const std::string& out, const std::string& lr, const std::string& clip) {
  Config c = digits_config(out, 1);
  c.set("optim.name", "sgd");
  c.set("optim.momentum", "0");
  c.set("optim.weight_decay", "0");
  c.set("optim.lr", lr);
  c.set("optim.clip_norm", clip);
  return c;
}

// sqrt of the sum over every tensor of (a - b)^2.
double distance(const SafeTensorsFile& a, const SafeTensorsFile& b) {
  double sum = 0.0;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const auto* x = reinterpret_cast<const float*>(a.tensors[i].bytes.data());
    const auto* y = reinterpret_cast<const float*>(b.tensors[i].bytes.data());
    for (size_t k = 0; k < a.tensors[i].bytes.size() / 4; ++k) sum += (double(x[k]) - y[k]) * (double(x[k]) - y[k]);
  }
  return std::sqrt(sum);
}

}  // namespace

class TestGradClip : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;
  std::string dir(const char* name) { return m_tmp.path().toStdString() + "/" + name; }

 private slots:
  void sumOfSquares() {
    CpuBackend be;
    Tensor a = upload_f32(be, {1.0f, -2.0f, 0.5f}, {3});
    Tensor b = be.empty({2}, DType::BF16, MemCategory::Gradients);
    const float v[2] = {3.0f, -0.25f};
    be.upload(b, v, DType::F32);
    const Tensor* both[] = {&a, &b};
    QCOMPARE(be.sum_squares(both), 1.0 + 4.0 + 0.25 + 9.0 + 0.0625);
  }

  void configKey() {
    QCOMPARE(optim_options(Config()).clip_norm, 0.0);
    Config c;
    c.set("optim.clip_norm", "1.5");
    QCOMPARE(optim_options(c).clip_norm, 1.5);
    const std::string e = error_of([&] { c.set("optim.clip_norm", "-1"); });
    QVERIFY2(e.find("optim.clip_norm") != std::string::npos && e.find("expected a number in [0, 1e6]") != std::string::npos, e.c_str());
  }

  // lr 1e-12 leaves the initial weights (to 1e-12); lr 1 with the norm clipped to 1e-3 moves them
  // by 1e-3 in L2 (fp32 rounding of weights of size ~0.1: far below 1 %).
  void clippedUpdateHasTheClipsNorm() {
    Trainer(sgd_step(dir("still"), "1e-12", "0")).run();
    const RunSummary s = Trainer(sgd_step(dir("clipped"), "1", "0.001")).run();
    QCOMPARE(s.status, std::string("completed"));
    const SafeTensorsFile w0 = read_safetensors(dir("still") + "/model.safetensors");
    const SafeTensorsFile w1 = read_safetensors(dir("clipped") + "/model.safetensors");
    const double moved = distance(w0, w1);
    QVERIFY2(std::fabs(moved - 1e-3) < 1e-5, qPrintable(QString::number(moved, 'g', 10)));
    const Json m = metrics_lines(dir("clipped")).front();
    QVERIFY2(m.contains("grad_norm") && m.at("grad_norm").get<double>() > 0.01, m.dump().c_str());
  }

  // Above the norm, clipping changes nothing: the same losses bit for bit.
  void belowTheThresholdNothingChanges() {
    Config a = digits_config(dir("plain"), 5), b = digits_config(dir("loose"), 5);
    b.set("optim.clip_norm", "1000000");
    Trainer(a).run();
    Trainer(b).run();
    const auto la = metrics_lines(dir("plain")), lb = metrics_lines(dir("loose"));
    QCOMPARE(la.size(), lb.size());
    for (size_t i = 0; i < la.size(); ++i) QCOMPARE(la[i].at("loss").get<double>(), lb[i].at("loss").get<double>());
    QVERIFY(!la[0].contains("grad_norm") && lb[0].contains("grad_norm"));
  }
};

QTEST_APPLESS_MAIN(TestGradClip)
#include "test_grad_clip.moc"
