// The Layer sensitivity view: measuring a digits run fills the layer x bits and layer x sparsity
// heat maps with the numbers `trainlab-cli sensitivity` computes (the library's table), saves
// sensitivity.json in the run folder, and the report shows it; Allocate writes the weights file
// and reports the allocation beside the uniform one; weights that are not there give a message.
#include <QComboBox>
#include <QFile>
#include <QLabel>
#include <QtTest>
#include <qcustomplot.h>

#include "backend/backend.h"
#include "compress/held_out.h"
#include "gui_support.h"
#include "io/weights.h"
#include "main_window.h"
#include "report.h"
#include "sensitivity_view.h"

using namespace trainlab::app;

class TestSensitivityView : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir m_tmp;

 private slots:
  void initTestCase() { gui_test::isolate_settings("test_sensitivity_view"); }

  void measuresAllocatesAndReports() {
    trainlab::Config c;
    c.set("train.steps", "150");
    c.set("device.name", "cpu");
    const QString dir = m_tmp.filePath("runs/digits");
    c.set_json("run.out", dir.toStdString());
    trainlab::Trainer(c).run();

    MainWindow w(m_tmp.filePath("runs"));
    w.reopen(dir);
    SensitivityView* v = w.show_sensitivity_view();
    QSignalSpy spy(v, &SensitivityView::finished);
    QVERIFY(v->measure());
    QTRY_VERIFY_WITH_TIMEOUT(spy.count() == 1, 120000);
    QVERIFY2(spy.at(0).at(0).toBool(), qPrintable(spy.at(0).at(1).toString()));
    // 3 layers x 7 bit widths, and the library's numbers in the cells.
    QCOMPARE(v->bits_map()->data()->keySize(), 7);
    QCOMPARE(v->bits_map()->data()->valueSize(), 3);
    QCOMPARE(v->sparsity_map()->data()->keySize(), 6);
    const std::string path = (dir + "/model.safetensors").toStdString();
    const auto f = trainlab::read_safetensors(path);
    auto be = trainlab::create_backend("cpu");
    const auto h = trainlab::held_out_data(*be, trainlab::weights_config(f, path), "validation", path);
    const auto t = trainlab::measure_sensitivity(f, path, h.eval, trainlab::SensitivityOptions{});
    for (int l = 0; l < 3; ++l)
      for (int b = 0; b < 7; ++b) QCOMPARE(v->bits_map()->data()->cell(b, l), t.layers[l].bits[b].accuracy);
    // Each cell's accuracy is written on it (cell (b, l) at plot coordinates (b, l)).
    QCustomPlot* plot = v->bits_map()->parentPlot();
    QCOMPARE(plot->itemCount(), 3 * 7);
    for (int i = 0; i < plot->itemCount(); ++i) {
      auto* text = qobject_cast<QCPItemText*>(plot->item(i));
      QVERIFY(text);
      const QPointF at = text->position->coords();
      const auto& point = t.layers[static_cast<size_t>(at.y())].bits[static_cast<size_t>(at.x())];
      QCOMPARE(text->text(), QString::number(point.accuracy, 'f', 3));
    }
    QCOMPARE(v->sparsity_map()->parentPlot()->itemCount(), 3 * 6);
    QVERIFY(QFile::exists(dir + "/sensitivity.json"));
    const QString html = Report::from_dirs({dir}).summary_html(false);
    QVERIFY(html.contains("Sensitivity:") && html.contains("2-bit") && html.contains("net.0.weight"));

    QVERIFY(v->allocate("bits", 3.0));
    QTRY_VERIFY_WITH_TIMEOUT(spy.count() == 2, 120000);
    QVERIFY2(spy.at(1).at(0).toBool(), qPrintable(spy.at(1).at(1).toString()));
    const auto& a = v->allocation();
    QVERIFY(a.at("average_bits").get<double>() <= 3.0 + 1e-9);
    QVERIFY(QFile::exists(QString::fromStdString(a.at("out").get<std::string>())));
    QVERIFY(v->findChild<QLabel*>("status")->text().contains("allocated test accuracy"));
    QCOMPARE(a.at("method").get<std::string>(), std::string("rtn"));

    // Quantized by GPTQ: the allocation's files come from the run's quant.calibration batches.
    v->findChild<QComboBox*>("method")->setCurrentText("gptq");
    QVERIFY(v->allocate("bits", 3.0));
    QTRY_VERIFY_WITH_TIMEOUT(spy.count() == 3, 120000);
    QVERIFY2(spy.at(2).at(0).toBool(), qPrintable(spy.at(2).at(1).toString()));
    QCOMPARE(v->allocation().at("method").get<std::string>(), std::string("gptq"));
    QVERIFY2(v->findChild<QLabel*>("status")->text().contains("gptq, calibrated on 16 batches"),
             qPrintable(v->findChild<QLabel*>("status")->text()));

    v->set_weights(m_tmp.filePath("missing"));
    QVERIFY(v->measure());
    QTRY_VERIFY_WITH_TIMEOUT(spy.count() == 4, 30000);
    QVERIFY(!spy.at(3).at(0).toBool());
    QVERIFY(v->findChild<QLabel*>("status")->text().startsWith("Cannot measure"));
  }
};

QTEST_MAIN(TestSensitivityView)
#include "test_sensitivity_view.moc"
