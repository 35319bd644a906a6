// Tags and notes of a run (train/run_notes.h): notes.json in the run's folder, tags parsed from
// "a, b" text, bad files read as no notes with a warning naming the file and field, writes refused
// outside a run folder, and notes.json a run's own file (Overwrite clears it).
#include <QtTest>
#include <filesystem>

#include "test_support.h"
#include "train/run_notes.h"
#include "train/run_record.h"

using namespace trainlab;
using namespace trainlab::test;

class TestRunNotes : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir m_tmp;
  std::string dir(const char* name) {
    const std::string d = m_tmp.path().toStdString() + "/" + name;
    std::filesystem::create_directories(d);
    write_text(d + "/config.json", "{}\n");
    return d;
  }

 private slots:
  void tagsFromText() {
    QCOMPARE(parse_tags(" a, b ,,a, long tag "), (std::vector<std::string>{"a", "b", "long tag"}));
    QVERIFY(parse_tags("  , ").empty());
    const std::string e = error_of([] { parse_tags(std::string(65, 't')); });
    QVERIFY2(e.find("at most 64") != std::string::npos, e.c_str());
  }

  void writtenAndReadBack() {
    const std::string d = dir("run");
    write_run_notes(d, {{"x", "y"}, "a note"});
    std::vector<std::string> w;
    const RunNotes n = read_run_notes(d, w);
    QVERIFY(w.empty());
    QCOMPARE(n.tags, (std::vector<std::string>{"x", "y"}));
    QCOMPARE(n.notes, std::string("a note"));
    write_run_notes(d, {});  // nothing left: the file goes
    QVERIFY(!std::filesystem::exists(d + "/notes.json"));
    QVERIFY(is_run_file("notes.json"));
  }

  void badFilesAreIgnoredWithAWarning() {
    const std::string d = dir("bad");
    for (const char* text : {"[1]", "{\"tags\": \"x\"}", "{\"tags\": [1]}", "{\"notes\": 3}", "{not json"}) {
      write_text(d + "/notes.json", text);
      std::vector<std::string> w;
      QVERIFY(read_run_notes(d, w).empty());
      QCOMPARE(w.size(), size_t(1));
      QVERIFY2(w[0].find(d + "/notes.json") != std::string::npos && w[0].find("ignored") != std::string::npos,
               w[0].c_str());
    }
    const std::string e = error_of([&] { write_run_notes(m_tmp.path().toStdString(), {{"x"}, ""}); });
    QVERIFY2(e.find("not a run folder") != std::string::npos, e.c_str());
  }
};

QTEST_GUILESS_MAIN(TestRunNotes)
#include "test_run_notes.moc"
