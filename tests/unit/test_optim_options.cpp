// The typed options of optim/ (config/optim_options.h) and the factories that build from them:
// the struct defaults are the schema's, every key is read, the factories pass the values through
// (rounded to fp32 where the backend takes fp32) and name the known choices for an unknown one.
#include <QtTest>

#include "config/optim_options.h"
#include "optim/loss_scaler.h"
#include "optim/lr_schedule.h"
#include "optim/lean_optimizers.h"
#include "optim/optimizer.h"
#include "test_support.h"

using namespace trainlab;
using namespace trainlab::test;

class TestOptimOptions : public QObject {
  Q_OBJECT
 private slots:
  void defaultsAreTheSchemas() {
    const OptimOptions o = optim_options(Config());
    const OptimOptions d;
    QCOMPARE(o.optimizer.name, d.optimizer.name);
    QCOMPARE(o.optimizer.lr, d.optimizer.lr);
    QCOMPARE(o.optimizer.beta1, d.optimizer.beta1);
    QCOMPARE(o.optimizer.beta2, d.optimizer.beta2);
    QCOMPARE(o.optimizer.eps, d.optimizer.eps);
    QCOMPARE(o.optimizer.weight_decay, d.optimizer.weight_decay);
    QCOMPARE(o.optimizer.momentum, d.optimizer.momentum);
    QCOMPARE(o.optimizer.nesterov, d.optimizer.nesterov);
    QCOMPARE(o.optimizer.block_size, d.optimizer.block_size);
    QCOMPARE(o.optimizer.stable_embedding, d.optimizer.stable_embedding);
    QCOMPARE(o.optimizer.lion_state, d.optimizer.lion_state);
    QCOMPARE(o.optimizer.adafactor_beta1, d.optimizer.adafactor_beta1);
    QCOMPARE(o.optimizer.relative_step, d.optimizer.relative_step);
    QCOMPARE(o.schedule.name, d.schedule.name);
    QCOMPARE(o.schedule.warmup_steps, d.schedule.warmup_steps);
    QCOMPARE(o.schedule.min_lr, d.schedule.min_lr);
    QCOMPARE(o.loss_scale.init, d.loss_scale.init);
    QCOMPARE(o.loss_scale.growth_interval, d.loss_scale.growth_interval);
    QCOMPARE(o.loss_scale.enabled, d.loss_scale.enabled);
  }

  void readsEveryKey() {
    Config c;
    c.set("optim.name", "sgd");
    c.set("optim.lr", "0.25");
    c.set("optim.beta1", "0.8");
    c.set("optim.beta2", "0.95");
    c.set("optim.eps", "1e-6");
    c.set("optim.weight_decay", "0.1");
    c.set("optim.momentum", "0.5");
    c.set("optim.nesterov", "true");
    c.set("schedule.name", "warmup-cosine");
    c.set("schedule.warmup_steps", "7");
    c.set("schedule.min_lr", "0.001");
    c.set("precision.loss_scale.init", "1024");
    c.set("precision.loss_scale.growth_interval", "9");
    c.set("precision.loss_scale.enabled", "false");
    const OptimOptions o = optim_options(c);
    QCOMPARE(o.optimizer.name, std::string("sgd"));
    QCOMPARE(o.optimizer.lr, 0.25);
    QCOMPARE(o.optimizer.beta1, 0.8);
    QCOMPARE(o.optimizer.beta2, 0.95);
    QCOMPARE(o.optimizer.eps, 1e-6);
    QCOMPARE(o.optimizer.weight_decay, 0.1);
    QCOMPARE(o.optimizer.momentum, 0.5);
    QVERIFY(o.optimizer.nesterov);
    QCOMPARE(o.schedule.name, std::string("warmup-cosine"));
    QCOMPARE(o.schedule.warmup_steps, 7L);
    QCOMPARE(o.schedule.min_lr, 0.001);
    QCOMPARE(o.loss_scale.init, 1024.0);
    QCOMPARE(o.loss_scale.growth_interval, 9L);
    QVERIFY(!o.loss_scale.enabled);
  }

  void optimizerFactory() {
    OptimizerOptions o;
    o.beta1 = 0.8;
    o.beta2 = 0.95;
    o.eps = 1e-6;
    o.weight_decay = 0.1;
    auto adamw = make_optimizer(o);
    QCOMPARE(adamw->name(), std::string("adamw"));
    const AdamWHyper& h = dynamic_cast<AdamW&>(*adamw).hyper();
    QCOMPARE(h.beta1, 0.8f);
    QCOMPARE(h.beta2, 0.95f);
    QCOMPARE(h.eps, 1e-6f);
    QCOMPARE(h.weight_decay, 0.1f);
    o.name = "sgd";
    o.momentum = 0.0;
    o.nesterov = true;
    auto sgd = make_optimizer(o);
    QCOMPARE(sgd->name(), std::string("sgd"));
    QVERIFY(sgd->state_buffers().empty());  // no momentum: no buffer
    const SgdHyper& s = dynamic_cast<Sgd&>(*sgd).hyper();
    QCOMPARE(s.weight_decay, 0.1f);
    QVERIFY(s.nesterov);
    o.name = "lion";
    o.lion_state = "bf16";
    auto lion = make_optimizer(o);
    QCOMPARE(lion->name(), std::string("lion"));
    QCOMPARE(lion->state_dtype(), DType::BF16);
    QCOMPARE(dynamic_cast<Lion&>(*lion).hyper().beta2, 0.95f);
    o.name = "adamw8bit";
    o.block_size = 256;
    auto a8 = make_optimizer(o);
    QCOMPARE(dynamic_cast<AdamW8bit&>(*a8).block(), 256);
    o.block_size = 512;
    std::string e = error_of([&] { make_optimizer(o); });
    QVERIFY2(e.find("optim.block_size 512") != std::string::npos && e.find("256 or 2048") != std::string::npos, e.c_str());
    o.name = "adafactor";
    o.adafactor_beta1 = 0.5;
    o.relative_step = true;
    auto af = make_optimizer(o);
    QCOMPARE(dynamic_cast<Adafactor&>(*af).hyper().beta1, 0.5f);
    QVERIFY(dynamic_cast<Adafactor&>(*af).hyper().relative_step);
    o.name = "adam";
    e = error_of([&] { make_optimizer(o); });
    QVERIFY2(e.find("'adam'") != std::string::npos && e.find("adafactor or lion") != std::string::npos, e.c_str());
  }

  void scheduleAndScalerFactories() {
    ScheduleOptions o;
    o.name = "warmup-cosine";
    o.warmup_steps = 4;
    o.min_lr = 0.01;
    const LrSchedule s = make_lr_schedule(o, 0.1, 20);
    QCOMPARE(s.at(0), 0.1 * 1 / 4);
    QCOMPARE(s.at(3), 0.1);
    QCOMPARE(s.at(19), 0.01 + 0.5 * (0.1 - 0.01) * (1.0 + std::cos(M_PI * 15.0 / 16.0)));
    o.name = "step";
    QVERIFY(error_of([&] { make_lr_schedule(o, 0.1, 20); }).find("constant or warmup-cosine") != std::string::npos);

    LossScaleOptions l;
    l.init = 512.0;
    l.growth_interval = 3;
    QVERIFY(!LossScaler(l, false).enabled());  // only fp16 runs scale
    LossScaler fp16(l, true);
    QVERIFY(fp16.enabled());
    QCOMPARE(fp16.scale(), 512.0);
    for (int i = 0; i < 3; ++i) fp16.update(true);
    QCOMPARE(fp16.scale(), 1024.0);
    l.enabled = false;
    QVERIFY(!LossScaler(l, true).enabled());
  }
};

QTEST_APPLESS_MAIN(TestOptimOptions)
#include "test_optim_options.moc"
