// ctest-labels: unit;dist;no-asan
// The staged communicator (dist.transport mpi, dist/staged_communicator.h) on CPU ranks, where
// staging is a host-to-host copy: this executable under `mpirun --allow-run-as-root --oversubscribe
// -np N` (N = 2 and 3) runs every collective on the staged communicator and on the plain MPI one
// with the same inputs and requires the same bits:
//   * all-reduce in fp32 and bf16 (random values: the order of the additions shows), three in
//     flight at once, and staging memory that a second round of the same calls does not grow;
//   * reduce-scatter and all-gather (from a buffer and in place) with uneven counts, one of them 0;
//   * broadcast from the last rank;
//   * point to point round a ring (each rank sends to the next and receives from the one before,
//     fp32 and bf16 in flight at once): the sender's values arrive, on both communicators; a send
//     on a one-rank group is an error naming the ranks;
//   * sub-communicators (split: colour rank % 2, keys reversed), themselves staged;
//   * the bytes counted, equal to the MPI communicator's; host values delegated;
//   * a rank that does not join: rank 0's wait gives up with the MPI communicator's message.
// Skipped when mpirun is absent or the build has no MPI.
#include <QProcess>
#include <QStandardPaths>
#include <QtTest>
#include <cstdio>
#include <cstring>

#include "backend/cpu_backend.h"
#include "dist/staged_communicator.h"
#include "dist/world.h"
#include "test_support.h"

using namespace trainlab;
using namespace trainlab::test;
using namespace trainlab::dist;

namespace {

// --- the worker (this executable under mpirun) -------------------------------------------------

struct Checks {
  int rank = 0, failed = 0;
  void operator()(bool ok, const std::string& what) {
    if (ok) return;
    ++failed;
    std::fprintf(stderr, "FAIL rank %d: %s\n", rank, what.c_str());
  }
};

Tensor values(Backend& be, int64_t n, DType dt, uint64_t seed) {
  Tensor t = be.empty({n}, dt, MemCategory::Workspace);
  const std::vector<float> v = random_vector(static_cast<size_t>(n), seed, -3.0f, 3.0f);
  if (n > 0) be.upload(t, v.data(), DType::F32);
  return t;
}

Tensor clone(Backend& be, const Tensor& t) {
  Tensor c = be.empty(t.shape(), t.dtype(), MemCategory::Workspace);
  if (t.numel() > 0) be.copy(t, c);
  return c;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.bytes() == b.bytes() && (a.bytes() == 0 || std::memcmp(a.raw(), b.raw(), a.bytes()) == 0);
}

int64_t comm_bytes(Backend& be) {
  return be.ledger().snapshot().current[static_cast<size_t>(MemCategory::Communication)];
}

// Uneven counts with a zero: {3, 0}, {3, 0, 7}, ...
std::vector<int64_t> uneven(int n) {
  std::vector<int64_t> c(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) c[static_cast<size_t>(i)] = i == 1 ? 0 : 3 + 2 * i;
  return c;
}

int64_t offset_of(const std::vector<int64_t>& counts, int rank) {
  int64_t at = 0;
  for (int i = 0; i < rank; ++i) at += counts[static_cast<size_t>(i)];
  return at;
}

void all_reduces(Backend& be, Communicator& plain, Communicator& staged, Checks& ck) {
  for (DType dt : {DType::F32, DType::BF16}) {
    Tensor a = values(be, 1000, dt, 100 + static_cast<uint64_t>(plain.rank())), b = clone(be, a), before = clone(be, a);
    plain.all_reduce(a)->wait();
    staged.all_reduce(b)->wait();
    ck(same_bits(a, b) && !same_bits(a, before), std::string("all-reduce, ") + dtype_name(dt));
  }
  // Three in flight at once (data parallelism's buckets), twice: the second round reuses the
  // first's staging buffers.
  int64_t after_first = 0;
  for (int round = 0; round < 2; ++round) {
    std::vector<Tensor> p, s;
    std::vector<CommHandle> hp, hs;
    for (int64_t n : {1000, 3000, 500}) {
      p.push_back(values(be, n, DType::F32, static_cast<uint64_t>(n + plain.rank() + 10 * round)));
      s.push_back(clone(be, p.back()));
      hp.push_back(plain.all_reduce(p.back()));
      hs.push_back(staged.all_reduce(s.back()));
    }
    for (size_t i = 0; i < p.size(); ++i) {
      hp[i]->wait();
      while (!hs[i]->test()) {
      }
      ck(same_bits(p[i], s[i]), "all-reduce " + std::to_string(i) + " of three in flight, round " + std::to_string(round));
    }
    if (round == 0) after_first = comm_bytes(be);
  }
  ck(after_first >= 4 * (1000 + 3000 + 500) && comm_bytes(be) == after_first,
     "staging memory " + std::to_string(after_first) + " B after one round, " + std::to_string(comm_bytes(be)) +
         " B after two");
}

void scatters_and_gathers(Backend& be, Communicator& plain, Communicator& staged, Checks& ck) {
  const int r = plain.rank();
  const std::vector<int64_t> counts = uneven(plain.size());
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  const int64_t mine = counts[static_cast<size_t>(r)];
  for (DType dt : {DType::F32, DType::BF16}) {
    Tensor in = values(be, total, dt, 200 + static_cast<uint64_t>(r));
    Tensor po = be.empty({mine}, dt, MemCategory::Workspace), so = be.empty({mine}, dt, MemCategory::Workspace);
    plain.reduce_scatter(in, po, counts)->wait();
    staged.reduce_scatter(in, so, counts)->wait();
    ck(same_bits(po, so), std::string("reduce-scatter, uneven, ") + dtype_name(dt));
  }
  Tensor part = values(be, mine, DType::F32, 300 + static_cast<uint64_t>(r));
  Tensor pw = be.empty({total}, DType::F32, MemCategory::Workspace), sw = clone(be, pw);
  be.fill(pw, -1.0f);
  be.fill(sw, -2.0f);
  plain.all_gather(part, pw, counts)->wait();
  staged.all_gather(part, sw, counts)->wait();
  ck(same_bits(pw, sw), "all-gather, uneven");
  // In place: this rank's part of the whole is the input.
  Tensor pi = be.empty({total}, DType::F32, MemCategory::Workspace), si = be.empty({total}, DType::F32, MemCategory::Workspace);
  be.fill(pi, -3.0f);
  be.fill(si, -4.0f);
  Tensor pown = element_range(pi, offset_of(counts, r), offset_of(counts, r) + mine);
  Tensor sown = element_range(si, offset_of(counts, r), offset_of(counts, r) + mine);
  if (mine > 0) {
    be.copy(part, pown);
    be.copy(part, sown);
  }
  plain.all_gather(pown, pi, counts)->wait();
  staged.all_gather(sown, si, counts)->wait();
  ck(same_bits(pi, si) && same_bits(pw, si), "all-gather in place, uneven");
}

void broadcasts(Backend& be, Communicator& plain, Communicator& staged, Checks& ck) {
  const int root = plain.size() - 1;
  Tensor p = values(be, 33, DType::F32, 400 + static_cast<uint64_t>(plain.rank())), s = clone(be, p),
         before = clone(be, p);
  plain.broadcast(p, root)->wait();
  staged.broadcast(s, root)->wait();
  ck(same_bits(p, s) && (plain.rank() == root) == same_bits(p, before), "broadcast from rank " + std::to_string(root));
}

void point_to_point(Backend& be, Communicator& plain, Communicator& staged, Checks& ck) {
  const int r = plain.rank(), n = plain.size(), next = (r + 1) % n, prev = (r + n - 1) % n;
  for (Communicator* c : {&plain, &staged}) {
    const uint64_t seed = static_cast<uint64_t>(r), from = static_cast<uint64_t>(prev);
    Tensor a = values(be, 45, DType::F32, 700 + seed), b = values(be, 20, DType::BF16, 800 + seed);
    Tensor ra = be.empty({45}, DType::F32, MemCategory::Workspace);
    Tensor rb = be.empty({20}, DType::BF16, MemCategory::Workspace);
    be.fill(ra, -1.0f);
    be.fill(rb, -1.0f);
    CommHandle sa = c->send(a, next), sb = c->send(b, next), qa = c->recv(ra, prev), qb = c->recv(rb, prev);
    for (CommHandle* h : {&sa, &sb, &qa, &qb}) (*h)->wait();
    ck(same_bits(ra, values(be, 45, DType::F32, 700 + from)) && same_bits(rb, values(be, 20, DType::BF16, 800 + from)),
       c->kind() + ": send and receive round the ring");
  }
  const std::string e = error_of([&] { make_single_rank(be)->send(values(be, 1, DType::F32, 1), 0); });
  ck(e.find("a send with rank 0 from rank 0 of a group of 1: expected another rank of the group") != std::string::npos,
     "send on one rank: '" + e + "'");
}

void groups(Backend& be, Communicator& plain, Communicator& staged, Checks& ck) {
  const int r = plain.rank();
  auto ps = plain.split(r % 2, -r), ss = staged.split(r % 2, -r);
  ck(ss->kind() == "mpi-staged" && ss->rank() == ps->rank() && ss->size() == ps->size() &&
         ss->size() == (plain.size() + 1 - r % 2) / 2,
     "split: place " + std::to_string(ss->rank()) + " of " + std::to_string(ss->size()));
  Tensor a = values(be, 77, DType::F32, 500 + static_cast<uint64_t>(r)), b = clone(be, a);
  ps->all_reduce(a)->wait();
  ss->all_reduce(b)->wait();
  ck(same_bits(a, b), "all-reduce over a group");
  std::vector<int64_t> counts(static_cast<size_t>(ps->size()));
  for (size_t i = 0; i < counts.size(); ++i) counts[i] = static_cast<int64_t>(i) + 2;
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  Tensor part = values(be, counts[static_cast<size_t>(ps->rank())], DType::F32, 600 + static_cast<uint64_t>(r));
  Tensor pw = be.empty({total}, DType::F32, MemCategory::Workspace), sw = be.empty({total}, DType::F32, MemCategory::Workspace);
  ps->all_gather(part, pw, counts)->wait();
  ss->all_gather(part, sw, counts)->wait();
  ck(same_bits(pw, sw), "all-gather over a group");
  ck(ss->bytes_sent() == ps->bytes_sent(), "bytes over a group");
}

// Rank 0 waits for an all-reduce the others join only after its timeout: the same message from
// both communicators, then the others join and the abandoned collective completes.
std::string timed_out(Backend& be, Communicator& world, Communicator& c) {
  Tensor t = values(be, 1024, DType::F32, 7);
  std::string message;
  CommHandle h;
  if (world.rank() == 0) {
    h = c.all_reduce(t);
    message = error_of([&] { h->wait(); });
  }
  world.barrier();
  if (world.rank() == 0)
    h->wait();
  else
    c.all_reduce(t)->wait();
  return message;
}

void timeouts(Backend& be, Communicator& plain, Checks& ck) {
  constexpr double kTimeout = 0.3;
  auto short_plain = make_world(launch_info(), be, kTimeout, "auto")->split(0, plain.rank());
  auto short_staged = make_staged_communicator(be, short_plain->split(0, plain.rank()));
  const std::string a = timed_out(be, plain, *short_plain), b = timed_out(be, plain, *short_staged);
  if (plain.rank() != 0) return;
  ck(!b.empty() && a == b, "timeout message '" + b + "', MPI's '" + a + "'");
  ck(b.find("rank 0 of " + std::to_string(plain.size()) + ": all-reduce of 4.0 KiB did not complete within 0.3 s "
            "(dist.timeout_s)") != std::string::npos,
     "timeout message '" + b + "'");
}

int staged_worker() {
  CpuBackend be;
  auto plain = make_world(launch_info(), be, 20.0, "auto");
  const int r = plain->rank();
  auto staged = make_staged_communicator(be, plain->split(0, r));
  Checks ck{r, 0};
  ck(plain->kind() == "mpi" && staged->kind() == "mpi-staged" && staged->device() == DeviceKind::Cpu &&
         staged->rank() == r && staged->size() == plain->size(),
     "kinds and places");
  // The comparison itself catches one flipped bit.
  Tensor x = values(be, 8, DType::F32, 1), y = clone(be, x);
  static_cast<unsigned char*>(y.raw())[5] ^= 1;
  ck(!same_bits(x, y) && same_bits(x, clone(be, x)), "same_bits");
  all_reduces(be, *plain, *staged, ck);
  scatters_and_gathers(be, *plain, *staged, ck);
  broadcasts(be, *plain, *staged, ck);
  point_to_point(be, *plain, *staged, ck);
  ck(staged->bytes_sent() == plain->bytes_sent() && plain->bytes_sent() > 0,
     "bytes " + std::to_string(staged->bytes_sent()) + ", MPI's " + std::to_string(plain->bytes_sent()));
  groups(be, *plain, *staged, ck);
  double v[2] = {double(r), -double(r)};
  staged->all_reduce_host(v, HostReduce::Max);
  ck(v[0] == plain->size() - 1 && v[1] == 0.0, "host values");
  timeouts(be, *plain, ck);
  plain->barrier();
  if (ck.failed == 0) std::printf("OK rank %d\n", r);
  return ck.failed == 0 ? 0 : 1;
}

QString mpirun_path() { return QStandardPaths::findExecutable("mpirun"); }

}  // namespace

class TestStagedComm : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    if (mpirun_path().isEmpty() || !dist::built_with_mpi())
      QSKIP("mpirun or MPI is absent: the staged communicator is not tested");
  }

  void matchesMpi_data() {
    QTest::addColumn<int>("ranks");
    QTest::newRow("2 ranks") << 2;
    QTest::newRow("3 ranks") << 3;
  }
  void matchesMpi() {
    QFETCH(int, ranks);
    QProcess p;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("OPENBLAS_NUM_THREADS", "1");
    p.setProcessEnvironment(env);
    p.start(mpirun_path(), {"--allow-run-as-root", "--oversubscribe", "-np", QString::number(ranks),
                            QCoreApplication::applicationFilePath(), "--staged-worker"});
    QVERIFY(p.waitForStarted(10000));
    if (!p.waitForFinished(60000)) {
      p.kill();
      p.waitForFinished();
      QFAIL("the ranks did not finish within 60 s");
    }
    const QString out = QString::fromUtf8(p.readAllStandardOutput()), err = QString::fromUtf8(p.readAllStandardError());
    QVERIFY2(p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0 && out.count("OK rank") == ranks,
             qPrintable(QString("exit %1\nstdout: %2\nstderr: %3").arg(p.exitCode()).arg(out, err)));
  }
};

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--staged-worker") {
    try {
      return staged_worker();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "FAIL: %s\n", e.what());
      return 1;
    }
  }
  QCoreApplication app(argc, argv);
  TestStagedComm t;
  return QTest::qExec(&t, argc, argv);
}

#include "test_staged_comm.moc"
