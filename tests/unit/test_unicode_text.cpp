// Text of any UTF-8 content trains the character model and saves (issue 16). The characters are
// Unicode code points, so the vocabulary is a set of whole characters: it round-trips through the
// weights file's metadata (valid UTF-8 JSON), generation prints whole characters and takes prompts
// with them. Invalid UTF-8 is refused with its byte offset, never repeated.
#include <QProcess>
#include <QtTest>
#include <filesystem>

#include "backend/cpu_backend.h"
#include "data/text.h"
#include "io/weights.h"
#include "nn/transformer.h"
#include "test_support.h"
#include "util/utf8.h"

using namespace trainlab;
using namespace trainlab::test;

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// At least `min_chars` characters of words with 1- to 4-byte characters ("é", "—", "日本", an emoji).
std::string unicode_text(size_t min_chars) {
  const char* words[] = {"café", "naïve", "—", "日本", "語", "😀", "hello", "world", "ROMEO:", "\n"};
  std::mt19937_64 rng(3);
  std::string s;
  size_t chars = 0;
  while (chars < min_chars) {
    const std::string w = words[rng() % std::size(words)];
    s += w + " ";
    chars += decode_utf8(w, "word").size() + 1;
  }
  return s;
}

struct Result {
  int code = -1;
  QByteArray out;
  QString err;
};

Result cli(const QStringList& args) {
  QProcess p;
  p.start(QStringLiteral(TRAINLAB_CLI_PATH), args);
  Result r;
  if (!p.waitForStarted(10000)) return r;
  p.closeWriteChannel();
  if (!p.waitForFinished(120000)) {
    p.kill();
    p.waitForFinished();
    r.err = "timed out";
    return r;
  }
  r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2;
  r.out = p.readAllStandardOutput();
  r.err = QString::fromUtf8(p.readAllStandardError());
  return r;
}

QString describe(const Result& r) {
  return QString("exit %1\nstdout: %2\nstderr: %3").arg(r.code).arg(QString::fromUtf8(r.out), r.err);
}

// The JSON header of a safetensors file, as its bytes are on disk.
std::string safetensors_header(const std::string& path) {
  const std::string bytes = read_text(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes.at(static_cast<size_t>(i)));
  return bytes.substr(8, n);
}

}  // namespace

class TestUnicodeText : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;
  std::string path(const std::string& name) { return m_tmp.path().toStdString() + "/" + name; }

 private slots:
  void utf8Decoding_data() {
    QTest::addColumn<QByteArray>("bytes");
    QTest::addColumn<int>("offset");  // of the invalid character; -1: valid
    QTest::addColumn<QString>("why");
    QTest::newRow("whole characters") << QByteArray("a\xc3\xa9\xe2\x80\x94\xe6\x97\xa5\xf0\x9f\x98\x80") << -1 << "";
    QTest::newRow("stray continuation") << QByteArray("ab\x80") << 2
                                        << "a continuation byte where a character should start";
    QTest::newRow("C0 lead") << QByteArray("\xc0\x80") << 0 << "a byte that never occurs in UTF-8";
    QTest::newRow("F5 lead") << QByteArray("x\xf5\x80\x80\x80") << 1 << "a byte that never occurs in UTF-8";
    QTest::newRow("overlong") << QByteArray("\xe0\x80\xaf") << 0 << "an overlong encoding";
    QTest::newRow("surrogate") << QByteArray("xy\xed\xa0\x80") << 2 << "a UTF-16 surrogate";
    QTest::newRow("past U+10FFFF") << QByteArray("\xf4\x90\x80\x80") << 0 << "a code point past U+10FFFF";
    QTest::newRow("cut by the end") << QByteArray("ab\xe6\x97") << 2
                                    << "a multi-byte character cut short by the end of the text";
    QTest::newRow("cut by ASCII") << QByteArray("\xe6x\x97") << 0 << "a multi-byte character cut short";
  }
  void utf8Decoding() {
    QFETCH(QByteArray, bytes);
    QFETCH(int, offset);
    QFETCH(QString, why);
    const std::string s(bytes.constData(), static_cast<size_t>(bytes.size()));
    const std::string e = error_of([&] { decode_utf8(s, "FILE"); });
    if (offset < 0) {
      QCOMPARE(e, std::string());
      const std::u32string cps = decode_utf8(s, "FILE");
      QCOMPARE(cps, std::u32string(U"aé—日😀"));
      QCOMPARE(encode_utf8(cps), s);
      QCOMPARE(utf8_invalid_offset(s), std::string::npos);
      return;
    }
    QVERIFY2(has(e, "FILE: not valid UTF-8 at byte offset " + std::to_string(offset) + " (" + why.toStdString()),
             e.c_str());
    QCOMPARE(utf8_invalid_offset(s), static_cast<size_t>(offset));
  }

  // Tokens are code points: the vocabulary holds whole characters, encode/decode round-trip, and
  // the split counts characters, not bytes.
  void corpusOfCodePoints() {
    const std::string text = unicode_text(40000);
    const std::u32string cps = decode_utf8(text, "text");
    const TextCorpus c = text_corpus_from_bytes(text, "text", 0.1, 1);
    for (char32_t ch : std::u32string(U"é—日本語😀ï\n :R"))
      QVERIFY2(c.chars.find(ch) != std::u32string::npos, describe_code_point(ch).c_str());
    QCOMPARE(c.vocab(), int64_t(26));  // 19 ASCII characters (space and newline included) + é ï — 日 本 語 😀
    QCOMPARE(c.train.tokens.size() + c.val.tokens.size(), cps.size());
    QCOMPARE(c.decode(c.encode(text)), text);
    QCOMPARE(TextCorpus::from_vocabulary(c.chars_utf8(), "v").chars, c.chars);
    QVERIFY(std::is_sorted(c.chars.begin(), c.chars.end()));
    // A prompt character outside the vocabulary is named (the prompt is the user's own text).
    const std::string e = error_of([&] { c.encode("日本Ω", "the prompt"); });
    QVERIFY2(has(e, "the prompt: character 'Ω' (U+03A9) at position 2 is not in the model's vocabulary of"), e.c_str());
  }

  // A text file with one invalid byte used to train byte by byte (and lose the run at the save):
  // now it is refused with the byte offset, and its bytes are not repeated.
  void invalidUtf8FileRefused() {
    std::string text = unicode_text(40000);
    const size_t at = text.find("日", 30000);  // a 3-byte character; cut it after its first byte
    text.replace(at, 3, "\xe6!");
    const std::string file = path("bad-utf8.txt");
    write_text(file, text);
    const std::string e = error_of([&] { load_text_corpus(file, 0.1, 1); });
    QVERIFY2(
        has(e, file + ": not valid UTF-8 at byte offset " + std::to_string(at) + " (a multi-byte character cut short"),
        e.c_str());
  }

  // The vocabulary is bounded (it sizes the embedding), and the text counts characters, not bytes.
  void vocabularyBounds() {
    const std::string one = path("one.txt"), many = path("many.txt"), short_text = path("short.txt");
    write_text(one, std::string(40000, 'a'));
    std::string e = error_of([&] { load_text_corpus(one, 0.1, 1); });
    QVERIFY2(has(e, one + ": the text has 1 distinct characters (expected from 2 to 65536"), e.c_str());
    std::u32string distinct;  // 70000 distinct characters from U+4E00 on (CJK and beyond, no surrogates)
    for (char32_t cp = 0x4E00; distinct.size() < 70000; ++cp)
      if (cp < 0xD800 || cp > 0xDFFF) distinct.push_back(cp);
    write_text(many, QString::fromUcs4(distinct.data(), static_cast<qsizetype>(distinct.size())).toStdString());
    e = error_of([&] { load_text_corpus(many, 0.1, 1); });
    QVERIFY2(has(e, many + ": the text has 70000 distinct characters (expected from 2 to 65536"), e.c_str());
    // 33000 bytes, but 31000 characters: too short for two chunks of 16384 characters.
    std::string text = std::string(15000, 'a') + std::string(15000, 'b');
    for (int i = 0; i < 1000; ++i) text += "日";
    write_text(short_text, text);
    e = error_of([&] { load_text_corpus(short_text, 0.1, 1); });
    QVERIFY2(has(e, short_text + ": the text has 31000 characters; at least 32768 are needed"), e.c_str());
  }

  // The vocabulary in the weights file's metadata is valid UTF-8 JSON, and reads back whole.
  void vocabularyThroughWeightsFile() {
    const TextCorpus corpus = text_corpus_from_bytes(unicode_text(40000), "text", 0.1, 1);
    CpuBackend be(1);
    CharGptConfig cfg;
    cfg.vocab = corpus.vocab(), cfg.layers = 1, cfg.heads = 2, cfg.dim = 16, cfg.context = 8;
    cfg.chars = corpus.chars_utf8();
    CharGpt model(be, cfg, 1);
    const std::string file = path("unicode.safetensors");
    const std::string e = error_of([&] { save_model_weights(be, model, Config(), file); });
    QCOMPARE(e, std::string());
    const std::string header = safetensors_header(file);
    QCOMPARE(utf8_invalid_offset(header), std::string::npos);
    const Json arch =
        Json::parse(Json::parse(header).at("__metadata__").at("trainlab_architecture").get<std::string>());
    QCOMPARE(arch.at("chars").get<std::string>(), cfg.chars);
    auto loaded = load_model_file(be, file);
    const auto* gpt = dynamic_cast<CharGpt*>(loaded.get());
    QVERIFY(gpt);
    QCOMPARE(gpt->config().chars, cfg.chars);
    QCOMPARE(TextCorpus::from_vocabulary(gpt->config().chars, "v").chars, corpus.chars);
  }

  // A stored vocabulary that is not whole, distinct, ascending characters is refused by name.
  void storedVocabularyChecked() {
    CharGptConfig c;
    c.vocab = 2;
    c.chars = "a\xc3";  // a character's first byte, as the byte-wise vocabulary stored it
    std::string e = error_of([&] { c.validate(); });
    QVERIFY2(has(e, "char-gpt: the stored vocabulary: not valid UTF-8 at byte offset 1"), e.c_str());
    c.chars = "ba";
    e = error_of([&] { c.validate(); });
    QVERIFY2(has(e, "repeats or is out of order"), e.c_str());
    c.chars = "日本";
    QCOMPARE(error_of([&] { c.validate(); }), std::string());
    c.chars = "日本語";
    e = error_of([&] { c.validate(); });
    QVERIFY2(has(e, "the stored vocabulary has 3 characters, vocab says 2"), e.c_str());
  }

  // The reported defect, end to end with the CLI: a run on text with "é", "—", "日本" and an emoji
  // used to train and then fail at the save (exit 1, no weights, no summary). It completes, and
  // generate continues a prompt of those characters with whole characters of the vocabulary.
  void trainSaveGenerate() {
    const std::string text = unicode_text(40000), file = path("unicode.txt"), run = path("unicode-run");
    write_text(file, text);
    Result r = cli({"train", "--model", "char-gpt", "--set", "model.preset=tiny", "--set", "data.name=text", "--set",
                    QString::fromStdString("data.path=" + file), "--steps", "3", "--batch", "4", "--device", "cpu",
                    "--out", QString::fromStdString(run)});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    QCOMPARE(read_json(run + "/summary.json").at("status").get<std::string>(), std::string("completed"));
    const std::string prompt = "日本 é—😀";
    r = cli({"generate", "--weights", QString::fromStdString(run + "/model.safetensors"), "--prompt",
             QString::fromStdString(prompt), "--tokens", "80", "--temperature", "1", "--device", "cpu", "--json"});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    const std::string out = r.out.toStdString();
    QCOMPARE(utf8_invalid_offset(out), std::string::npos);
    const std::string generated = Json::parse(out).at("text").get<std::string>();
    const std::u32string chars = decode_utf8(generated, "generated");
    QCOMPARE(chars.size(), size_t(80));
    const std::u32string vocab = text_corpus_from_bytes(text, "text", 0.1, 1).chars;
    for (char32_t ch : chars) QVERIFY2(vocab.find(ch) != std::u32string::npos, describe_code_point(ch).c_str());
    // A prompt character the text never had: an error naming it.
    r = cli({"generate", "--weights", QString::fromStdString(run + "/model.safetensors"), "--prompt", "日本Ω",
             "--tokens", "5", "--device", "cpu"});
    QVERIFY2(r.code == 1, qPrintable(describe(r)));
    QVERIFY2(r.err.contains("the prompt: character 'Ω' (U+03A9) at position 2 is not in the model's vocabulary"),
             qPrintable(describe(r)));
  }
};

QTEST_APPLESS_MAIN(TestUnicodeText)
#include "test_unicode_text.moc"
