// MNIST-format (IDX) data in the window: Fashion-MNIST is offered only when installed; a folder of
// IDX files chosen by the user switches the data set to idx and trains; a folder with only some of
// the four files gives a message naming the missing ones, before any run starts.
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QLineEdit>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QtTest>
#include <QtEndian>

#include "data/dataset.h"
#include "gui_support.h"
#include "main_window.h"

using namespace trainlab;
using namespace trainlab::app;

namespace {
void write_be32(QFile& f, quint32 v) {
  const quint32 be = qToBigEndian(v);
  f.write(reinterpret_cast<const char*>(&be), 4);
}
// n images of 4x4 pixels whose brightest quadrant tells the label (0..3): easy to learn.
void write_idx(const QString& dir, const QString& prefix, int n) {
  QFile img(dir + "/" + prefix + "-images-idx3-ubyte"), lab(dir + "/" + prefix + "-labels-idx1-ubyte");
  QVERIFY(img.open(QIODevice::WriteOnly) && lab.open(QIODevice::WriteOnly));
  write_be32(img, 0x803);
  write_be32(img, static_cast<quint32>(n));
  write_be32(img, 4);
  write_be32(img, 4);
  write_be32(lab, 0x801);
  write_be32(lab, static_cast<quint32>(n));
  for (int i = 0; i < n; ++i) {
    const int label = i % 4;
    QByteArray px(16, char(20));
    for (int r = 0; r < 2; ++r)
      for (int c = 0; c < 2; ++c) px[((label / 2) * 2 + r) * 4 + (label % 2) * 2 + c] = char(230);
    img.write(px);
    lab.write(QByteArray(1, char(label)));
  }
}
}  // namespace

class TestIdxData : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir m_tmp;

 private slots:
  void initTestCase() {
    gui_test::isolate_settings("test_idx_data");
    QVERIFY(m_tmp.isValid());
  }

  void fashionMnistOfferedOnlyWhenInstalled() {
    MainWindow w(m_tmp.filePath("runs"));
    auto* name = qobject_cast<QComboBox*>(w.form()->editor("data.name"));
    QVERIFY(name);
    const int i = name->findText("fashion-mnist");
    QVERIFY(i >= 0);
    auto* model = qobject_cast<QStandardItemModel*>(name->model());
    QVERIFY(model);
    const bool installed = !find_fashion_mnist().empty();
    QCOMPARE(model->item(i)->isEnabled(), installed);
    QCOMPARE(w.form()->fashion_mnist_dir().isEmpty(), !installed);
    if (!installed) {
      QVERIFY(model->item(i)->toolTip().contains("dataset-fashion-mnist"));
      // Chosen anyway (a preset): the start says what to do, and no run folder is made.
      name->setCurrentIndex(i);
      QVERIFY(!w.start_run());
      QCOMPARE(w.message_kind(), QString("error"));
      QVERIFY2(w.message_text().contains("not installed"), qPrintable(w.message_text()));
      QVERIFY(!QDir(m_tmp.filePath("runs")).exists() || QDir(m_tmp.filePath("runs")).isEmpty());
    }
  }

  void partialFolderNamesMissingFiles() {
    const QString dir = m_tmp.filePath("partial");
    QDir().mkpath(dir);
    write_idx(dir, "train", 64);  // no t10k files
    const IdxFolder f = scan_idx_folder(dir.toStdString());
    QCOMPARE(f.found.size(), size_t{2});
    QCOMPARE(f.missing.size(), size_t{2});
    MainWindow w(m_tmp.filePath("runs"));
    qobject_cast<QComboBox*>(w.form()->editor("data.name"))->setCurrentText("idx");
    qobject_cast<QLineEdit*>(w.form()->editor("data.path"))->setText(dir);
    QVERIFY(!w.start_run());
    QCOMPARE(w.message_kind(), QString("error"));
    const QString msg = w.message_text();
    QVERIFY2(msg.contains("t10k-images-idx3-ubyte") && msg.contains("t10k-labels-idx1-ubyte"), qPrintable(msg));
    QVERIFY(msg.contains("only part"));
    QVERIFY(!w.running());
  }

  void chosenFolderTrains() {
    const QString dir = m_tmp.filePath("quadrants");
    QDir().mkpath(dir);
    write_idx(dir, "train", 256);
    write_idx(dir, "t10k", 64);
    QVERIFY(scan_idx_folder(dir.toStdString()).complete());
    MainWindow w(m_tmp.filePath("runs"));
    w.show();
    w.form()->set_value("model.name", Json("char-gpt"));
    w.form()->use_idx_folder(dir);
    QCOMPARE(w.form()->value("data.name").get<std::string>(), std::string("idx"));
    QCOMPARE(w.form()->value("data.path").get<std::string>(), dir.toStdString());
    QVERIFY(w.form()->value("model.name").get<std::string>() != "char-gpt");
    qobject_cast<QSpinBox*>(w.form()->editor("train.steps"))->setValue(60);
    qobject_cast<QSpinBox*>(w.form()->editor("train.batch"))->setValue(16);
    QVERIFY(w.start_run());
    QTRY_VERIFY_WITH_TIMEOUT(!w.running(), 60000);
    QCOMPARE(w.live_run()->status(), QString("completed"));
    QVERIFY(w.live_run()->summary.value("test_accuracy", 0.0) > 0.9);
  }
};

QTEST_MAIN(TestIdxData)
#include "test_idx_data.moc"
