// Hostile data files (issue 16) end in one clear error that names the file, the field and what was
// expected, never a crash, a hang, memory exhaustion or a run on nonsense: IDX headers whose sizes
// overflow or disagree with the bytes present, labels outside the classes, train and test images of
// different sizes, CSV cells that are not numbers (the error never repeats the cell), devices,
// folders, FIFOs and oversized files given as data, and gzip data that inflates past the bound.
#include <sys/stat.h>

#include <QProcess>
#include <QtTest>
#include <filesystem>

#include "data/data_file.h"
#include "data/data_sources.h"
#include "data/dataset.h"
#include "cli_support.h"
#include "test_support.h"

using namespace trainlab;
using namespace trainlab::test;

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

// An IDX image file's bytes: the header as given, then `pixels` bytes of pixel data.
std::string idx_images(uint32_t n, uint32_t rows, uint32_t cols, size_t pixels) {
  std::string s = be32(0x803) + be32(n) + be32(rows) + be32(cols);
  for (size_t i = 0; i < pixels; ++i) s += static_cast<char>((i * 37) % 256);
  return s;
}

std::string idx_labels(uint32_t n, size_t count, int classes = 10) {
  std::string s = be32(0x801) + be32(n);
  for (size_t i = 0; i < count; ++i) s += static_cast<char>(i % static_cast<size_t>(classes));
  return s;
}

// The four files of an IDX folder (plain, not gzip).
void write_idx_folder(const std::string& dir, const std::string& train_img, const std::string& train_lab,
                      const std::string& test_img, const std::string& test_lab) {
  std::filesystem::create_directories(dir);
  write_text(dir + "/train-images-idx3-ubyte", train_img);
  write_text(dir + "/train-labels-idx1-ubyte", train_lab);
  write_text(dir + "/t10k-images-idx3-ubyte", test_img);
  write_text(dir + "/t10k-labels-idx1-ubyte", test_lab);
}

using Result = CliResult;


}  // namespace

class TestDataFiles : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;
  std::string path(const std::string& name) { return m_tmp.path().toStdString() + "/" + name; }
  // The error of reading these IDX images and labels (written to the files `img` and `lab`).
  std::string idx_error(const std::string& images, const std::string& labels) {
    write_text(path("img"), images);
    write_text(path("lab"), labels);
    return error_of([&] { read_idx(path("img"), path("lab"), "idx"); });
  }

 private slots:
  // The reported defect: 4 images of 2^31 x 2^31 pixels make 16 + pixels x n wrap to 16, and the
  // run "completed" on a nonsense shape. Now the header is refused, naming the file and the field.
  void idxHeaderOverflow() {
    const std::string dir = path("overflow");
    const std::string img = idx_images(4, 1u << 31, 1u << 31, 0), lab = idx_labels(4, 4);
    write_idx_folder(dir, img, lab, img, lab);
    std::string e =
        error_of([&] { read_idx(dir + "/train-images-idx3-ubyte", dir + "/train-labels-idx1-ubyte", "idx"); });
    QVERIFY2(has(e, dir + "/train-images-idx3-ubyte: header: images of 2147483648x2147483648"), e.c_str());
    QVERIFY2(has(e, "expected at most 65536 pixels an image"), e.c_str());
    // The CLI: an error, no "completed" run.
    const Result r = run_cli_limited({"train", "--model", "digits-mlp", "--set", "data.name=idx", "--set",
                                  QString::fromStdString("data.path=" + dir), "--steps", "2", "--batch", "2",
                                  "--device", "cpu", "--out", QString::fromStdString(path("overflow-run"))});
    QVERIFY2(r.code == 1, qPrintable(describe(r)));
    QVERIFY2(r.err.contains("train-images-idx3-ubyte: header:"), qPrintable(describe(r)));
    QVERIFY(!std::filesystem::exists(path("overflow-run/summary.json")));
    // A count no file can back: 2^32 - 1 images of 28 x 28 in a file of 16 + 784 bytes.
    e = idx_error(idx_images(0xFFFFFFFFu, 28, 28, 784), idx_labels(0xFFFFFFFFu, 1));
    QVERIFY2(has(e, path("img") + ": truncated: 800 bytes, its header describes 4294967295 images of 28x28"),
             e.c_str());
    QVERIFY2(has(e, "expected 16 + 4294967295 x 784 = 3367254359296 bytes"), e.c_str());
  }

  // Every header field and size against the bytes present; the files agree in count.
  void idxSizesAndCounts_data() {
    QTest::addColumn<QByteArray>("images");
    QTest::addColumn<QByteArray>("labels");
    QTest::addColumn<QString>("file");
    QTest::addColumn<QString>("what");
    const auto b = [](const std::string& s) { return QByteArray(s.data(), static_cast<qsizetype>(s.size())); };
    QTest::newRow("no images") << b(idx_images(0, 2, 2, 0)) << b(idx_labels(0, 0)) << "img"
                               << "header: 0 images (expected at least 1)";
    QTest::newRow("zero rows") << b(idx_images(2, 0, 5, 0)) << b(idx_labels(2, 2)) << "img"
                               << "header: images of 0x5 (expected at least 1 row and 1 column)";
    QTest::newRow("images truncated")
        << b(idx_images(3, 2, 2, 11)) << b(idx_labels(3, 3)) << "img"
        << "truncated: 27 bytes, its header describes 3 images of 2x2 (expected 16 + 3 x 4 = 28 bytes)";
    QTest::newRow("images too long") << b(idx_images(3, 2, 2, 13)) << b(idx_labels(3, 3)) << "img"
                                     << "29 bytes, more than its header describes: 3 images of 2x2";
    QTest::newRow("labels truncated")
        << b(idx_images(3, 2, 2, 12)) << b(idx_labels(3, 2)) << "lab"
        << "truncated: 10 bytes, its header describes 3 labels (expected 8 + 3 x 1 = 11 bytes)";
    QTest::newRow("labels too long") << b(idx_images(3, 2, 2, 12)) << b(idx_labels(3, 4)) << "lab"
                                     << "12 bytes, more than its header describes: 3 labels";
    QTest::newRow("counts differ") << b(idx_images(3, 2, 2, 12)) << b(idx_labels(2, 2)) << "img"
                                   << "lab has 2 labels (expected one label an image)";
    QTest::newRow("label 10") << b(idx_images(3, 2, 2, 12))
                              << b(idx_labels(3, 3, 11).substr(0, 10) + std::string(1, 10)) << "lab"
                              << "item 2: label outside [0, 9] (expected one of the 10 classes";
    QTest::newRow("short header") << b(be32(0x803) + be32(1)) << b(idx_labels(1, 1)) << "img"
                                  << "not an IDX image file (expected magic number 0x00000803 and a 16-byte header)";
    QTest::newRow("labels magic") << b(idx_images(1, 1, 1, 1)) << b(be32(0x803) + be32(1) + "x") << "lab"
                                  << "not an IDX label file (expected magic number 0x00000801";
  }
  void idxSizesAndCounts() {
    QFETCH(QByteArray, images);
    QFETCH(QByteArray, labels);
    QFETCH(QString, file);
    QFETCH(QString, what);
    const std::string e = idx_error(images.toStdString(), labels.toStdString());
    QVERIFY2(has(e, path(file.toStdString()) + ": " + what.toStdString()) ||
                 (has(e, path(file.toStdString()) + " has") && has(e, what.toStdString())),
             e.c_str());
    // A well-formed pair of the same shape is read, every pixel scaled by 1/255.
    QCOMPARE(idx_error(idx_images(3, 2, 2, 12), idx_labels(3, 3)), std::string());
    const ClassificationData d = read_idx(path("img"), path("lab"), "idx");
    QCOMPARE(d.size(), int64_t(3));
    QCOMPARE(d.features, int64_t(4));
    QCOMPARE(d.x[5], static_cast<float>(5 * 37) / 255.0f);
    QCOMPARE(d.y, (std::vector<int32_t>{0, 1, 2}));
  }

  // Train and test images of different sizes: refused when the data is loaded (it used to fail
  // at the first evaluation with a backend message naming no file).
  void idxTrainTestImageSizesDiffer() {
    const std::string dir = path("mixed");
    write_idx_folder(dir, idx_images(64, 4, 4, 64 * 16), idx_labels(64, 64), idx_images(16, 2, 2, 16 * 4),
                     idx_labels(16, 16));
    DataOptions o;
    o.name = "idx";
    o.path = dir;
    const std::string e = error_of([&] { load_classification_data(o); });
    QVERIFY2(has(e, dir + "/t10k-images-idx3-ubyte: images of 4 pixels, but " + dir +
                        "/train-images-idx3-ubyte has images of 16 (expected the same image size in both)"),
             e.c_str());
    write_idx_folder(dir, idx_images(64, 4, 4, 64 * 16), idx_labels(64, 64), idx_images(16, 4, 4, 16 * 16),
                     idx_labels(16, 16));
    QCOMPARE(load_classification_data(o).test.size(), int64_t(16));
  }

  // A CSV cell that is not a number is named by line and column; its text is never repeated (it
  // could be anything: terminal escapes, a secret).
  void csvCellsNeverEchoed() {
    std::string bad = digits_line(1, 1);
    bad.replace(bad.find(',') + 1, 1, "\x1b[31mSECRET");  // column 2
    const std::string file = path("cells.csv");
    write_text(file, digits_csv(3) + bad + "\n");
    std::string e = error_of([&] { read_digits_csv(file); });
    QVERIFY2(has(e, file + ":4, column 2: not an integer (expected a pixel value in [0, 16])"), e.c_str());
    QVERIFY2(!has(e, "SECRET") && !has(e, "\x1b"), e.c_str());
    // Out-of-range values are not repeated either.
    write_text(file, digits_line(1, 1).substr(0, digits_line(1, 1).rfind(',')) + ",31337\n");
    e = error_of([&] { read_digits_csv(file); });
    QVERIFY2(has(e, file + ":1, column 65: label outside [0, 9]"), e.c_str());
    QVERIFY2(!has(e, "31337"), e.c_str());
  }

  // Only regular files are read: a folder, a FIFO (which used to block the reader for ever) and a
  // device are refused before a byte is read, for every kind of data file.
  void onlyRegularFiles() {
    const std::string dir = path("a-folder");
    std::filesystem::create_directories(dir);
    const std::string fifo = path("a-fifo");
    QCOMPARE(::mkfifo(fifo.c_str(), 0600), 0);
    for (const std::string& p : {dir, fifo, std::string("/dev/null")}) {
      const std::string why = p == dir ? ": is a folder (expected a data file)" : ": not a regular file";
      std::string e = error_of([&] { read_digits_csv(p); });
      QVERIFY2(has(e, p + why), e.c_str());
      e = error_of([&] { load_text_corpus(p, 0.1, 1); });
      QVERIFY2(has(e, p + why), e.c_str());
      e = error_of([&] { read_idx(p, p, "idx"); });
      QVERIFY2(has(e, p + why), e.c_str());
    }
    // An IDX folder whose image "file" is a folder.
    const std::string idx = path("idx-with-folder");
    write_idx_folder(idx, idx_images(4, 2, 2, 16), idx_labels(4, 4), idx_images(4, 2, 2, 16), idx_labels(4, 4));
    std::filesystem::create_directories(idx + "/t10k-images-idx3-ubyte.gz");
    DataOptions o;
    o.name = "idx";
    o.path = idx;
    const std::string e = error_of([&] { load_classification_data(o); });
    QVERIFY2(has(e, idx + "/t10k-images-idx3-ubyte.gz: is a folder"), e.c_str());
  }

  // Files without end or past the bound: /dev/zero used to be read until memory ran out (the CLI
  // said only "std::bad_alloc"); a 2 GiB (sparse) file is refused from its size.
  void unboundedFilesRefused() {
    const std::string big = path("big.csv");
    write_text(big, "");
    std::filesystem::resize_file(big, (int64_t(2) << 30));  // sparse: no disk used
    for (const std::string& p : {std::string("/dev/zero"), big}) {
      for (const char* model : {"digits-mlp", "char-gpt"}) {
        QStringList args{"train",   "--model", model,
                         "--steps", "2",       "--device",
                         "cpu",     "--out",   QString::fromStdString(path("never"))};
        if (std::string(model) == "char-gpt")
          args << "--set"
               << "data.name=text";
        args << "--set" << QString::fromStdString("data.path=" + p);
        const Result r = run_cli_limited(args);
        QVERIFY2(r.code == 1, qPrintable(describe(r)));
        const QString want =
            QString::fromStdString(p) +
            (p == big ? ": holds more than 1073741824 bytes (expected a data file of at most 1073741824 bytes)"
                      : ": not a regular file (a device, pipe or socket; expected a data file)");
        QVERIFY2(r.err.contains(want), qPrintable(describe(r)));
      }
    }
  }

  // gzip data is inflated only up to the bound (a gzip bomb), and corrupt or cut streams say so.
  void gzipBounded() {
    const std::string file = path("bomb.gz");
    write_gzip(file, std::string(1 << 20, '0'));
    const std::string bytes = read_regular_file(file);
    QVERIFY(bytes.size() < 4096);
    std::string e = error_of([&] { maybe_gunzip(bytes, file, 1 << 16); });
    QVERIFY2(has(e, file + ": decompresses to more than 65536 bytes"), e.c_str());
    QCOMPARE(maybe_gunzip(bytes, file, 1 << 20).size(), size_t(1) << 20);
    e = error_of([&] { maybe_gunzip(bytes.substr(0, bytes.size() / 2), file); });
    QVERIFY2(has(e, file + ": truncated gzip file"), e.c_str());
    // Two members (concatenated .gz files) are one stream, as for gzip.
    write_gzip(file, "ab");
    const std::string one = read_regular_file(file);
    QCOMPARE(maybe_gunzip(one + one, file), std::string("abab"));
    QCOMPARE(maybe_gunzip("plain", file), std::string("plain"));
    e = error_of([&] { maybe_gunzip("plain text", file, 4); });
    QVERIFY2(has(e, file + ": holds more than 4 bytes"), e.c_str());
  }
};

QTEST_APPLESS_MAIN(TestDataFiles)
#include "test_data_files.moc"
