// Hostile weights files (issue 16): whatever a weights file holds, every verb that reads one
// (eval, prune, quantize, generate, train's compress.init_from and distill.teacher, sweep
// --baseline) ends in one clear error naming the file and the field at fault, never a crash, a
// hang, an allocation its bytes do not back, or a silent misreading; the error never echoes the
// file's content; and a weights file's metadata never makes the lab open a path.
// The files are made here: a small MLP's weights (64-16-10, digits) written by the lab, dense and
// quantized, then edited (metadata, header, tensors) or written byte by byte.
#include <sys/stat.h>

#include <QProcess>
#include <QtTest>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>

#include "backend/cpu_backend.h"
#include "compress/quant.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "nn/model.h"
#include "nn/transformer.h"
#include "cli_support.h"
#include "test_support.h"

using namespace trainlab;
using namespace trainlab::test;

namespace {

using Result = CliResult;

// trainlab-cli with `args`; code -2 when it crashed, -3 when it ran past `timeout_ms` (killed).
Result cli(const QStringList& args, int timeout_ms = 30000) { return run_cli(args, timeout_ms); }


// The one "error:" line of a failed run (empty when there is not exactly one).
QString error_line(const Result& r) {
  QStringList out;
  for (const QString& l : r.err.split('\n'))
    if (l.startsWith("error:")) out << l;
  return out.size() == 1 ? out.front() : QString();
}

// A clear error: exit 1, one "error:" line that names every part of `mentions` and none of `never`.
void verify_clear_error(const Result& r, const QStringList& mentions, const QStringList& never = {}) {
  QVERIFY2(r.code == 1, qPrintable(describe(r)));
  const QString e = error_line(r);
  QVERIFY2(!e.isEmpty(), qPrintable(describe(r)));
  for (const QString& m : mentions) QVERIFY2(e.contains(m), qPrintable(m + " not in: " + e));
  for (const QString& n : never) QVERIFY2(!e.contains(n), qPrintable(n + " echoed in: " + e));
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The config a digits run of the 64-16-10 MLP writes into its weights file.
Json mlp_config() {
  Config c;
  c.set("device.name", "cpu");
  c.set("model.name", "mlp");
  c.set("model.hidden", "[16]");
  c.set("train.seed", "1");
  return c.to_json();
}

SafeTensorsFile mlp_file() {
  CpuBackend be(1);
  Mlp m(be, {64, 16, 10}, Activation::ReLU, 1);
  return model_to_file(be, m, mlp_config());
}

SafeTensorsFile quantized(const SafeTensorsFile& f, int bits) {
  QuantSpec spec;
  spec.bits = bits;
  spec.granularity = QuantGranularity::Channel;
  return quantize_weights(f, QuantPlan::parse(spec, ""), nullptr);
}

SafeTensor& tensor(SafeTensorsFile& f, const std::string& name) {
  for (auto& t : f.tensors)
    if (t.name == name) return t;
  throw Error("test: no tensor " + name);
}

// Edits the JSON of metadata `key` (as a JSON value) with `fn`.
void edit_json(SafeTensorsFile& f, const std::string& key, const std::function<void(Json&)>& fn) {
  Json j = Json::parse(f.metadata.at(key));
  fn(j);
  f.metadata[key] = j.dump();
}

// A safetensors file written byte by byte: the 8-byte length, `header`, `data`.
void write_raw(const std::string& path, const std::string& header, const std::string& data = {}) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  write_text(path, s + header + data);
}

constexpr const char* kSecret = "SECRETWORD";

}  // namespace

class TestWeightsFiles : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;
  SafeTensorsFile m_dense, m_q4, m_q8;
  std::string m_digits;  // a small digits CSV the user names with --set data.path

  std::string path(const std::string& name) const { return m_tmp.path().toStdString() + "/" + name; }
  QString qpath(const std::string& name) const { return q(path(name)); }

  // `f` written as `name` (write_safetensors, which checks nothing of the metadata).
  QString write(const std::string& name, const SafeTensorsFile& f) const {
    write_safetensors(path(name), f);
    return qpath(name);
  }

  // The arguments of each verb that reads the weights file `w` (a 64-16-10 MLP's where it matters).
  QList<QStringList> reach_points(const QString& w, const std::string& tag) const {
    const QString out = qpath("out-" + tag);
    const QStringList train = {"train", "--model", "mlp", "--set", "model.hidden=[16]", "--steps", "1", "--device", "cpu"};
    return {{"eval", "--weights", w, "--device", "cpu"},
            {"prune", "--weights", w, "--rows", "8"},
            {"quantize", "--weights", w},
            {"generate", "--weights", w, "--tokens", "1"},
            train + QStringList{"--out", out + "-init", "--set", "compress.init_from=" + w},
            train + QStringList{"--out", out + "-teacher", "--set", "distill.teacher=" + w},
            {"sweep", "--device", "cpu", "--baseline", w, "--steps", "1", "--out", out + "-sweep"}};
  }

 private slots:
  void initTestCase() {
    QVERIFY(m_tmp.isValid());
    m_dense = mlp_file();
    m_q4 = quantized(m_dense, 4);
    m_q8 = quantized(m_dense, 8);
    m_digits = path("digits.csv");
    write_text(m_digits, digits_csv(60));
    write("dense.safetensors", m_dense);
  }

  // The files as the lab writes them load everywhere they should (the edits below are the faults).
  void wellFormedFilesLoad() {
    CpuBackend be(1);
    for (const SafeTensorsFile* f : {&m_dense, &m_q4, &m_q8}) {
      const QString w = write("ok.safetensors", *f);
      const Result r = cli({"eval", "--weights", w, "--device", "cpu"});
      QVERIFY2(r.code == 0, qPrintable(describe(r)));
      QCOMPARE(model_from_file(be, *f, "ok")->parameter_count(), int64_t(64 * 16 + 16 + 16 * 10 + 10));
    }
  }

  // visit_architecture lists exactly the parameters the model it describes has (names, shapes,
  // order): the check of a file against its architecture is the model's own layout.
  void architectureListsTheModelsParameters() {
    CpuBackend be(1);
    CharGptConfig padded;
    padded.vocab = 70;
    padded.pad_vocab = true;
    padded.layers = 3;
    padded.heads = 2;
    padded.dim = 8;
    padded.context = 5;
    std::vector<std::unique_ptr<Model>> models;
    models.push_back(std::make_unique<Mlp>(be, std::vector<int64_t>{64, 16, 10}, Activation::ReLU, 1));
    models.push_back(std::make_unique<Mlp>(be, std::vector<int64_t>{5, 7, 9, 3, 2}, Activation::GELU, 1));
    models.push_back(std::make_unique<Mlp>(be, std::vector<int64_t>{4, 2}, Activation::None, 1));
    models.push_back(std::make_unique<CharGpt>(be, padded, 1));
    for (auto& m : models) {
      std::vector<std::pair<std::string, Shape>> listed;
      visit_architecture(m->architecture(), [&](const std::string& n, const Shape& s) { listed.emplace_back(n, s); });
      const auto params = m->parameters();
      QCOMPARE(listed.size(), params.size());
      for (size_t i = 0; i < params.size(); ++i) {
        QCOMPARE(listed[i].first, params[i]->name);
        QCOMPARE(listed[i].second, params[i]->shape);
      }
    }
  }

  // parse_safetensors (bytes) and read_safetensors (a path) are one reader: the same tensors.
  void bytesAndPathReadAlike() {
    const std::string file = path("alike.safetensors");
    write_safetensors(file, m_q4);
    const SafeTensorsFile a = read_safetensors(file), b = parse_safetensors(read_text(file), file);
    QCOMPARE(a.tensors.size(), m_q4.tensors.size());
    QCOMPARE(b.tensors.size(), a.tensors.size());
    QCOMPARE(a.metadata, m_q4.metadata);
    QCOMPARE(b.metadata, a.metadata);
    for (size_t i = 0; i < a.tensors.size(); ++i) {
      QCOMPARE(a.tensors[i].name, m_q4.tensors[i].name);  // the order written
      QCOMPARE(b.tensors[i].name, a.tensors[i].name);
      QCOMPARE(b.tensors[i].shape, a.tensors[i].shape);
      QVERIFY(a.tensors[i].bytes == m_q4.tensors[i].bytes && b.tensors[i].bytes == a.tensors[i].bytes);
    }
  }

  // trainlab_quant entries that disagree with the tensors, or hold numbers that overflow, are
  // refused naming the weight and the key: the SIGFPE (a group of 0 from an overflowing shape),
  // the vector of -1 elements, and the values silently truncated to int before.
  void hostileQuantMetadata_data() {
    QTest::addColumn<int>("bits");
    QTest::addColumn<QString>("edit");
    QTest::addColumn<QStringList>("mentions");
    QTest::newRow("shape overflows int64 (group 0)") << 4 << "overflow" << QStringList{"net.2.weight", "shape"};
    QTest::newRow("shape product -1") << 4 << "product-1" << QStringList{"net.2.weight", "shape"};
    QTest::newRow("bits not an integer") << 4 << "bits4.5" << QStringList{"net.2.weight", "bits", "[2, 8]"};
    QTest::newRow("group beyond int") << 4 << "group2^32" << QStringList{"net.2.weight", "group"};
    QTest::newRow("shape not integers") << 4 << "shape10.5" << QStringList{"net.2.weight", "shape"};
    QTest::newRow("granularity unknown") << 4 << "granularity" << QStringList{"net.2.weight", "granularity", "tensor, channel or group"};
    QTest::newRow("entry not an object") << 4 << "entry5" << QStringList{"net.2.weight"};
    QTest::newRow("entry of rank 1") << 4 << "rank1" << QStringList{"net.2.weight", "shape"};
    QTest::newRow("packed codes as a matrix") << 4 << "codes-matrix" << QStringList{"net.2.weight", "codes"};
    QTest::newRow("int8 codes of rank 1") << 8 << "codes-rank1" << QStringList{"net.2.weight", "codes"};
    QTest::newRow("scales as F32") << 4 << "scales-f32" << QStringList{"net.2.weight", "F16"};
    QTest::newRow("scales as a matrix") << 4 << "scales-matrix" << QStringList{"net.2.weight", "scales"};
    QTest::newRow("infinite scale") << 4 << "scales-inf" << QStringList{"net.2.weight", "scales"};
    QTest::newRow("dense and quantized") << 8 << "twin" << QStringList{"net.2.weight", "dense"};
  }
  void hostileQuantMetadata() {
    QFETCH(int, bits);
    QFETCH(QString, edit);
    QFETCH(QStringList, mentions);
    SafeTensorsFile f = bits == 4 ? m_q4 : m_q8;
    const std::string w = "net.2.weight";
    auto entry = [&](const std::function<void(Json&)>& fn) { edit_json(f, "trainlab_quant", [&](Json& q) { fn(q[w]); }); };
    auto empty_tensors = [&](const Shape& scales) {
      tensor(f, w + ".qweight").shape = {0};
      tensor(f, w + ".qweight").bytes.clear();
      tensor(f, w + ".scales").shape = scales;
      tensor(f, w + ".scales").bytes.assign(static_cast<size_t>(shape_numel(scales)) * 2, 0);
    };
    const std::string e = edit.toStdString();
    if (e == "overflow") {  // 2^32 x 2^32 wraps to 0 weights in one group of 0
      entry([](Json& m) { m = {{"bits", 4}, {"granularity", "tensor"}, {"shape", {int64_t(1) << 32, int64_t(1) << 32}}}; });
      empty_tensors({1});
    } else if (e == "product-1") {  // (2^32 + 1)(2^32 - 1) wraps to -1
      entry([](Json& m) { m["shape"] = {(int64_t(1) << 32) + 1, (int64_t(1) << 32) - 1}; });
      empty_tensors({0});
    } else if (e == "bits4.5") {
      entry([](Json& m) { m["bits"] = 4.5; });
    } else if (e == "group2^32") {  // 2^32 + 16 was read as the int 16
      entry([](Json& m) { m = {{"bits", 4}, {"granularity", "group"}, {"group", (int64_t(1) << 32) + 16}, {"shape", {10, 16}}}; });
    } else if (e == "shape10.5") {
      entry([](Json& m) { m["shape"] = {10.5, 16}; });
    } else if (e == "granularity") {
      entry([](Json& m) { m["granularity"] = kSecret; });
    } else if (e == "entry5") {
      entry([](Json& m) { m = 5; });
    } else if (e == "rank1") {
      entry([](Json& m) { m["shape"] = {160}; });
    } else if (e == "codes-matrix") {
      tensor(f, w + ".qweight").shape = {10, 8};
    } else if (e == "codes-rank1") {
      tensor(f, w + ".qweight").shape = {160};
    } else if (e == "scales-f32") {
      SafeTensor& s = tensor(f, w + ".scales");
      s.dtype = "F32";
      s.shape = {5};
    } else if (e == "scales-matrix") {
      tensor(f, w + ".scales").shape = {2, 5};
    } else if (e == "scales-inf") {
      SafeTensor& s = tensor(f, w + ".scales");
      s.bytes[2] = 0x00, s.bytes[3] = 0x7c;  // fp16 +inf
    } else if (e == "twin") {
      f.tensors.push_back(m_dense.find(w) ? *m_dense.find(w) : SafeTensor());
    }
    const QString file = write("hostile-quant.safetensors", f);
    const Result r = cli({"eval", "--weights", file, "--device", "cpu"});
    verify_clear_error(r, QStringList{file} + mentions, {kSecret});
    if (QTest::currentTestFailed()) return;
    // The library's entry point refuses the same file the same way.
    const std::string err = error_of([&] { dequantize_weights(read_safetensors(file.toStdString()), "x.safetensors"); });
    QVERIFY2(has(err, "x.safetensors") && has(err, w), err.c_str());
  }

  // An architecture in the metadata is checked against the tensors before the model is built: no
  // allocation of 1e8 units the file does not hold, no unknown value read as a default.
  void hostileArchitecture_data() {
    QTest::addColumn<QString>("arch");
    QTest::addColumn<QStringList>("mentions");
    QTest::newRow("1e8 hidden units") << R"({"kind":"mlp","sizes":[64,100000000,10],"activation":"relu"})"
                                      << QStringList{"trainlab_architecture", "sizes", "[1, 16777216]"};
    QTest::newRow("1e7 hidden units") << R"({"kind":"mlp","sizes":[64,10000000,10],"activation":"relu"})"
                                      << QStringList{"trainlab_architecture", "net.0.weight", "[10000000, 64]"};
    QTest::newRow("a layer more") << R"({"kind":"mlp","sizes":[64,16,16,10],"activation":"relu"})"
                                  << QStringList{"net.2.weight", "[16, 16]"};
    QTest::newRow("unknown activation") << R"({"kind":"mlp","sizes":[64,16,10],"activation":"SECRETWORD"})"
                                        << QStringList{"trainlab_architecture", "activation", "relu, gelu or none"};
    QTest::newRow("kind not a string") << R"({"kind":5,"sizes":[64,16,10]})" << QStringList{"trainlab_architecture", "kind"};
    QTest::newRow("sizes not integers") << R"({"kind":"mlp","sizes":[64,16.5,10],"activation":"relu"})"
                                        << QStringList{"trainlab_architecture", "sizes"};
    QTest::newRow("negative size") << R"({"kind":"mlp","sizes":[64,-16,10],"activation":"relu"})"
                                   << QStringList{"trainlab_architecture", "sizes"};
    QTest::newRow("char-gpt of 1000 layers")
        << R"({"kind":"char-gpt","vocab":65,"layers":1000,"heads":4,"dim":4096,"context":65536})"
        << QStringList{"trainlab_architecture", "tok.weight"};
    QTest::newRow("not JSON") << QString(R"({"kind": "%1\q"})").arg(kSecret) << QStringList{"trainlab_architecture", "not valid JSON"};
  }
  void hostileArchitecture() {
    QFETCH(QString, arch);
    QFETCH(QStringList, mentions);
    SafeTensorsFile f = m_dense;
    f.metadata["trainlab_architecture"] = arch.toStdString();
    const QString file = write("hostile-arch.safetensors", f);
    // Under a 2 GiB address-space limit, so an allocation the file does not back shows as one (not
    // under AddressSanitizer, which reserves terabytes of address space for its shadow).
#if defined(__SANITIZE_ADDRESS__)
    const QString limit;
#else
    const QString limit = "ulimit -v 2097152; ";
#endif
    const QString cmd = limit + QString("exec '%1' eval --weights '%2' --device cpu").arg(TRAINLAB_CLI_PATH, file);
    QProcess p;
    p.start("/bin/sh", {"-c", cmd});
    QVERIFY(p.waitForFinished(60000));
    Result r;
    r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2;
    r.err = QString::fromUtf8(p.readAllStandardError());
    verify_clear_error(r, QStringList{file} + mentions, {kSecret, "memory"});
    if (QTest::currentTestFailed()) return;
    CpuBackend be(1);
    const std::string e = error_of([&] { model_from_file(be, f, "x.safetensors"); });
    QVERIFY2(has(e, "x.safetensors") && has(e, mentions.front().toStdString()), e.c_str());
  }

  // A data path in a weights file's trainlab_config is never opened (nor a piece of it printed):
  // the verbs that evaluate a file on its run's data ask for the data with --set data.path.
  void metadataNeverOpensAPath_data() {
    QTest::addColumn<QString>("verb");
    QTest::addColumn<QString>("named");
    for (const char* verb : {"eval", "prune", "quantize"}) {
      QTest::addRow("%s, a file with a secret", verb) << verb << "secret";
      QTest::addRow("%s, /dev/zero", verb) << verb << "/dev/zero";
    }
  }
  void metadataNeverOpensAPath() {
    QFETCH(QString, verb);
    QFETCH(QString, named);
    const std::string secret = path("secret.csv");
    write_text(secret, std::string(kSecret) + ",1,2\n");
    SafeTensorsFile f = m_dense;
    const std::string data = named == "secret" ? secret : named.toStdString();
    edit_json(f, "trainlab_config", [&](Json& c) { c["data"]["path"] = data; });
    const QString file = write("names-data.safetensors", f);
    const QStringList extra = verb == "prune" ? QStringList{"--rows", "8"} : QStringList{};
    Result r = cli(QStringList{verb, "--weights", file} + extra, 20000);
    verify_clear_error(r, {file, "data.path", "--set data.path="}, {kSecret, q(data)});
    if (QTest::currentTestFailed()) return;
    // The user names the data: the verb runs on it.
    r = cli(QStringList{verb, "--weights", file, "--set", q("data.path=" + m_digits)} + extra);
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
  }

  // Only regular files are read as weights: a folder, a device or a pipe given as the weights of
  // any verb is refused at once (no length read from a folder, no endless read, no blocking open).
  void onlyRegularFiles_data() {
    QTest::addColumn<QString>("kind");
    QTest::newRow("folder") << "folder";
    QTest::newRow("/dev/zero") << "/dev/zero";
    QTest::newRow("/dev/urandom") << "/dev/urandom";
    QTest::newRow("fifo") << "fifo";
  }
  void onlyRegularFiles() {
    QFETCH(QString, kind);
    QString w = kind;
    if (kind == "folder") {
      w = qpath("a-folder.safetensors");
      std::filesystem::create_directories(w.toStdString());
    } else if (kind == "fifo") {
      w = qpath("a-pipe.safetensors");
      std::filesystem::remove(w.toStdString());
      QCOMPARE(mkfifo(w.toStdString().c_str(), 0600), 0);
    }
    int i = 0;
    for (const QStringList& args : reach_points(w, kind.toStdString().substr(kind.lastIndexOf('/') + 1))) {
      const Result r = cli(args, 20000);
      verify_clear_error(r, {w, "not a regular file"});
      if (QTest::currentTestFailed()) return qWarning("verb %d: %s", i, qPrintable(args.join(' ')));
      ++i;
    }
  }

  // Every verb that reads weights refuses the same hostile file the same way (one loader).
  void everyReachPointChecks() {
    SafeTensorsFile f = m_q4;
    edit_json(f, "trainlab_quant", [](Json& q) {
      q["net.2.weight"] = {{"bits", 4}, {"granularity", "tensor"}, {"shape", {int64_t(1) << 32, int64_t(1) << 32}}};
    });
    tensor(f, "net.2.weight.qweight").shape = {0};
    tensor(f, "net.2.weight.qweight").bytes.clear();
    tensor(f, "net.2.weight.scales").shape = {1};
    tensor(f, "net.2.weight.scales").bytes.assign(2, 0);
    const QString w = write("sigfpe.safetensors", f);
    for (const QStringList& args : reach_points(w, "sigfpe")) {
      const Result r = cli(args);
      verify_clear_error(r, {w, "net.2.weight", "shape"});
      if (QTest::currentTestFailed()) return qWarning("%s", qPrintable(args.join(' ')));
    }
  }

  // The header and metadata: bounded, parsed without recursion limits being the stack's, and
  // errors that name the field without echoing the file's bytes.
  // A NaN weight has no code (converting it to int8 was undefined behaviour: fuzz_weights found
  // it): quantizing refuses the file naming the tensor and the element, in the library and the CLI.
  void nanWeightIsNotQuantized() {
    SafeTensorsFile f = m_dense;
    const float nan = std::nanf("");
    std::memcpy(tensor(f, "net.2.weight").bytes.data() + 4 * 7, &nan, sizeof nan);
    const std::string e = error_of([&] { (void)quantized(f, 4); });
    QVERIFY2(has(e, "tensor 'net.2.weight': weight 7 of 160 is NaN"), e.c_str());
    const QString w = write("nan.safetensors", f);
    verify_clear_error(cli({"quantize", "--weights", w, "--device", "cpu"}),
                       {w + ": tensor 'net.2.weight': weight 7 of 160 is NaN"});
  }

  void hostileHeaders_data() {
    QTest::addColumn<QByteArray>("header");
    QTest::addColumn<int>("data");  // bytes after the header
    QTest::addColumn<QStringList>("mentions");
    const std::string deep = std::string(100000, '[') + std::string(100000, ']');
    std::string deep_obj;
    for (int i = 0; i < 100000; ++i) deep_obj += R"({"a":)";
    deep_obj += "1" + std::string(100000, '}');
    auto md = [](const std::string& key, const std::string& value) {
      return QByteArray::fromStdString(R"({"__metadata__":{")" + key + R"(":)" + Json(value).dump() + "}}");
    };
    // nlohmann's parse errors quote the token read last: a string with a bad escape is all of it.
    const std::string bad_string = std::string("\"") + kSecret + "\\q\"";
    QTest::newRow("JSON error") << QByteArray::fromStdString(R"({"a": )" + bad_string + "}") << 0 << QStringList{"not valid JSON"};
    QTest::newRow("number out of range") << QByteArray(R"({"a": 7e7777777})") << 0 << QStringList{"not valid JSON", "out of range"};
    QTest::newRow("metadata number out of range") << md("trainlab_config", R"({"a": 7e7777777})") << 0
                                                  << QStringList{"trainlab_config", "not valid JSON", "out of range"};
    QTest::newRow("deep non-string metadata")
        << QByteArray::fromStdString(R"({"__metadata__":{"x":)" + deep + "}}") << 0 << QStringList{"header", "nested"};
    QTest::newRow("non-string metadata") << QByteArray(R"({"__metadata__":{"x":[1]}})") << 0 << QStringList{"__metadata__", "'x'"};
    QTest::newRow("deep trainlab_config") << md("trainlab_config", deep_obj) << 0 << QStringList{"trainlab_config", "nested"};
    QTest::newRow("deep trainlab_architecture") << md("trainlab_architecture", deep_obj) << 0
                                                << QStringList{"trainlab_architecture", "nested"};
    QTest::newRow("deep trainlab_quant") << md("trainlab_quant", deep_obj) << 0 << QStringList{"trainlab_quant", "nested"};
    QTest::newRow("metadata JSON error") << md("trainlab_config", R"({"a": )" + bad_string + "}") << 0
                                         << QStringList{"trainlab_config", "not valid JSON"};
    QTest::newRow("shape overflows") << QByteArray(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})")
                                     << 0 << QStringList{"'a'", "shape"};
    QTest::newRow("negative dimensions") << QByteArray(R"({"a":{"dtype":"F32","shape":[-1,-1],"data_offsets":[0,4]}})")
                                         << 4 << QStringList{"'a'", "shape"};
    QTest::newRow("fractional dimension") << QByteArray(R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})")
                                          << 4 << QStringList{"'a'", "shape"};
    QTest::newRow("escape in a name") << QByteArray("{\"a\\u001b[2J\":{\"dtype\":\"X\",\"shape\":[1],\"data_offsets\":[0,4]}}")
                                      << 4 << QStringList{"a\\x1b[2J", "dtype"};
  }
  void hostileHeaders() {
    QFETCH(QByteArray, header);
    QFETCH(int, data);
    QFETCH(QStringList, mentions);
    std::string h = header.toStdString();
    while (h.size() % 8) h += ' ';
    const std::string file = path("hostile-header.safetensors");
    write_raw(file, h, std::string(static_cast<size_t>(data), '\0'));
    const Result r = cli({"eval", "--weights", q(file), "--device", "cpu"});
    verify_clear_error(r, QStringList{q(file)} + mentions, {kSecret, "\x1b", "7777777"});
  }

  // A file the lab builds in memory (not through the reader) whose tensors hold fewer bytes than
  // their dtype and shape need is refused, not read past its end.
  void inMemoryByteCounts() {
    SafeTensorsFile f = m_q4;
    tensor(f, "net.2.weight.scales").bytes.resize(4);  // 2 of its 10 fp16 scales
    std::string e = error_of([&] { dequantize_weights(f, "mem"); });
    QVERIFY2(has(e, "mem") && has(e, "net.2.weight.scales") && has(e, "bytes"), e.c_str());
    f = m_dense;
    tensor(f, "net.0.bias").bytes.resize(8);
    CpuBackend be(1);
    e = error_of([&] { model_from_file(be, f, "mem"); });
    QVERIFY2(has(e, "mem") && has(e, "net.0.bias") && has(e, "bytes"), e.c_str());
  }
};

QTEST_GUILESS_MAIN(TestWeightsFiles)
#include "test_weights_files.moc"
