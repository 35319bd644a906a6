// Config files and config keys as a hostile or careless user gives them (config/json_text.h,
// config/config.h): JSON errors in plain words with the file, line and column, never nlohmann's
// text and never the file's content; only regular files of bounded size and depth are read; every
// numeric key of the schema refuses NaN, infinities and values just outside its range; a run
// folder's config.json is read by the same code.
#include <sys/stat.h>

#include <QProcess>
#include <QtTest>
#include <cmath>
#include <filesystem>
#include <limits>

#include "config/json_text.h"
#include "cli_support.h"
#include "test_support.h"
#include "train/run_checkpoint.h"
#include "train/run_record.h"

using namespace trainlab;
using namespace trainlab::test;

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// No library text and no content of the file: every bad file below holds the marker SECRET42.
void expect_plain(const std::string& e) {
  QVERIFY2(!e.empty(), "no error");
  for (const char* leak : {"json.exception", "parse_error", "last read", "SECRET42", "syntax error while", "[json"})
    QVERIFY2(!has(e, leak), (std::string(leak) + " in: " + e).c_str());
  QVERIFY2(e.find('\n') == std::string::npos, ("not one line: " + e).c_str());
}

}  // namespace

class TestConfigFiles : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;
  std::string path(const std::string& name) { return m_tmp.path().toStdString() + "/" + name; }

 private slots:
  void invalidJsonInPlainWords_data() {
    // The bytes as they are (QByteArray: no UTF-8 decoding); a position is the last byte read,
    // the end of the token where parsing stopped.
    QTest::addColumn<QByteArray>("text");
    QTest::addColumn<QString>("where");
    QTest::addColumn<QString>("what");
    QTest::newRow("trailing comma") << QByteArray("{\n  \"train\": {\"epochs\": 3,}\n}\n") << "line 2, column 25"
                                    << "expected a key in double quotes (a comma before '}'?)";
    QTest::newRow("single quotes") << QByteArray("{'train': {'run': 'SECRET42'}}") << "line 1, column 2"
                                   << "(strings need double quotes)";
    QTest::newRow("unquoted word") << QByteArray("{\"run\": {\"name\": SECRET42}}") << "line 1, column 18"
                                   << "a word that is not true, false or null";
    QTest::newRow("unclosed") << QByteArray("{\"run\": {\"name\": \"SECRET42\"}") << "line 1, column 29"
                              << "the text ends before the JSON value is complete";
    QTest::newRow("unclosed string") << QByteArray("{\"run\": {\"name\": \"SECRET42") << "line 1, column 27"
                                     << "a string is not closed";
    QTest::newRow("missing colon") << QByteArray("{\"run\" {\"name\": \"SECRET42\"}}") << "line 1, column 8"
                                   << "expected ':' after a key";
    QTest::newRow("missing comma") << QByteArray("{\"run\": {\"name\": \"a\" \"out\": \"SECRET42\"}}") << "line 1, column 26"
                                   << "expected ',' or '}'";
    QTest::newRow("list") << QByteArray("{\"model\": {\"hidden\": [1 2]}, \"x\": \"SECRET42\"}") << "line 1, column 25"
                          << "expected ',' or ']'";
    QTest::newRow("tab in string") << QByteArray("{\"run\": {\"name\": \"SECRET42\tx\"}}") << "line 1, column 27"
                                   << "a control character";
    QTest::newRow("number overflow") << QByteArray("{\"optim\": {\"lr\": 1e400}, \"x\": \"SECRET42\"}") << "line 1, column 22"
                                     << "a number too large";
    QTest::newRow("text after") << QByteArray("{\"run\": {}} {\"x\": \"SECRET42\"}") << "line 1, column 13"
                                << "more text after the end";
    QTest::newRow("word after") << QByteArray("{\"run\": {}} SECRET42") << "line 1, column 13" << "a word that is not";
    QTest::newRow("bad escape") << QByteArray("{\"run\": {\"name\": \"\\q SECRET42\"}}") << "line 1, column 20"
                                << "a backslash";
    QTest::newRow("not UTF-8") << QByteArray("{\"run\": {\"name\": \"\xff SECRET42\"}}") << "line 1, column 19"
                               << "not valid UTF-8";
    QTest::newRow("nan") << QByteArray("{\"optim\": {\"lr\": NaN}, \"x\": \"SECRET42\"}") << "line 1, column 18"
                         << "a word that is not";
  }
  void invalidJsonInPlainWords() {
    QFETCH(QByteArray, text);
    QFETCH(QString, where);
    QFETCH(QString, what);
    const std::string p = path("bad.json");
    write_text(p, text.toStdString());
    const std::string e = error_of([&] { Config::from_file(p); });
    expect_plain(e);
    QVERIFY2(has(e, p + ": not valid JSON at " + where.toStdString() + " ("), e.c_str());
    QVERIFY2(has(e, what.toStdString()), e.c_str());
  }

  // A number too large for a double was nlohmann's out_of_range exception (not a parse_error),
  // which escaped from_file's catch with its raw text and the number quoted.
  void numberOverflowThroughTheCli() {
    const std::string p = path("big.json");
    write_text(p, "{\"optim\": {\"lr\": 1e999999}}");
    QProcess proc;
    proc.start(QStringLiteral(TRAINLAB_CLI_PATH), {"train", "--print-config", "--config", q(p)});
    QVERIFY(proc.waitForFinished(60000));
    const std::string err = proc.readAllStandardError().toStdString();
    QCOMPARE(proc.exitCode(), 1);
    QVERIFY2(has(err, "error: " + p + ": not valid JSON at line 1, column 25 (a number too large"), err.c_str());
    QVERIFY2(!has(err, "json.exception") && !has(err, "999999"), err.c_str());
  }

  void emptyAndNotAnObject() {
    const std::string p = path("empty.json");
    write_text(p, " \n");
    std::string e = error_of([&] { Config::from_file(p); });
    QVERIFY2(has(e, p + ": empty"), e.c_str());
    write_text(p, "[1, 2, \"SECRET42\"]");
    e = error_of([&] { Config::from_file(p); });
    expect_plain(e);
    QVERIFY2(has(e, p + ": a config must be a JSON object"), e.c_str());
  }

  // Only regular files: a folder read as empty text (nlohmann's message followed), and /dev/zero
  // was read until memory ran out ("error: std::bad_alloc"; run under a memory limit here).
  void onlyRegularFiles() {
    std::string e = error_of([&] { Config::from_file(m_tmp.path().toStdString()); });
    QVERIFY2(has(e, m_tmp.path().toStdString() + ": the config file must be a regular file, not a folder"), e.c_str());
    const std::string fifo = path("fifo.json");
    QCOMPARE(::mkfifo(fifo.c_str(), 0600), 0);
    e = error_of([&] { Config::from_file(fifo); });  // (opening a FIFO for reading would block)
    QVERIFY2(has(e, fifo + ": the config file must be a regular file, not a device, pipe or socket"), e.c_str());
    const CliResult r = run_cli_limited({"train", "--print-config", "--config", "/dev/zero"});
    const std::string err = r.err.toStdString();
    QCOMPARE(r.code, 1);
    QVERIFY2(has(err, "error: /dev/zero: the config file must be a regular file"), err.c_str());
    e = error_of([&] { Config::from_file(path("missing.json")); });
    QVERIFY2(has(e, path("missing.json") + ": cannot open the config file (No such file"), e.c_str());
  }

  // Size and depth limits: a config is a few kilobytes, three levels deep.
  void sizeAndDepthBounded() {
    const std::string big = path("big.json");
    write_text(big, "{\"run\": {\"name\": \"" + std::string(kMaxJsonFileBytes, 'x') + "\"}}");
    std::string e = error_of([&] { Config::from_file(big); });
    QVERIFY2(has(e, big + ": ") && has(e, "bytes is more than a config file can be"), e.c_str());
    const std::string deep = path("deep.json");
    write_text(deep, "{\"run\":\n" + std::string(100000, '[') + std::string(100000, ']') + "}");
    e = error_of([&] { Config::from_file(deep); });
    QVERIFY2(has(e, deep + ": JSON nested more than 32 levels deep at line 2, column 32"), e.c_str());
    // Brackets inside strings do not count.
    QCOMPARE(Config::from_text("{\"run\": {\"name\": \"" + std::string(100, '[') + "\"}}", "t").get_string("run.name"),
             std::string(100, '['));
  }

  // Unknown keys, wrong types and ranges name the file, line and key; a value is described, never
  // echoed, and a key is quoted only when it is a plain name.
  void keysNamedValuesNotEchoed_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("message");
    QTest::newRow("string for int") << "{\"train\": {\n\"epochs\": \"SECRET42\"}}"
                                    << ":2: key 'train.epochs': expected an integer in [0, 1e6], got a string";
    QTest::newRow("enum") << "{\"precision\": {\"dtype\": \"SECRET42\"}}"
                          << ":1: key 'precision.dtype': expected one of fp32, tf32, bf16, fp16, fp8, got a string that is none of these";
    QTest::newRow("fraction") << "{\"train\": {\"batch\": 1.5}, \"run\": {\"name\": \"SECRET42\"}}"
                              << ":1: key 'train.batch': expected an integer in [1, 16777216], got a number with a fraction";
    QTest::newRow("range") << "{\"optim\": {\"lr\": 0}, \"run\": {\"name\": \"SECRET42\"}}"
                           << ":1: key 'optim.lr': expected a number in (0, 10], got a number outside that range";
    QTest::newRow("huge unsigned") << "{\"train\": {\"seed\": 18446744073709551615}, \"run\": {\"name\": \"SECRET42\"}}"
                                   << "key 'train.seed': expected an integer in [0, 9.2e18], got a number outside";
    QTest::newRow("list item") << "{\"model\": {\"hidden\": [256, \"SECRET42\"]}}"
                               << "key 'model.hidden': expected a list of 1 to 64 integers in [1, 65536], got a list with";
    QTest::newRow("long list") << "{\"model\": {\"hidden\": [" + QString("1,").repeated(64) + "1]}}"
                               << "got a list of 65 items";
    QTest::newRow("object value") << "{\"optim\": {\"lr\": {\"a\": \"SECRET42\"}}}" << "key 'optim.lr': expected a number in (0, 10], got an object";
    QTest::newRow("unknown key") << "{\"optim\": {\"lerning_rate\": \"SECRET42\"}}"
                                 << ":1: unknown key 'optim.lerning_rate'; valid keys here: optim.name, optim.lr";
    QTest::newRow("hostile key") << "{\"optim\": {\"\\u001b[31mSECRET42\": 1}}"
                                 << ": unknown key of 19 bytes (not a name of letters, digits";
    QTest::newRow("deep unknown") << "{\"a\": {\"b\": {\"c\": {\"d\": {\"e\": \"SECRET42\"}}}}}" << "unknown key 'a.b.c.d'";
  }
  void keysNamedValuesNotEchoed() {
    QFETCH(QString, text);
    QFETCH(QString, message);
    const std::string p = path("keys.json");
    write_text(p, text.toStdString());
    const std::string e = error_of([&] { Config::from_file(p); });
    expect_plain(e);
    QVERIFY2(has(e, p) && has(e, message.toStdString()), e.c_str());
  }

  // The audit of the schema: every numeric key refuses NaN and infinities (as text through --set
  // and as JSON values through set_json, the app's path) and the values just outside its range,
  // and takes its ends when they are closed.
  void everyNumericKeyHasAFiniteRange() {
    int checked = 0;
    for (const ConfigKey& k : config_schema()) {
      if (k.type != KeyType::Int && k.type != KeyType::Float) continue;
      ++checked;
      const NumberRange r = number_range(k);
      QVERIFY2(std::isfinite(k.min) && std::isfinite(k.max) && k.min < k.max, k.key.c_str());
      for (const char* text : {"nan", "inf", "-inf", "1e999", "-1e999", ""}) {
        Config c;
        const std::string e = error_of([&] { c.set(k.key, text); });
        QVERIFY2(has(e, "key '" + k.key + "': expected " + r.describe()), (k.key + " took '" + text + "': " + e).c_str());
      }
      for (const double v : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
        Config c;
        const std::string e = error_of([&] { c.set_json(k.key, v, "the window"); });
        QVERIFY2(has(e, "the window: key '" + k.key + "'"), (k.key + ": " + e).c_str());
      }
      const double below = k.min - std::max(1.0, std::fabs(k.min)) * 1e-6, above = k.max + std::max(1.0, std::fabs(k.max)) * 1e-6;
      for (const double v : {below, above}) {
        Config c;
        QVERIFY2(!error_of([&] { c.set_json(k.key, v); }).empty(), (k.key + " took " + format_number(v)).c_str());
      }
      for (const auto& [end, open] : {std::pair{k.min, k.min_open}, std::pair{k.max, k.max_open}}) {
        Config c;
        const Json v = k.type == KeyType::Int ? Json(static_cast<int64_t>(end)) : Json(end);
        const std::string e = error_of([&] { c.set_json(k.key, v); });
        QVERIFY2(e.empty() != open, (k.key + " at " + format_number(end) + ": " + e).c_str());
      }
    }
    QVERIFY(checked > 30);
  }

  // The one number parser: C locale, whole text, exact integers, shortened echo.
  void numberParsing() {
    QCOMPARE(parse_number("0.5").value(), 0.5);
    QCOMPARE(parse_number("+2e3").value(), 2000.0);
    QCOMPARE(parse_number("1e-999").value(), 0.0);
    QVERIFY(std::isinf(parse_number("1e999").value()));
    QVERIFY(std::isnan(parse_number("NaN").value()));
    for (const char* bad : {"", " 1", "1 ", "0x10", "--1", "+-1", "1,5", "one", "1e", "."}) QVERIFY2(!parse_number(bad), bad);
    int64_t n = 0;
    QCOMPARE(check_number(integers(0, 9.2e18), "9007199254740993", nullptr, &n), std::string());
    QCOMPARE(n, int64_t(9007199254740993));
    QVERIFY(has(check_number(integers(0, 9.2e18), "9.1e18"), "written in full"));
    QCOMPARE(check_number(integers(0, 10), std::string(100, '7')),
             std::string("expected an integer in [0, 10], got " + std::string(37, '7') + "..."));
    QCOMPARE(reals(0, 10, true, false).describe(), std::string("a number in (0, 10]"));
    QCOMPARE(integers(1, 1e9).describe(), std::string("an integer in [1, 1e9]"));
    QCOMPARE(format_number(1e-12), std::string("1e-12"));
  }

  // A run folder's config.json (load_run: the app's runs and reports) is read by the same code.
  void runConfigReadTheSameWay() {
    const std::string dir = path("run");
    std::filesystem::create_directories(dir);
    write_text(dir + "/config.json", "{\"train\": {\"epochs\": 3,}, \"run\": {\"name\": \"SECRET42\"}}");
    const std::string e = error_of([&] { load_run(dir); });
    expect_plain(e);
    QVERIFY2(has(e, dir + "/config.json: not valid JSON at line 1, column 24"), e.c_str());
  }

  // `train --resume DIR` reads the run's config.json as a config file too: plain words with line
  // and column, the key's line for a bad value, nothing of the file echoed.
  void resumeConfigReadTheSameWay() {
    const std::string dir = path("resume");
    std::filesystem::create_directories(dir);
    write_text(dir + "/config.json", "{\"train\": {\"epochs\": 3,}, \"run\": {\"name\": \"SECRET42\"}}");
    std::string e = error_of([&] { resume_config(dir); });
    expect_plain(e);
    QVERIFY2(has(e, dir + "/config.json: not valid JSON at line 1, column 24 (expected a key in double quotes"), e.c_str());
    write_text(dir + "/config.json", "{\"run\": {\"name\": \"SECRET42\"},\n \"optim\": {\"lr\": 1e400}}");
    e = error_of([&] { resume_config(dir); });
    expect_plain(e);
    QVERIFY2(has(e, dir + "/config.json: not valid JSON at line 2, column 22 (a number too large"), e.c_str());
  }

  // Records are read tolerantly, and a deep or odd record cannot crash the reader.
  void recordsTolerateOddShapes() {
    Json deep = Json::object();
    Json* inner = &deep;
    for (int i = 0; i < 100000; ++i) inner = &((*inner)["x"] = Json::object());
    QCOMPARE(Config::differences(Config::from_record(deep), Config()).size(), size_t(0));
    const Json odd = Json::parse(R"({"train": {"seed": 18446744073709551615, "epochs": 7.0}, "model": {"hidden": [1.5]}})");
    const Config c = Config::from_record(odd);
    QCOMPARE(c.get_int("train.epochs"), int64_t(7));
    QCOMPARE(c.get_int("train.seed"), Config().get_int("train.seed"));
    QCOMPARE(c.get_int_list("model.hidden"), Config().get_int_list("model.hidden"));
  }
};

QTEST_GUILESS_MAIN(TestConfigFiles)
#include "test_config_files.moc"
