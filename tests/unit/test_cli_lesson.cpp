// trainlab-cli lesson as a user runs it (QProcess on the built binary): --list names every lesson
// and its inputs; --json prints one object with the inputs and every figure, the same numbers as
// the library (lessons/lesson.h) and as the text table; --set changes an input; a bad input, an
// unknown key or lesson is an error line naming it, with a non-zero exit.
#include <QtTest>

#include "cli_support.h"
#include "lessons/lesson.h"

using namespace trainlab;
using namespace trainlab::test;

namespace {

CliResult cli(const QStringList& args) { return run_cli(QStringList{"lesson"} + args, 120000); }


nlohmann::json json_of(const CliResult& r) { return nlohmann::json::parse(r.out.toStdString()); }

}  // namespace

class TestCliLesson : public QObject {
  Q_OBJECT

 private slots:
  void help() {
    const CliResult r = cli({"--help"});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    for (const char* opt : {"--list", "--set", "--json"}) QVERIFY2(r.out.contains(opt), opt);
  }

  void listNamesEveryLessonAndInput() {
    const CliResult r = cli({"--list"});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    for (const Lesson& l : lesson_registry()) {
      QVERIFY2(r.out.contains(QString::fromStdString(l.name)), l.name.c_str());
      for (const LessonInput& in : l.inputs) QVERIFY2(r.out.contains(QString::fromStdString(in.key)), in.key.c_str());
    }
  }

  // accumulate at its defaults: fp16 stalls at 0.25 and bf16 at 0.03125 (test_lessons.cpp works
  // them out); every figure of the library is in the object, with the same value.
  void jsonAtDefaults() {
    const CliResult r = cli({"accumulate", "--json"});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    const nlohmann::json j = json_of(r);
    QCOMPARE(j.at("lesson").get<std::string>(), std::string("accumulate"));
    QCOMPARE(j.at("inputs").at("n").get<int64_t>(), int64_t{10000});
    QCOMPARE(j.at("inputs").at("value").get<double>(), 1e-4);
    QCOMPARE(j.at("figures").at("fp16.stalled_at").get<double>(), 0.25);
    QCOMPARE(j.at("figures").at("bf16.stalled_at").get<double>(), 0.03125);
    QVERIFY(j.at("figures").at("fp32.stalled_at").is_null());  // never stalls
    const LessonResult lib = run_lesson(find_lesson("accumulate"), {});
    QCOMPARE(j.at("figures").size(), lib.figures.size());
    for (const auto& f : lib.figures)
      if (std::isfinite(f.value)) QCOMPARE(j.at("figures").at(f.key).get<double>(), f.value);
    QCOMPARE(j.at("plot").at("series").size(), lib.plot.series.size());
  }

  // --set n=1000 --set value=0.0009765625 (2^-10): fp16 adds exactly, 1000/1024 = 0.9765625.
  void setChangesTheInputs() {
    const CliResult r = cli({"accumulate", "--set", "n=1000", "--set", "value=0.0009765625", "--json"});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    const nlohmann::json j = json_of(r);
    QCOMPARE(j.at("inputs").at("n").get<int64_t>(), int64_t{1000});
    QCOMPARE(j.at("figures").at("fp16.sum").get<double>(), 0.9765625);
    QCOMPARE(j.at("figures").at("fp16.stall_step").get<double>(), 0.0);
  }

  // Every lesson runs from the command line at its defaults and prints its figures as a table.
  void everyLessonPrintsItsFigures() {
    for (const Lesson& l : lesson_registry()) {
      const CliResult r = cli({QString::fromStdString(l.name)});
      QVERIFY2(r.code == 0, qPrintable(describe(r)));
      QVERIFY(r.out.contains(QString::fromStdString(l.title)));
      const LessonResult lib = run_lesson(l, {});
      for (const auto& f : lib.figures) QVERIFY2(r.out.contains(QString::fromStdString(f.key)), f.key.c_str());
    }
  }

  // A figure with no value (fp32 never stalls) reads "none" as in the Lessons view, not "nan".
  void noValueReadsNone() {
    const CliResult r = cli({"accumulate"});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    QVERIFY(!r.out.contains("nan"));
    QVERIFY(QRegularExpression("fp32\\.stalled_at .* none\\n").match(r.out).hasMatch());
  }

  void badInputsFail() {
    struct Case {
      QStringList args;
      QString error;
    };
    const Case cases[] = {
        {{"accumulate", "--set", "n=0"}, "input 'n' (copies N): expected an integer in [1, 1e+06]"},
        {{"accumulate", "--set", "n=nan"}, "input 'n'"},
        {{"small-values", "--set", "k=41"}, "input 'k' (scale exponent k): expected an integer in [0, 40]"},
        {{"group-quant", "--set", "bits=3"}, "unknown input 'bits'; the inputs are group, std, seed"},
        {{"group-quant", "--set", "group"}, "--set expects key=value"},
        {{"quant-outlier", "--set", "rows=8", "--set", "outlier_row=9"}, "input 'outlier_row'"},
        {{"teleport"}, "unknown lesson 'teleport'; the lessons are accumulate"},
        {{}, "name a lesson"},
    };
    for (const Case& c : cases) {
      const CliResult r = cli(c.args);
      QVERIFY2(r.code != 0, qPrintable(describe(r)));
      QVERIFY2(r.err.contains(c.error), qPrintable(describe(r)));
    }
  }
};

QTEST_APPLESS_MAIN(TestCliLesson)
#include "test_cli_lesson.moc"
