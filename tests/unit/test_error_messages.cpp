// No library's raw text reaches the user: describe_exception (util/error.h), which trainlab-cli's
// main() and the app's worker and dialogs use for anything that is not a trainlab::Error, and the
// places that used to let one through: a device index past int (std::stoi's "stoi"), a
// quant.overrides number (the same, or a group of 0), TRAINLAB_THREADS read with atoi.
#include <QProcess>
#include <QtTest>
#include <filesystem>
#include <system_error>

#include "compress/quant.h"
#include "test_support.h"

using namespace trainlab;
using namespace trainlab::test;

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The message describe_exception gives for what `fn` throws.
std::string described(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return describe_exception(e, "training");
  }
  return "(nothing thrown)";
}

struct Result {
  int code = -1;
  std::string err;
};

Result cli(const QStringList& args, const QProcessEnvironment& env = QProcessEnvironment::systemEnvironment()) {
  QProcess p;
  p.setProcessEnvironment(env);
  p.start(QStringLiteral(TRAINLAB_CLI_PATH), args);
  Result r;
  if (!p.waitForStarted(10000) || !p.waitForFinished(120000)) return r;
  r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2;  // -2: crashed
  r.err = p.readAllStandardError().toStdString();
  return r;
}

}  // namespace

class TestErrorMessages : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;
  std::string path(const std::string& name) { return m_tmp.path().toStdString() + "/" + name; }

 private slots:
  // Real exceptions of the standard library and nlohmann::json, as they arise.
  void describeException() {
    QCOMPARE(described([] { throw Error("run.json:3: key 'optim.lr': expected ..."); }),
             std::string("run.json:3: key 'optim.lr': expected ..."));
    std::string m = described([] { throw std::bad_alloc(); });
    QVERIFY2(m.rfind("out of memory while training (", 0) == 0, m.c_str());
    m = described([] {
      std::vector<double> v;
      v.reserve(v.max_size() + 1);  // std::length_error: a size that cannot be allocated
    });
    QVERIFY2(m.rfind("out of memory while training (", 0) == 0, m.c_str());
    const std::string missing = path("missing");
    m = described([&] { (void)std::filesystem::file_size(missing); });
    QVERIFY2(m == missing + ": " + std::make_error_code(std::errc::no_such_file_or_directory).message() + " (while training)",
             m.c_str());
    m = described([] { throw std::system_error(std::make_error_code(std::errc::no_space_on_device)); });
    QVERIFY2(m == std::make_error_code(std::errc::no_space_on_device).message() + " while training", m.c_str());
    m = described([] { (void)Json("text").get<int>(); });
    QVERIFY2(m == "unexpected error while training: type must be number, but is string", m.c_str());
    m = described([] { const Json j = Json::parse("{\"a\": SECRET42}"); });
    QVERIFY2(m.rfind("unexpected error while training: ", 0) == 0 && !has(m, "[json") && !has(m, "SECRET42"), m.c_str());
    m = described([] { (void)std::vector<int>(3).at(5); });
    QVERIFY2(m.rfind("unexpected error while training: ", 0) == 0 && !has(m, "_M_range_check"), m.c_str());
  }

  // `--device cuda:N` with N past int: std::stoi threw out_of_range, printed as "error: stoi".
  void deviceIndexOutOfRange() {
    const Result r = cli({"train", "--device", "cuda:99999999999", "--steps", "1", "--quiet", "--out", q(path("dev"))});
    QVERIFY2(r.code == 1, r.err.c_str());
    QVERIFY2(has(r.err, "error: device 'cuda:99999999999': expected cpu, auto, cuda or cuda:N with N a GPU index from 0 "
                        "to 1023"),
             r.err.c_str());
  }

  // TRAINLAB_THREADS was read with atoi: "many" silently meant OpenBLAS's default.
  void threadsVariableChecked() {
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("TRAINLAB_THREADS", "many");
    const Result r = cli({"train", "--device", "cpu", "--steps", "1", "--quiet", "--out", q(path("threads"))}, env);
    QVERIFY2(r.code == 1, r.err.c_str());
    QVERIFY2(has(r.err, "error: TRAINLAB_THREADS: expected an integer in [0, 4096], got many"), r.err.c_str());
  }

  // quant.overrides numbers: std::stoi's raw "stoi" for one past int, "4x" read as 4, a group of 0
  // taken until a layer could not use it; now each has quant.bits' or quant.group's range.
  void quantOverridesNumbers_data() {
    QTest::addColumn<QString>("overrides");
    QTest::addColumn<QString>("message");
    QTest::newRow("bits past int") << "net.0:99999999999" << "quant.overrides item 1: bits: expected an integer in [2, 8]";
    QTest::newRow("bits with letters") << "net.0:4x" << "quant.overrides item 1: bits: expected an integer in [2, 8]";
    QTest::newRow("group 0") << "net.4:8:channel,net.0:4:group:0"
                             << "quant.overrides item 2: group: expected an integer in [1, 4096]";
    QTest::newRow("group nan") << "net.0:4:group:nan" << "group: expected an integer in [1, 4096]";
    QTest::newRow("too many fields") << "net.0:4:group:32:9" << "quant.overrides item 1: expected layer:bits";
  }
  void quantOverridesNumbers() {
    QFETCH(QString, overrides);
    QFETCH(QString, message);
    const std::string e = error_of([&] { QuantPlan::parse(QuantSpec{}, overrides.toStdString()); });
    QVERIFY2(has(e, message.toStdString()), e.c_str());
    QVERIFY2(!has(e, overrides.toStdString()), e.c_str());  // a config file's text is not echoed
  }
  void quantOverridesThroughTheCli() {
    const std::string run = path("q-run");
    Result r = cli({"train", "--device", "cpu", "--steps", "1", "--quiet", "--out", q(run)});
    QVERIFY2(r.code == 0, r.err.c_str());
    r = cli({"quantize", "--weights", q(run + "/model.safetensors"), "--overrides", "net.0:4:group:0"});
    QVERIFY2(r.code == 1, r.err.c_str());
    QVERIFY2(has(r.err, "error: quant.overrides item 1: group: expected an integer in [1, 4096]"), r.err.c_str());
    r = cli({"quantize", "--weights", q(run + "/model.safetensors"), "--overrides", "net.0:99999999999"});
    QVERIFY2(r.code == 1 && has(r.err, "error: quant.overrides item 1: bits: expected an integer in [2, 8]"), r.err.c_str());
  }
};

QTEST_GUILESS_MAIN(TestErrorMessages)
#include "test_error_messages.moc"
