// Data files that are not files (issue 16) end in one clear error that names the file and what was
// expected, never a hang or memory exhaustion: devices, folders, FIFOs and oversized files given
// as data, and gzip data that inflates past the bound.
#include <sys/stat.h>

#include <QProcess>
#include <QtTest>
#include <filesystem>

#include "data/data_file.h"
#include "data/data_sources.h"
#include "data/dataset.h"
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

struct Result {
  int code = -1;
  QString out, err;
};

// trainlab-cli with `args`, its address space limited to 2 GB: a reader without bounds dies with
// bad_alloc (or is killed) instead of taking the machine's memory.
Result cli_limited(const QStringList& args, int timeout_ms = 60000) {
  QProcess p;
  p.start("sh", QStringList{"-c", "ulimit -v 2000000; exec \"$0\" \"$@\"", QStringLiteral(TRAINLAB_CLI_PATH)} + args);
  Result r;
  if (!p.waitForStarted(10000)) return r;
  p.closeWriteChannel();
  if (!p.waitForFinished(timeout_ms)) {
    p.kill();
    p.waitForFinished();
    r.err = "timed out";
    return r;
  }
  r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2;
  r.out = QString::fromUtf8(p.readAllStandardOutput());
  r.err = QString::fromUtf8(p.readAllStandardError());
  return r;
}

QString describe(const Result& r) { return QString("exit %1\nstdout: %2\nstderr: %3").arg(r.code).arg(r.out, r.err); }

}  // namespace

class TestDataFiles : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;
  std::string path(const std::string& name) { return m_tmp.path().toStdString() + "/" + name; }

 private slots:
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
        const Result r = cli_limited(args);
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
