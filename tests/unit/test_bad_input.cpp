// Every bad input of issue 2 gives one clear error naming the file / line / key and what was
// expected, and never a crash: corrupt data files (made here with zlib), config mistakes, an
// unwritable run folder, and a run that diverges (status "diverged", record kept).
#include <QtTest>
#include <algorithm>
#include <filesystem>

#include "data/dataset.h"
#include "test_support.h"

using namespace trainlab;
using namespace trainlab::test;

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The error of training on a digits file `path` (a short run into `tmp`).
std::string train_error(const std::string& path, const QTemporaryDir& tmp) {
  Config c = digits_config(tmp.path().toStdString() + "/run", 2);
  c.set("data.path", path);
  return error_of([&] {
    Trainer t(c);
    t.run();
  });
}

}  // namespace

class TestBadInput : public QObject {
  Q_OBJECT
 private slots:
  void goodSmallFileTrains() {
    QTemporaryDir tmp;
    const std::string path = tmp.path().toStdString() + "/ok.csv.gz";
    write_gzip(path, digits_csv(100));
    const ClassificationData d = read_digits_csv(path);
    QCOMPARE(d.size(), int64_t(100));
    QCOMPARE(d.features, int64_t(64));
    QCOMPARE(train_error(path, tmp), std::string());
    // Plain (not gzip) files are read too.
    write_text(tmp.path().toStdString() + "/ok.csv", digits_csv(10));
    QCOMPARE(read_digits_csv(tmp.path().toStdString() + "/ok.csv").size(), int64_t(10));
  }

  void missingDataFile() {
    QTemporaryDir tmp;
    const std::string path = tmp.path().toStdString() + "/nothere.csv.gz";
    const std::string e = train_error(path, tmp);
    QVERIFY2(has(e, path) && has(e, "cannot open"), e.c_str());
    QVERIFY(!std::filesystem::exists(tmp.path().toStdString() + "/run/metrics.jsonl"));  // fails before any step
  }

  void corruptDataFiles_data() {
    QTest::addColumn<QString>("content");
    QTest::addColumn<QString>("where");
    QTest::addColumn<QString>("what");
    const std::string good = digits_line(1, 1) + "\n" + digits_line(2, 2) + "\n";
    std::string short_line = digits_line(3, 3);
    short_line = short_line.substr(0, short_line.rfind(','));  // 64 values
    QTest::newRow("too few columns") << q(good + short_line + "\n") << ":3" << "expected 65 comma-separated values";
    QTest::newRow("too many columns") << q(good + good + digits_line(4, 4) + ",5\n") << ":5" << "found more";
    std::string nan_line = digits_line(5, 5);
    nan_line.replace(0, nan_line.find(','), "abc");
    QTest::newRow("not a number") << q(good + nan_line + "\n") << ":3, column 1"
                                  << "not an integer (expected a pixel value in [0, 16])";
    QTest::newRow("empty field") << q("1,,2\n") << ":1, column 2" << "not an integer";
    QTest::newRow("label 10") << q(good + good + digits_line(6, 0).substr(0, digits_line(6, 0).rfind(',')) + ",10\n")
                              << ":5, column 65" << "label outside [0, 9]";
    QTest::newRow("label -1") << q(digits_line(6, 0).substr(0, digits_line(6, 0).rfind(',')) + ",-1\n") << ":1, column 65"
                              << "label outside [0, 9]";
    QTest::newRow("pixel 17") << q("17," + digits_line(7, 7).substr(digits_line(7, 7).find(',') + 1) + "\n")
                              << ":1, column 1" << "pixel value outside [0, 16]";
    QTest::newRow("empty file") << QString() << "" << "no samples";
  }
  void corruptDataFiles() {
    QFETCH(QString, content);
    QFETCH(QString, where);
    QFETCH(QString, what);
    QTemporaryDir tmp;
    const std::string path = tmp.path().toStdString() + "/bad.csv.gz";
    write_gzip(path, content.toStdString());
    const std::string e = train_error(path, tmp);
    QVERIFY2(has(e, path + where.toStdString()), e.c_str());
    QVERIFY2(has(e, what.toStdString()), e.c_str());
    QVERIFY2(e.find('\n') == std::string::npos, "one line");
  }

  // A gzip file cut short: zlib reports the stream's end missing.
  void truncatedGzip() {
    QTemporaryDir tmp;
    const std::string full = tmp.path().toStdString() + "/full.csv.gz";
    write_gzip(full, digits_csv(300));
    const std::string bytes = read_text(full);
    QVERIFY(bytes.size() > 100);
    for (size_t keep : {bytes.size() / 2, bytes.size() - 4, size_t(20)}) {
      const std::string path = tmp.path().toStdString() + "/cut" + std::to_string(keep) + ".csv.gz";
      write_text(path, bytes.substr(0, keep));
      const std::string e = error_of([&] { read_digits_csv(path); });
      QVERIFY2(has(e, path), e.c_str());
      QVERIFY2(has(e, "truncated") || has(e, "corrupt"), e.c_str());
    }
    // Garbage after a valid gzip header.
    const std::string path = tmp.path().toStdString() + "/garbled.csv.gz";
    std::string g = bytes;
    for (size_t i = 20; i < g.size() - 8; i += 3) g[i] = static_cast<char>(g[i] ^ 0x5A);
    write_text(path, g);
    const std::string e = error_of([&] { read_digits_csv(path); });
    QVERIFY2(has(e, path), e.c_str());
  }

  // IDX files: wrong magic and truncation name the file.
  void badIdxFiles() {
    QTemporaryDir tmp;
    const std::string img = tmp.path().toStdString() + "/img.gz", lab = tmp.path().toStdString() + "/lab.gz";
    write_gzip(img, std::string("\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x02\x00\x00\x00\x02", 16) + "abcdefgh");
    write_gzip(lab, std::string("\x00\x00\x08\x01\x00\x00\x00\x02", 8) + std::string("\x01\x02", 2));
    QCOMPARE(read_idx(img, lab, "idx").size(), int64_t(2));
    write_gzip(lab, std::string("\x00\x00\x08\x02\x00\x00\x00\x02", 8) + "\x01\x02");
    std::string e = error_of([&] { read_idx(img, lab, "idx"); });
    QVERIFY2(has(e, lab) && has(e, "magic"), e.c_str());
    write_gzip(lab, std::string("\x00\x00\x08\x01\x00\x00\x00\x02", 8) + std::string("\x01\x0c", 2));
    e = error_of([&] { read_idx(img, lab, "idx"); });
    QVERIFY2(has(e, lab + ": item 1: label outside [0, 9]"), e.c_str());
    write_gzip(img, std::string("\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x02\x00\x00\x00\x02", 16) + "ab");
    write_gzip(lab, std::string("\x00\x00\x08\x01\x00\x00\x00\x02", 8) + std::string("\x01\x02", 2));
    e = error_of([&] { read_idx(img, lab, "idx"); });
    QVERIFY2(has(e, img) && has(e, "truncated"), e.c_str());
  }

  // Unknown keys list the valid ones; the error names the file and line.
  void unknownConfigKey() {
    QTemporaryDir tmp;
    const std::string path = tmp.path().toStdString() + "/run.json";
    write_text(path, "{\n  \"train\": {\n    \"epochs\": 3,\n    \"epohcs\": 4\n  }\n}\n");
    std::string e = error_of([&] { Config::from_file(path); });
    QVERIFY2(has(e, path + ":4"), e.c_str());
    QVERIFY2(has(e, "unknown key 'train.epohcs'"), e.c_str());
    QVERIFY2(has(e, "train.epochs") && has(e, "train.batch") && has(e, "train.seed"), e.c_str());
    // An unknown section lists the sections.
    write_text(path, "{\"trian\": {\"epochs\": 3}}");
    e = error_of([&] { Config::from_file(path); });
    QVERIFY2(has(e, "unknown key 'trian.epochs'") && has(e, "valid sections") && has(e, "train") && has(e, "optim"),
             e.c_str());
    // --set names the key too.
    Config c;
    e = error_of([&] { c.set("optim.learning_rate", "0.1"); });
    QVERIFY2(has(e, "--set optim.learning_rate=0.1") && has(e, "optim.lr"), e.c_str());
  }

  void wrongTypeOrRange_data() {
    QTest::addColumn<QString>("json");
    QTest::addColumn<QString>("key");
    QTest::addColumn<QString>("expected");
    QTest::newRow("string for int") << R"({"train": {"epochs": "ten"}})" << "train.epochs" << "an integer from 0";
    QTest::newRow("fraction for int") << R"({"train": {"batch": 1.5}})" << "train.batch" << "an integer from 1";
    QTest::newRow("zero batch") << R"({"train": {"batch": 0}})" << "train.batch" << "an integer from 1";
    QTest::newRow("negative lr") << R"({"optim": {"lr": -0.1}})" << "optim.lr" << "a number from 1e-12 to 1000";
    QTest::newRow("bool as string") << R"({"optim": {"nesterov": "yes"}})" << "optim.nesterov" << "true or false";
    QTest::newRow("unknown choice") << R"({"precision": {"dtype": "fp64"}})" << "precision.dtype"
                                    << "one of fp32, tf32, bf16, fp16";
    QTest::newRow("bad list") << R"({"model": {"hidden": [256, "x"]}})" << "model.hidden" << "a list of integers";
    QTest::newRow("test fraction 1") << R"({"data": {"test_fraction": 1.0}})" << "data.test_fraction"
                                     << "a number from 0.01 to 0.99";
  }
  void wrongTypeOrRange() {
    QFETCH(QString, json);
    QFETCH(QString, key);
    QFETCH(QString, expected);
    QTemporaryDir tmp;
    const std::string path = tmp.path().toStdString() + "/c.json";
    write_text(path, json.toStdString());
    const std::string e = error_of([&] { Config::from_file(path); });
    QVERIFY2(has(e, path + ":1"), e.c_str());
    QVERIFY2(has(e, "'" + key.toStdString() + "'"), e.c_str());
    QVERIFY2(has(e, expected.toStdString()), e.c_str());
  }

  void wrongValueThroughSet() {
    Config c;
    std::string e = error_of([&] { c.set("train.epochs", "many"); });
    QVERIFY2(has(e, "train.epochs") && has(e, "an integer") && has(e, "'many'"), e.c_str());
    e = error_of([&] { c.set("optim.lr", "1e6"); });
    QVERIFY2(has(e, "optim.lr") && has(e, "to 1000"), e.c_str());
    e = error_of([&] { c.set("optim.nesterov", "maybe"); });
    QVERIFY2(has(e, "optim.nesterov") && has(e, "true or false"), e.c_str());
    e = error_of([&] { c.set("model.hidden", "256,x"); });
    QVERIFY2(has(e, "model.hidden") && has(e, "list of integers"), e.c_str());
  }

  // A run record is read tolerantly (Config::from_record): a key this build does not know, a value
  // out of today's range and a value of the wrong type keep their defaults; the rest is used. A
  // config file a user gives is read strictly (the tests above).
  void recordReadTolerantly() {
    const Json record = Json::parse(R"({"train": {"epochs": 7, "epohcs": 3, "batch": "big"},
                                        "optim": {"lr": 0.01, "beta1": 2.0},
                                        "future": {"key": true}})");
    const Config c = Config::from_record(record);
    const Config d;
    QCOMPARE(c.get_int("train.epochs"), int64_t(7));
    QCOMPARE(c.get_float("optim.lr"), 0.01);
    QCOMPARE(c.get_int("train.batch"), d.get_int("train.batch"));
    QCOMPARE(c.get_float("optim.beta1"), d.get_float("optim.beta1"));
    std::vector<std::string> diff = Config::differences(c, d);
    std::sort(diff.begin(), diff.end());
    QCOMPARE(diff, (std::vector<std::string>{"optim.lr", "train.epochs"}));
    QVERIFY(!error_of([&] { Config::from_json(record); }).empty());  // strict: the same record is refused
    QCOMPARE(Config::differences(Config::from_record(Json("not an object")), d).size(), size_t(0));
  }

  void invalidJson() {
    QTemporaryDir tmp;
    const std::string path = tmp.path().toStdString() + "/c.json";
    write_text(path, "{\n  \"train\": {\"epochs\": 3,}\n}\n");
    const std::string e = error_of([&] { Config::from_file(path); });
    QVERIFY2(has(e, path) && has(e, "not valid JSON") && has(e, "line 2"), e.c_str());
    const std::string m = error_of([] { Config::from_file("/nonexistent/run.json"); });
    QVERIFY2(has(m, "/nonexistent/run.json"), m.c_str());
  }

  // Batch larger than the data.
  void batchTooLarge() {
    QTemporaryDir tmp;
    Config c = digits_config(tmp.path().toStdString() + "/run", 2);
    c.set("train.batch", "2000");
    const std::string e = error_of([&] {
      Trainer t(c);
      t.run();
    });
    QVERIFY2(has(e, "train.batch") && has(e, "1437"), e.c_str());
  }

  // A run folder that cannot be created (its parent is a file: this holds even for root, which
  // CI runs as and which ignores permission bits).
  void unwritableOutputFolder() {
    QTemporaryDir tmp;
    const std::string file = tmp.path().toStdString() + "/plainfile";
    write_text(file, "x");
    const std::string out = file + "/run";
    Config c = digits_config(out, 2);
    const std::string e = error_of([&] {
      Trainer t(c);
      t.run();
    });
    QVERIFY2(has(e, "'" + out + "'") && has(e, "--out"), e.c_str());
  }

  // Divergence: the loss becomes inf/NaN, the run stops with "diverged at step N" and keeps its
  // record (config, every metrics line so far, the summary).
  void divergence() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString() + "/run";
    Config c = digits_config(dir, 500);
    c.set("optim.name", "sgd");
    c.set("optim.lr", "1000");
    Trainer t(c);
    const RunSummary s = t.run();
    QCOMPARE(s.status, std::string("diverged"));
    QVERIFY2(has(s.message, "diverged at step " + std::to_string(s.steps)), s.message.c_str());
    QVERIFY(s.steps < 500);
    const std::vector<Json> lines = metrics_lines(dir);
    QCOMPARE(static_cast<long>(lines.size()), s.steps);
    QVERIFY(!lines.back().at("loss").is_number() || !std::isfinite(lines.back().at("loss").get<double>()));
    QVERIFY(std::filesystem::exists(dir + "/config.json"));
    const Json sum = read_json(dir + "/summary.json");
    QCOMPARE(sum.at("status").get<std::string>(), std::string("diverged"));
    QVERIFY(has(sum.at("message").get<std::string>(), "diverged at step"));
  }
};

QTEST_APPLESS_MAIN(TestBadInput)
#include "test_bad_input.moc"
