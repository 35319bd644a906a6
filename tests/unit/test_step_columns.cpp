// steps.bin (train/step_columns.h): the per-step scalars in compressed column blocks, merged with
// metrics.jsonl by load_run. Blocks read back what was written; a torn last block (kill -9 mid
// write) is dropped silently, a corrupted one is skipped with a warning naming its byte; resume's
// cut keeps the rows up to its step; a record reads the same with or without steps.bin, and a
// record written before it (metrics.jsonl only) still reads.
#include <QtTest>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "test_support.h"
#include "train/step_columns.h"

using namespace trainlab;
using namespace trainlab::test;
namespace fs = std::filesystem;

namespace {

StepMetrics step_of(long s) {
  StepMetrics m;
  m.step = s;
  m.epoch = s / 22.5;
  m.loss = 2.0 * std::exp(-s / 300.0) + 0.01 * ((s * 7919) % 13);
  m.train_accuracy = (s % 32) / 32.0;
  m.lr = 1e-3 * (1.0 - s / 5000.0);
  m.samples_per_s = 30000 + s % 17;
  m.step_ms = 1.0 + (s % 5) * 0.001;
  m.wall_s = s * 1.7e-3;
  m.precision = "fp32";
  m.mem_current.by_category[0] = 1000;
  m.mem_peak = m.mem_predicted = m.mem_current;
  if (s % 100 == 0) m.val_loss = m.loss * 1.1;
  if (s == 250) m.event = "precision.dtype = bf16";
  if (s >= 250) m.mem_current.by_category[0] = 500;  // a slow field that changes once
  if (s >= 400) m.sparsity = 50.0;
  return m;
}

std::string blocks_of(long first, long last, size_t per_block) {
  std::string out = step_columns_file_header();
  std::vector<StepRow> rows;
  for (long s = first; s <= last; ++s) {
    rows.push_back(StepRow::of(step_of(s)));
    if (rows.size() == per_block || s == last) {
      out += encode_step_block(rows);
      rows.clear();
    }
  }
  return out;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

}  // namespace

class TestStepColumns : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;
  std::string dir(const std::string& name) { return m_tmp.path().toStdString() + "/" + name; }

  // A record written by RunRecord from the steps 1..n of step_of.
  std::string write_record(const std::string& name, long n) {
    const std::string d = dir(name);
    Config c;
    c.set("run.out", d);
    RunRecord rec(d, c);
    for (long s = 1; s <= n; ++s) rec.append(step_of(s));
    return d;
  }

 private slots:
  void blocksReadBackWhatWasWritten() {
    const StepColumnsRead r = parse_step_columns(blocks_of(1, 1000, 300), "steps.bin");
    QVERIFY(r.warnings.empty());
    QCOMPARE(r.rows.size(), size_t(1000));
    for (long s = 1; s <= 1000; ++s) {
      const StepRow& x = r.rows[static_cast<size_t>(s - 1)];
      const StepRow want = StepRow::of(step_of(s));
      QCOMPARE(x.step, s);
      QCOMPARE(x.loss, want.loss);  // f64 columns exact
      QCOMPARE(x.lr, want.lr);
      QCOMPARE(x.wall_s, want.wall_s);
      QCOMPARE(x.train_accuracy, static_cast<double>(static_cast<float>(want.train_accuracy)));
      QCOMPARE(x.step_ms, static_cast<double>(static_cast<float>(want.step_ms)));
      QCOMPARE(std::isnan(x.sparsity), s < 400);
      QVERIFY(std::isnan(x.grad_norm));
    }
  }

  // A kill mid-write leaves part of the last block: its rows are gone, silently; every cut point
  // of the last block gives the rows of the blocks before it.
  void tornLastBlockIsDroppedSilently() {
    const std::string whole = blocks_of(1, 900, 300);
    const std::string two = blocks_of(1, 600, 300);
    for (size_t cut = two.size(); cut < whole.size(); cut += 37) {
      const StepColumnsRead r = parse_step_columns(std::string_view(whole).substr(0, cut), "steps.bin");
      QVERIFY2(r.warnings.empty(), r.warnings.empty() ? "" : r.warnings[0].c_str());
      QCOMPARE(r.rows.size(), size_t(600));
      QCOMPARE(r.end_of_whole, two.size());
    }
  }

  // A flipped byte in a block's payload: that block's rows are skipped with a warning naming the
  // file and the byte where the block starts; the blocks after it still read.
  void corruptedBlockIsSkippedWithAWarning() {
    std::string bytes = blocks_of(1, 900, 300);
    const size_t first_block = step_columns_file_header().size();
    bytes[first_block + 16 + 5] ^= 0x5a;
    const StepColumnsRead r = parse_step_columns(bytes, "runs/x/steps.bin");
    QCOMPARE(r.rows.size(), size_t(600));
    QCOMPARE(r.rows.front().step, 301L);
    QCOMPARE(r.warnings.size(), size_t(1));
    QCOMPARE(q(r.warnings[0]), QString("runs/x/steps.bin block at byte %1: checksum does not match; its rows skipped")
                                   .arg(first_block));
    // Not a steps file at all: no rows, one warning, no exception.
    const StepColumnsRead junk = parse_step_columns("{\"step\": 1}\n", "runs/x/steps.bin");
    QVERIFY(junk.rows.empty() && !junk.has_header);
    QCOMPARE(q(junk.warnings.at(0)), QString("runs/x/steps.bin: not a steps file (no TLSTEPS1 header); no steps read "
                                             "from it"));
  }

  // Resume's cut: whole blocks before the step kept byte for byte, the straddling block written
  // again with its first rows, later blocks and a torn tail gone.
  void truncateKeepsTheRowsUpToTheStep() {
    const std::string path = dir("cut.bin");
    const std::string whole = blocks_of(1, 900, 300);
    write_bytes(path, whole + whole.substr(step_columns_file_header().size(), 40));  // + a torn block
    QCOMPARE(truncate_step_columns(path, 650), 650L);
    const std::string after = read_text(path);
    QCOMPARE(after.substr(0, blocks_of(1, 600, 300).size()), blocks_of(1, 600, 300));
    const StepColumnsRead r = parse_step_columns(after, path);
    QVERIFY(r.warnings.empty());
    QCOMPARE(r.rows.size(), size_t(650));
    QCOMPARE(r.rows.back().step, 650L);
    QCOMPARE(truncate_step_columns(path, 2000), 650L);  // nothing after it: unchanged
    QCOMPARE(read_text(path), after);
    QCOMPARE(truncate_step_columns(dir("absent.bin"), 5), 0L);
    QVERIFY(!fs::exists(dir("absent.bin")));
  }

  // RunRecord writes every step's scalars to steps.bin and a metrics.jsonl line only where a step
  // carries more; load_run gives every step with every field, as a record of lines alone did.
  void recordReadsTheSameAsLinesAlone() {
    const std::string d = write_record("merged", 1200);
    const std::string text = read_text(d + "/metrics.jsonl");
    const auto lines = std::count(text.begin(), text.end(), '\n');
    QVERIFY2(lines < 20, qPrintable(QString::number(lines)));  // step 1, validations, the event, the changes
    const LoadedRun run = load_run(d);
    QVERIFY(run.warnings.empty());
    QCOMPARE(run.steps.size(), size_t(1200));
    MetricsLineReader reader;  // the same steps as lines alone (the writer before steps.bin)
    MetricsLineWriter w;
    for (long s = 1; s <= 1200; ++s) {
      const StepMetrics& got = run.steps[static_cast<size_t>(s - 1)];
      const StepMetrics want = reader.read(Json::parse(w.line(step_of(s))));
      QCOMPARE(got.step, s);
      QCOMPARE(got.loss, want.loss);
      QCOMPARE(got.lr, want.lr);
      QCOMPARE(got.wall_s, want.wall_s);
      QCOMPARE(got.mem_current.total(), want.mem_current.total());
      QCOMPARE(got.precision, want.precision);
      QCOMPARE(got.val_loss.has_value(), want.val_loss.has_value());
      QCOMPARE(got.sparsity.has_value(), want.sparsity.has_value());
      QCOMPARE(q(got.event), q(want.event));
      QVERIFY(std::abs(got.train_accuracy - want.train_accuracy) < 1e-7);
    }
  }

  // A thinned read (the window's plots): about max_rows rows from steps.bin, the lowest and highest
  // loss of each bucket (a one-step spike survives), every metrics.jsonl line's step, the last step.
  void thinnedReadKeepsSpikesAndLines() {
    const std::string d = dir("thin");
    {
      Config c;
      c.set("run.out", d);
      RunRecord rec(d, c);
      for (long s = 1; s <= 20000; ++s) {
        StepMetrics m = step_of(s);
        if (s == 12345) m.loss = 40.0;
        rec.append(m);
      }
    }
    const LoadedRun run = load_run(d, 1000);
    QVERIFY(run.warnings.empty());
    QVERIFY2(run.steps.size() <= 1000 + 210, qPrintable(QString::number(run.steps.size())));
    bool spike = false;
    long vals = 0;
    for (size_t i = 0; i < run.steps.size(); ++i) {
      spike = spike || run.steps[i].loss == 40.0;
      vals += run.steps[i].val_loss ? 1 : 0;
      if (i > 0) QVERIFY(run.steps[i].step > run.steps[i - 1].step);
      QVERIFY(run.steps[i].mem_current.total() > 0);
    }
    QVERIFY(spike);
    QCOMPARE(vals, 200L);
    QCOMPARE(run.steps.back().step, 20000L);
  }

  // The thinned read decides block by block on several threads; it must keep exactly the rows a
  // read of every row then cut into buckets keeps: buckets that straddle blocks, NaN losses (a
  // NaN gives way to the next row), ties (the first stays), a corrupted block (its places left
  // empty), the steps asked for and the last row. 260 blocks: more than one thread's share.
  void thinnedReadKeepsTheBucketsOfTheWholeRead() {
    std::string bytes = step_columns_file_header();
    std::vector<StepRow> all, block;
    std::vector<size_t> block_at;
    for (long s = 1; s <= 260 * 77; ++s) {
      StepRow r = StepRow::of(step_of(s));
      if (s % 97 == 0 || (s >= 5000 && s < 5100)) r.loss = std::nan("");  // a whole bucket of NaN too
      if (s >= 9000 && s < 9400) r.loss = 1.5;                             // ties
      all.push_back(r);
      block.push_back(r);
      if (block.size() == 77) {
        block_at.push_back(bytes.size());
        bytes += encode_step_block(block);
        block.clear();
      }
    }
    const size_t bad_block = 100;
    bytes[block_at[bad_block] + 20] ^= 0x21;
    const std::vector<long> keep = {3, 7700, 15001, 99999};
    const size_t max_rows = 1000, bucket = (all.size() + max_rows / 2 - 1) / (max_rows / 2);
    std::vector<char> pick(all.size(), 0);  // the reference: the whole read's buckets
    for (size_t b = 0; b < all.size(); b += bucket) {
      size_t lo = SIZE_MAX, hi = SIZE_MAX;
      for (size_t i = b; i < std::min(b + bucket, all.size()); ++i) {
        if (i / 77 == bad_block) continue;
        if (lo == SIZE_MAX || all[i].loss < all[lo].loss || std::isnan(all[lo].loss)) lo = i;
        if (hi == SIZE_MAX || all[i].loss > all[hi].loss || std::isnan(all[hi].loss)) hi = i;
      }
      if (lo != SIZE_MAX) pick[lo] = pick[hi] = 1;
    }
    pick.back() = 1;
    std::vector<long> want_steps;
    for (size_t i = 0; i < all.size(); ++i)
      if (i / 77 != bad_block && (pick[i] || std::binary_search(keep.begin(), keep.end(), all[i].step)))
        want_steps.push_back(all[i].step);
    const StepColumnsRead r = parse_step_columns(bytes, "steps.bin", StepRowsWanted{max_rows, keep});
    QCOMPARE(r.warnings.size(), size_t(1));
    std::vector<long> got;
    for (const StepRow& x : r.rows) got.push_back(x.step);
    QCOMPARE(got, want_steps);
    for (const StepRow& x : r.rows) {  // every column of a kept row, not just its step
      const StepRow& w = all[static_cast<size_t>(x.step - 1)];
      QVERIFY(x.loss == w.loss || (std::isnan(x.loss) && std::isnan(w.loss)));
      QCOMPARE(x.wall_s, w.wall_s);
      QCOMPARE(std::isnan(x.sparsity), std::isnan(w.sparsity));
    }
    const StepColumnsRead whole = parse_step_columns(bytes, "steps.bin");  // the same file, every row
    QCOMPARE(whole.rows.size(), all.size() - 77);
    QCOMPARE(whole.rows[bad_block * 77].step, static_cast<long>((bad_block + 1) * 77 + 1));
  }

  // A block header announcing more rows than its payload could inflate to (zlib's 1032:1 at most)
  // is skipped with a warning before any row of it is allocated; the blocks after it read.
  void impossibleBlockIsSkippedUnread() {
    std::string bytes = step_columns_file_header();
    const size_t at = bytes.size();
    bytes += encode_step_block({StepRow::of(step_of(1))});
    bytes.replace(at + 4, 4, std::string("\x00\x00\x10\x00", 4));  // 1,048,576 rows in a few bytes
    bytes += blocks_of(2, 10, 300).substr(step_columns_file_header().size());
    const StepColumnsRead r = parse_step_columns(bytes, "steps.bin");
    QCOMPARE(r.rows.size(), size_t(9));
    QCOMPARE(r.rows.front().step, 2L);
    QCOMPARE(q(r.warnings.at(0)),
             QString("steps.bin block at byte %1: not a zlib block of 1048576 rows; its rows skipped").arg(at));
  }

  // A record from before steps.bin (every step a line of metrics.jsonl) reads as before, and one
  // resumed by this version (old lines, then steps.bin) reads every step once.
  void oldRecordsStillRead() {
    const std::string d = dir("old");
    fs::create_directories(d);
    write_bytes(d + "/config.json", "{\"model\": {\"name\": \"digits-mlp\"}}\n");
    std::string text;
    MetricsLineWriter w;
    for (long s = 1; s <= 500; ++s) text += w.line(step_of(s)) + "\n";
    write_bytes(d + "/metrics.jsonl", text);
    LoadedRun run = load_run(d);
    QCOMPARE(run.steps.size(), size_t(500));
    QCOMPARE(run.steps.back().mem_current.total(), 500);
    write_bytes(d + "/steps.bin", blocks_of(501, 800, 128));
    run = load_run(d);
    QVERIFY(run.warnings.empty());
    QCOMPARE(run.steps.size(), size_t(800));
    for (size_t i = 0; i < run.steps.size(); ++i) QCOMPARE(run.steps[i].step, static_cast<long>(i + 1));
    QCOMPARE(run.steps.back().mem_current.total(), 500);  // carried from the last line
    QCOMPARE(run.steps.back().precision, std::string("fp32"));
  }
};

QTEST_GUILESS_MAIN(TestStepColumns)
#include "test_step_columns.moc"
