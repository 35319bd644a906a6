// Weights files: safetensors written and read back; the bytes checked against the format's spec
// (8-byte little-endian header length N, N bytes of JSON with dtype / shape / data_offsets per
// tensor, padded to a multiple of 8, then the data, covered exactly by contiguous offsets); the
// names and shapes of PyTorch's nn.Sequential MLP; malformed files rejected with the path named.
#include <QtTest>
#include <cstring>
#include <filesystem>

#include "io/safetensors.h"
#include "io/weights.h"
#include "nn/model.h"
#include "train/run_record.h"
#include "test_support.h"

using namespace trainlab;
using namespace trainlab::test;

namespace {

struct Parsed {
  uint64_t header_len = 0;
  nlohmann::ordered_json header;
  std::string data;
};

// An independent reader of the raw bytes, following the spec.
Parsed parse_raw(const std::string& path) {
  const std::string bytes = read_text(path);
  Parsed p;
  if (bytes.size() < 8) return p;
  for (int i = 0; i < 8; ++i) p.header_len |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  p.header = nlohmann::ordered_json::parse(bytes.substr(8, p.header_len));
  p.data = bytes.substr(8 + p.header_len);
  return p;
}

SafeTensor tensor(const std::string& name, const std::string& dtype, Shape shape, size_t elem) {
  SafeTensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.bytes.resize(static_cast<size_t>(shape_numel(t.shape)) * elem);
  for (size_t i = 0; i < t.bytes.size(); ++i) t.bytes[i] = static_cast<uint8_t>(i * 31 + name.size());
  return t;
}

}  // namespace

class TestSafetensors : public QObject {
  Q_OBJECT
 private slots:
  void roundTripAndLayout() {
    QTemporaryDir tmp;
    const std::string path = tmp.path().toStdString() + "/t.safetensors";
    SafeTensorsFile f;
    f.tensors.push_back(tensor("a.weight", "F32", {3, 5}, 4));
    f.tensors.push_back(tensor("a.bias", "F32", {3}, 4));
    f.tensors.push_back(tensor("h", "BF16", {7}, 2));  // 14 bytes: the next offset is not 4-aligned
    f.tensors.push_back(tensor("q", "I8", {2, 3}, 1));
    f.metadata["format"] = "pt";
    write_safetensors(path, f);

    const SafeTensorsFile r = read_safetensors(path);
    QCOMPARE(r.tensors.size(), f.tensors.size());
    for (size_t i = 0; i < f.tensors.size(); ++i) {
      QCOMPARE(r.tensors[i].name, f.tensors[i].name);
      QCOMPARE(r.tensors[i].dtype, f.tensors[i].dtype);
      QVERIFY(r.tensors[i].shape == f.tensors[i].shape);
      QVERIFY(r.tensors[i].bytes == f.tensors[i].bytes);
    }
    QCOMPARE(r.metadata.at("format"), std::string("pt"));

    // The raw layout, by the spec.
    const Parsed p = parse_raw(path);
    QCOMPARE(p.header_len % 8, uint64_t(0));  // the data starts 8-byte aligned
    QVERIFY(p.header.is_object());
    QCOMPARE(p.header.at("__metadata__").at("format").get<std::string>(), std::string("pt"));
    uint64_t expect = 0;
    size_t i = 0;
    for (auto it = p.header.begin(); it != p.header.end(); ++it) {
      if (it.key() == "__metadata__") continue;
      const auto& e = it.value();
      QCOMPARE(e.size(), size_t(3));  // dtype, shape, data_offsets and nothing else
      const auto off = e.at("data_offsets").get<std::vector<uint64_t>>();
      QCOMPARE(off.size(), size_t(2));
      QCOMPARE(off[0], expect);  // contiguous, in order, from 0
      QCOMPARE(off[1] - off[0], uint64_t(f.tensors[i].bytes.size()));
      QVERIFY(std::memcmp(p.data.data() + off[0], f.tensors[i].bytes.data(), f.tensors[i].bytes.size()) == 0);
      expect = off[1];
      ++i;
    }
    QCOMPARE(i, f.tensors.size());
    QCOMPARE(uint64_t(p.data.size()), expect);  // no trailing bytes
    QVERIFY(!std::filesystem::exists(path + ".part"));
  }

  // A trained model's file: PyTorch's names ([out, in] weights), F32, architecture in metadata,
  // and loading it back gives the same parameters.
  void modelWeightsLikePyTorch() {
    QTemporaryDir tmp;
    const std::string path = tmp.path().toStdString() + "/model.safetensors";
    auto be = create_backend("cpu");
    Mlp model(*be, {64, 256, 256, 10}, Activation::ReLU, 9);
    model.set_compute_dtype(*be, DType::BF16);  // the file holds the fp32 masters
    save_model_weights(*be, model, Config(), path);
    const Parsed p = parse_raw(path);
    const std::vector<std::pair<std::string, Shape>> expected{{"net.0.weight", {256, 64}}, {"net.0.bias", {256}},
                                                              {"net.2.weight", {256, 256}}, {"net.2.bias", {256}},
                                                              {"net.4.weight", {10, 256}}, {"net.4.bias", {10}}};
    size_t n = 0;
    for (auto it = p.header.begin(); it != p.header.end(); ++it)
      if (it.key() != "__metadata__") ++n;
    QCOMPARE(n, expected.size());
    for (const auto& [name, shape] : expected) {
      QVERIFY2(p.header.contains(name), name.c_str());
      QCOMPARE(p.header.at(name).at("dtype").get<std::string>(), std::string("F32"));
      QVERIFY(p.header.at(name).at("shape").get<Shape>() == shape);
    }
    const Json arch = Json::parse(p.header.at("__metadata__").at("trainlab_architecture").get<std::string>());
    QCOMPARE(arch.at("kind").get<std::string>(), std::string("mlp"));
    QVERIFY(arch.at("sizes").get<std::vector<int64_t>>() == std::vector<int64_t>({64, 256, 256, 10}));
    QVERIFY(p.header.at("__metadata__").contains("trainlab_config"));

    // net.0.weight row 1 column 2 is element [1 * 64 + 2] of the [out, in] layout.
    const SafeTensorsFile f = read_safetensors(path);
    float v;
    std::memcpy(&v, f.find("net.0.weight")->bytes.data() + (64 + 2) * 4, 4);
    QCOMPARE(v, download_f32(*be, model.find_parameter("net.0.weight")->master)[66]);

    Mlp other(*be, {64, 256, 256, 10}, Activation::ReLU, 10);
    load_model_weights(*be, other, path);
    for (Parameter* q : other.parameters())
      QVERIFY(download_f32(*be, q->master) == download_f32(*be, model.find_parameter(q->name)->master));
    Mlp wrong(*be, {64, 128, 10}, Activation::ReLU, 1);
    const std::string e = error_of([&] { load_model_weights(*be, wrong, path); });
    QVERIFY2(e.find(path) != std::string::npos && e.find("net.0.weight") != std::string::npos, e.c_str());
  }

  void malformedFiles_data() {
    QTest::addColumn<QByteArray>("bytes");
    QTest::addColumn<QString>("expect");
    auto file = [](const std::string& header, size_t data) {
      std::string s(8, '\0');
      for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((header.size() >> (8 * i)) & 0xFF);
      return QByteArray::fromStdString(s + header + std::string(data, '\0'));
    };
    QTest::newRow("short") << QByteArray("abc") << "shorter than";
    QTest::newRow("length beyond the file") << file("{}", 0).left(9) << "does not fit";
    QTest::newRow("not json") << file("{oops", 0) << "not valid JSON";
    QTest::newRow("offsets outside")
        << file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4) << "outside the file";
    QTest::newRow("size mismatch")
        << file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8) << "needs 12";
    QTest::newRow("hole")
        << file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8) << "hole";
    QTest::newRow("trailing")
        << file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8) << "trailing";
    QTest::newRow("unknown dtype")
        << file(R"({"a":{"dtype":"X9","shape":[1],"data_offsets":[0,4]}})", 4) << "unknown dtype";
  }
  void malformedFiles() {
    QFETCH(QByteArray, bytes);
    QFETCH(QString, expect);
    QTemporaryDir tmp;
    const std::string path = tmp.path().toStdString() + "/bad.safetensors";
    write_text(path, bytes.toStdString());
    const std::string e = error_of([&] { read_safetensors(path); });
    QVERIFY2(e.find(path) != std::string::npos, e.c_str());
    QVERIFY2(e.find(expect.toStdString()) != std::string::npos, e.c_str());
  }

  void missingFile() {
    const std::string e = error_of([] { read_safetensors("/nonexistent/model.safetensors"); });
    QVERIFY2(e.find("/nonexistent/model.safetensors") != std::string::npos, e.c_str());
  }
};

QTEST_APPLESS_MAIN(TestSafetensors)
#include "test_safetensors.moc"
