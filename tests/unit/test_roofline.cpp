// The measured roofline (issue 19): the per-operation FLOPs and bytes formulas (backend/op_cost.h),
// the CPU backend's kernel timing carrying them, the calibration cache (round trip, a corrupt or
// foreign file measured again), MFU against the calibrated peak in a run, the metrics line's
// kernel costs and roofs, and the roofline's placement of kernels (train/roofline.h).
#include <QtTest>

#include <cstdlib>
#include <filesystem>

#include "backend/calibration.h"
#include "backend/cpu_backend.h"
#include "backend/op_cost.h"
#include "plan/memory_model.h"
#include "train/roofline.h"
#include "train/trainer.h"
#include "test_support.h"

using namespace trainlab;
using namespace trainlab::test;
namespace fs = std::filesystem;

namespace {
// A calibration of `be`'s device with made-up peaks (fp32 1 TFLOP/s, others 2) and bandwidth
// 10 GB/s, in the shape calibrate() expects for it.
Calibration made_up(Backend& be) {
  const DeviceInfo info = be.info();
  Calibration c;
  c.device = info.name;
  c.software = info.software;
  c.lab_version = lab_version();
  c.build = lab_build();
  c.peaks = calibration_plan(info);
  for (CalibratedPeak& p : c.peaks) {
    p.tflops = p.dtype == DType::F32 ? 1.0 : 2.0;
    p.size = 32;
  }
  c.bandwidth_bytes_per_s = 10e9;
  c.seconds = 0.5;
  return c;
}
}  // namespace

class TestRoofline : public QObject {
  Q_OBJECT
 private slots:
  void matmulAndStreamFormulas() {
    const OpCost g = matmul_cost(64, 32, 16, DType::BF16, DType::BF16, DType::F32);
    QCOMPARE(g.flops, 2.0 * 64 * 32 * 16);
    QCOMPARE(g.bytes, 2.0 * 64 * 16 + 2.0 * 16 * 32 + 4.0 * 64 * 32);
    QCOMPARE(matmul_cost(4, 4, 4, DType::F32, DType::F32, DType::F32, true).bytes, 4.0 * (16 + 16 + 2 * 16));
    CpuBackend be(1);
    Tensor x = be.empty({8, 16}, DType::F32, MemCategory::Activations);
    Tensor w = be.empty({4, 16}, DType::BF16, MemCategory::Weights);
    Tensor y = be.empty({8, 4}, DType::F32, MemCategory::Activations);
    Tensor dw = be.empty({4, 16}, DType::F32, MemCategory::Gradients);
    Tensor db = be.empty({4}, DType::F32, MemCategory::Gradients);
    Tensor dx = be.empty({8, 16}, DType::F32, MemCategory::Activations);
    // Backward: dw = dy^T x and dx = dy w, two products of the forward's size.
    const OpCost b = linear_backward_cost(x, w, y, dw, &db, &dx, true);
    QCOMPARE(b.flops, 2 * 2.0 * 8 * 4 * 16);
    QCOMPARE(b.bytes, (4.0 * 32 + 4.0 * 128 + 2 * 4.0 * 64) + (4.0 * 32 + 2.0 * 64 + 4.0 * 128) + 4.0 * 4);
    // Element-wise: bytes only, plus the stated FLOPs an element of the result.
    const OpCost e = stream_cost({&x, &dx}, {&dx}, op_flops::kAdd);
    QCOMPARE(e.bytes, 3 * 4.0 * 128);
    QCOMPARE(e.flops, 128.0);
    QCOMPARE(stream_cost({&x}, {}).flops, 0.0);
    // Causal attention: 2 B T^2 C forward (half of QK^T and PV's 4 B T^2 C), 2.5x backward.
    Tensor qkv = be.empty({2 * 8, 3 * 16}, DType::F32, MemCategory::Activations);
    QCOMPARE(attention_cost(qkv, 2, 8, 4, false).flops, 2.0 * 2 * 8 * 8 * 16);
    QCOMPARE(attention_cost(qkv, 2, 8, 4, true).flops, 2.5 * 2.0 * 2 * 8 * 8 * 16);
  }

  void cpuKernelTimesCarryCosts() {
    CpuBackend be(1);
    Tensor x = upload_f32(be, random_vector(8 * 16, 1), {8, 16});
    Tensor w = upload_f32(be, random_vector(4 * 16, 2), {4, 16});
    Tensor y = be.empty({8, 4}, DType::F32, MemCategory::Activations);
    be.linear_forward(x, w, nullptr, Activation::None, y, nullptr, MatmulMode::Native);
    QVERIFY(be.kernel_times().empty());  // timing off: nothing recorded
    be.set_kernel_timing(true);
    for (int i = 0; i < 3; ++i) be.linear_forward(x, w, nullptr, Activation::None, y, nullptr, MatmulMode::Native);
    // A residual aliasing y copies it inside: the copy counts with the product, not on its own.
    be.linear_forward_residual(x, w, nullptr, y, y, MatmulMode::Native);
    const std::vector<KernelTime> k = be.kernel_times();
    QCOMPARE(k.size(), size_t(1));
    QCOMPARE(k[0].name, std::string("linear_forward"));
    QCOMPARE(k[0].calls, int64_t(4));
    QCOMPARE(k[0].flops, 4 * 2.0 * 8 * 4 * 16);
    QCOMPARE(k[0].bytes, 4 * 4.0 * (128 + 64 + 32) + 4.0 * 32);  // the residual read once
    QVERIFY(k[0].ms > 0);
    be.reset_kernel_times();
    QVERIFY(be.kernel_times().empty());
  }

  void cacheRoundTrip() {
    QTemporaryDir dir;
    CpuBackend be(1);
    const Calibration first = calibrate(be, CalibrationMode::Cached, dir.path().toStdString(), 64);
    QVERIFY(!first.from_cache);
    QVERIFY(fs::exists(first.cache_path));
    QCOMPARE(first.peaks.size(), calibration_plan(be.info()).size());
    for (const CalibratedPeak& p : first.peaks) QVERIFY(p.tflops > 0 && p.size == 64);
    QVERIFY(first.bandwidth_bytes_per_s > 0);
    const Calibration again = calibrate(be, CalibrationMode::Cached, dir.path().toStdString(), 64);
    QVERIFY(again.from_cache);
    QVERIFY(again.note.empty());
    QCOMPARE(again.peaks.size(), first.peaks.size());
    for (size_t i = 0; i < first.peaks.size(); ++i) QCOMPARE(again.peaks[i].tflops, first.peaks[i].tflops);
    QCOMPARE(again.bandwidth_bytes_per_s, first.bandwidth_bytes_per_s);
    // Measure: measured again even though the cache is valid.
    QVERIFY(!calibrate(be, CalibrationMode::Measure, dir.path().toStdString(), 64).from_cache);
  }

  void corruptOrForeignCacheIsMeasuredAgain() {
    QTemporaryDir dir;
    CpuBackend be(1);
    const std::string path = calibration_file(dir.path().toStdString(), be.info());
    write_text(path, "{\"format\": \"trainlab-calibration\", \"version\": 1, \"peaks\": [");
    Calibration c = calibrate(be, CalibrationMode::Cached, dir.path().toStdString(), 64);
    QVERIFY(!c.from_cache);
    QVERIFY2(c.note.find("not a valid calibration") != std::string::npos, c.note.c_str());
    QVERIFY(parse_calibration(read_text(path)).peaks.size() == c.peaks.size());  // rewritten whole
    // Another device's file (or another driver, BLAS or lab version) is not trusted.
    Calibration other = made_up(be);
    other.device = "NVIDIA H200";
    write_text(path, calibration_to_json(other));
    c = calibrate(be, CalibrationMode::Cached, dir.path().toStdString(), 64);
    QVERIFY(!c.from_cache);
    QVERIFY2(c.note.find("measured on 'NVIDIA H200'") != std::string::npos, c.note.c_str());
    // Another build of the same version (a stale cache gave MFUs of 300 %): measured again.
    QVERIFY(!lab_build().empty());
    other = made_up(be);
    other.build = "1 bytes, modified 0";
    write_text(path, calibration_to_json(other));
    c = calibrate(be, CalibrationMode::Cached, dir.path().toStdString(), 64);
    QVERIFY(!c.from_cache);
    QVERIFY2(c.note.find("another build of TrainLab (1 bytes, modified 0)") != std::string::npos, c.note.c_str());
    QCOMPARE(c.build, lab_build());
    other = made_up(be);
    other.peaks[0].tflops = -1;  // a value out of range
    write_text(path, calibration_to_json(other));
    QVERIFY(!calibrate(be, CalibrationMode::Cached, dir.path().toStdString(), 64).from_cache);
    QVERIFY_THROWS_EXCEPTION(Error, parse_calibration("[1, 2]"));
    QCOMPARE(error_of([] { calibration_mode_from_name("sometimes"); }),
             std::string("device.calibration: expected cached, measure or off, got 'sometimes'"));
  }

  void mfuUsesCalibratedPeak() {
    QTemporaryDir cache, out;
    qputenv("XDG_CACHE_HOME", cache.path().toUtf8());
    CpuBackend probe(1);
    const Calibration fake = made_up(probe);  // fp32 at 1 TFLOP/s
    fs::create_directories(cache.path().toStdString() + "/trainlab");
    write_text(calibration_file(cache.path().toStdString() + "/trainlab", probe.info()), calibration_to_json(fake));
    Config c = digits_config(out.path().toStdString(), 5);
    c.set("device.kernel_timing", "true");
    TrainerCallbacks cb;
    std::vector<StepMetrics> steps;
    cb.on_step = [&](const StepMetrics& m) { steps.push_back(m); };
    Trainer(c, cb).run();
    qunsetenv("XDG_CACHE_HOME");
    QCOMPARE(steps.size(), size_t(5));
    const double flops = mlp_train_flops_per_sample(85002);
    for (const StepMetrics& m : steps) {
      QVERIFY(m.mfu > 0);
      QVERIFY(qAbs(m.mfu - flops * m.samples_per_s / 1e12) <= 1e-9 * m.mfu);  // against the measured 1 TFLOP/s
      QCOMPARE(m.mfu_datasheet, 0.0);  // the CPU has no datasheet
      QVERIFY(m.roofline.has_value());  // the roofs ride on lines with kernel times
      QCOMPARE(m.roofline->peak_for(DType::F32, MatmulMode::Native), 1.0);
      QVERIFY(!m.kernel_times.empty());
    }
    // The record keeps the kernels' costs and the roofs; the roofline reads them back.
    const std::vector<Json> lines = metrics_lines(out.path().toStdString());
    const StepMetrics back = StepMetrics::from_json(lines.back());
    QVERIFY(back.roofline.has_value());
    QCOMPARE(back.kernel_times.size(), steps.back().kernel_times.size());
    const Roofline r = run_roofline({back}, "fp32");
    QCOMPARE(r.peak_flops_per_s, 1e12);
    QCOMPARE(r.bandwidth_bytes_per_s, 10e9);
    bool linear = false;
    for (const RooflinePoint& p : r.points)
      if (p.name == "linear_forward") {
        linear = true;
        QVERIFY(p.placed() && p.intensity > 1);
      }
    QVERIFY(linear);
  }

  void placesKernelsUnderTheRoofs() {
    CpuBackend be(1);
    const Calibration roofs = made_up(be);  // P = 1 TFLOP/s (fp32), B = 10 GB/s: ridge 100 FLOP/B
    const std::vector<KernelTime> k = {{"gemm", 3.0, 2, 1.5e9, 1e7}, {"add", 1.0, 4, 1e6, 4e6}, {"copy", 0.0, 1, 0, 8}};
    const Roofline r = build_roofline(k, roofs, "fp32");
    QCOMPARE(r.ridge(), 100.0);
    const RooflinePoint& g = r.points[0];
    QCOMPARE(g.intensity, 150.0);
    QVERIFY(!g.memory_bound);
    QCOMPARE(g.flops_per_s, 1.5e9 / 3e-3);
    QCOMPARE(g.of_roof, 0.5);  // 0.5 TFLOP/s of the 1 TFLOP/s roof
    QCOMPARE(g.time_share, 0.75);
    const RooflinePoint& a = r.points[1];
    QCOMPARE(a.intensity, 0.25);
    QVERIFY(a.memory_bound);
    QCOMPARE(a.roof_flops_per_s, 2.5e9);  // B * I
    QCOMPARE(a.of_roof, (1e6 / 1e-3) / 2.5e9);
    QVERIFY(!r.points[2].placed());
    const std::string table = roofline_table(r);
    QVERIFY2(table.find("gemm") != std::string::npos && table.find("memory") != std::string::npos, table.c_str());
    QCOMPARE(error_of([] { run_roofline({}, "fp32"); }).rfind("the run has no kernel times", 0), size_t(0));
  }
};

QTEST_GUILESS_MAIN(TestRoofline)
#include "test_roofline.moc"
