// The typed option structs (config/train_options.h) and the precision table (train/precision.h):
// a default-constructed struct is what the builder makes of a default Config (the schema's
// defaults), a --set reaches its field, and a precision name maps to its format, loss scaling and
// matrix-product mode; an unknown name is an error naming the valid ones.
#include <QtTest>

#include "backend/cpu_backend.h"
#include "config/train_options.h"
#include "nn/model.h"
#include "train/precision.h"
#include "util/error.h"

using namespace trainlab;

class TestTrainOptions : public QObject {
  Q_OBJECT
 private slots:
  void defaultsAreTheSchemas() {
    const Config c;
    QVERIFY(data_options(c) == DataOptions{});
    QVERIFY(model_options(c) == ModelOptions{});
    QVERIFY(precision_options(c) == PrecisionOptions{});
    QVERIFY(checkpoint_options(c) == CheckpointOptions{});
    QVERIFY(train_options(c) == TrainOptions{});
  }

  void settingsReachTheirFields() {
    Config c;
    c.set("data.name", "text");
    c.set("data.path", "/tmp/x.txt");
    c.set("train.seed", "42");
    c.set("model.hidden", "[32,16]");
    c.set("checkpoint.policy", "every-k");
    c.set("checkpoint.k", "3");
    c.set("train.accumulate", "4");
    const DataOptions d = data_options(c);
    QCOMPARE(d.name, std::string("text"));
    QCOMPARE(d.path, std::string("/tmp/x.txt"));
    QCOMPARE(d.seed, uint64_t{42});
    QCOMPARE(train_options(c).seed, uint64_t{42});
    QCOMPARE(model_options(c).hidden, (std::vector<int64_t>{32, 16}));
    QCOMPARE(checkpoint_options(c).policy, std::string("every-k"));
    QCOMPARE(checkpoint_options(c).k, int64_t{3});
    QCOMPARE(train_options(c).accumulate, 4);
  }

  void precisionTable() {
    struct Row {
      const char* name;
      DType compute;
      bool scaling;
      MatmulMode matmul;
      int64_t eb;
    };
    const Row rows[] = {{"fp32", DType::F32, false, MatmulMode::Native, 4},
                        {"tf32", DType::F32, false, MatmulMode::Tf32, 4},
                        {"bf16", DType::BF16, false, MatmulMode::Native, 2},
                        {"fp16", DType::F16, true, MatmulMode::Native, 2},
                        {"fp8", DType::F8E4M3, false, MatmulMode::Fp8, 2}};
    QCOMPARE(precision_policies().size(), std::size(rows));
    for (const Row& r : rows) {
      const PrecisionPolicy& p = precision_policy(r.name);
      QCOMPARE(p.name, std::string(r.name));
      QVERIFY(p.compute == r.compute);
      QCOMPARE(p.loss_scaling, r.scaling);
      QVERIFY(p.matmul == r.matmul);
      QCOMPARE(p.element_bytes(), r.eb);
    }
    try {
      precision_policy("fp4");
      QFAIL("fp4 accepted");
    } catch (const Error& e) {
      const std::string msg = e.what();
      QVERIFY2(msg.find("'fp4'") != std::string::npos && msg.find("fp32, tf32, bf16, fp16, fp8") != std::string::npos,
               e.what());
    }
  }

  // apply_precision sets the model's format and its matrix-product mode, and a second
  // policy replaces the first (a mid-run change).
  void applyPrecision() {
    CpuBackend be(1);
    auto m = build_model(be, {{"kind", "mlp"}, {"sizes", {8, 4}}, {"activation", "relu"}}, 1);
    apply_precision(be, *m, precision_policy("tf32"));
    QVERIFY(m->compute_dtype() == DType::F32);
    QVERIFY(m->matmul_mode() == MatmulMode::Tf32);
    apply_precision(be, *m, precision_policy("fp8"));
    QVERIFY(m->compute_dtype() == DType::F8E4M3);
    QVERIFY(m->parameters().front()->value.dtype() == DType::BF16);  // fp8 runs store bf16
    QVERIFY(m->matmul_mode() == MatmulMode::Fp8);
    apply_precision(be, *m, precision_policy("bf16"));
    QVERIFY(m->compute_dtype() == DType::BF16);
    QVERIFY(m->matmul_mode() == MatmulMode::Native);
    require_precision(be, precision_policy("fp16"));  // the CPU has every format
  }
};

QTEST_APPLESS_MAIN(TestTrainOptions)
#include "test_train_options.moc"
