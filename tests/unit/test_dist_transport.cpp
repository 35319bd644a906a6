// dist.transport's decision without GPUs or MPI (dist/world.h): choose_transport for each device,
// transport, number of local ranks and GPU count (nccl where every local rank has a GPU of its own,
// staged MPI where they share, plain MPI on the CPU), rank_device's GPU for each rank (shared
// round-robin under mpi and auto, a named cuda:N only under mpi), and every error message: the key,
// the values and the fix. make_world applies the decision before it touches MPI. (The staged
// communicator itself: test_staged_comm; on a GPU: tests/gpu/test_cuda_staged.)
#include <QtTest>

#include "backend/cpu_backend.h"
#include "dist/world.h"
#include "test_support.h"

using namespace trainlab;
using namespace trainlab::test;
using namespace trainlab::dist;

namespace {

// Rank `local_rank` of `local_size` ranks on this machine, of `size` in all, under mpirun.
LaunchInfo place(int local_rank, int local_size, int size = 0) {
  LaunchInfo p;
  p.launcher = "mpirun";
  p.size = size > 0 ? size : local_size;
  p.rank = p.local_rank = local_rank;
  p.local_size = local_size;
  return p;
}

bool mentions(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

class TestDistTransport : public QObject {
  Q_OBJECT

 private slots:
  // device, transport, local ranks, ranks in all, GPUs -> the communicator's kind and whether a notice says why.
  void choice_data() {
    QTest::addColumn<bool>("cuda");
    QTest::addColumn<QString>("transport");
    QTest::addColumn<int>("local");
    QTest::addColumn<int>("size");
    QTest::addColumn<int>("gpus");
    QTest::addColumn<QString>("kind");
    QTest::addColumn<bool>("notice");
    QTest::newRow("one rank, nccl on the cpu") << false << "nccl" << 1 << 1 << 0 << "single" << false;
    QTest::newRow("one rank, cuda") << true << "auto" << 1 << 1 << 1 << "single" << false;
    QTest::newRow("cpu auto") << false << "auto" << 2 << 2 << 0 << "mpi" << false;
    QTest::newRow("cpu mpi") << false << "mpi" << 3 << 3 << 0 << "mpi" << false;
    QTest::newRow("cpu on a gpu machine") << false << "auto" << 2 << 2 << 8 << "mpi" << false;
    QTest::newRow("auto, a gpu each") << true << "auto" << 2 << 2 << 2 << "nccl" << false;
    QTest::newRow("auto, spare gpus") << true << "auto" << 2 << 2 << 8 << "nccl" << false;
    QTest::newRow("auto, one gpu") << true << "auto" << 2 << 2 << 1 << "mpi-staged" << true;
    QTest::newRow("auto, 3 ranks on 2 gpus") << true << "auto" << 3 << 3 << 2 << "mpi-staged" << true;
    QTest::newRow("auto, 2 machines of 1 gpu") << true << "auto" << 1 << 2 << 1 << "nccl" << false;
    QTest::newRow("nccl, a gpu each") << true << "nccl" << 4 << 8 << 4 << "nccl" << false;
    QTest::newRow("mpi, a gpu each") << true << "mpi" << 2 << 2 << 2 << "mpi-staged" << false;
    QTest::newRow("mpi, one gpu") << true << "mpi" << 2 << 2 << 1 << "mpi-staged" << false;
  }
  void choice() {
    QFETCH(bool, cuda);
    QFETCH(QString, transport);
    QFETCH(int, local);
    QFETCH(int, size);
    QFETCH(int, gpus);
    QFETCH(QString, kind);
    QFETCH(bool, notice);
    const TransportChoice c = choose_transport(cuda ? DeviceKind::Cuda : DeviceKind::Cpu, transport.toStdString(),
                                               place(0, local, size), gpus);
    QCOMPARE(QString(transport_name(c.transport)), kind);
    QVERIFY2(c.notice.empty() != notice, c.notice.c_str());
    if (notice) QVERIFY2(mentions(c.notice, "dist.transport auto: " + std::to_string(local) + " ranks on this machine and " +
                                                std::to_string(gpus) + " GPU") &&
                             mentions(c.notice, "not a fast one"),
                         c.notice.c_str());
  }

  void choiceErrors() {
    std::string e = error_of([] { choose_transport(DeviceKind::Cpu, "nccl", place(0, 2), 0); });
    QVERIFY2(mentions(e, "dist.transport nccl moves GPU tensors, but this rank runs on the CPU (device cpu): use "
                         "dist.transport=auto or mpi"),
             e.c_str());
    e = error_of([] { choose_transport(DeviceKind::Cuda, "nccl", place(1, 2), 1); });
    QVERIFY2(mentions(e, "dist.transport nccl needs a GPU for each rank, and there are 2 ranks on this machine and 1 GPU") &&
                 mentions(e, "use dist.transport=mpi") && mentions(e, "no more ranks on a machine than it has GPUs"),
             e.c_str());
    e = error_of([] { choose_transport(DeviceKind::Cuda, "nccl", place(0, 3), 2); });
    QVERIFY2(mentions(e, "3 ranks on this machine and 2 GPUs"), e.c_str());
    e = error_of([] { choose_transport(DeviceKind::Cuda, "gloo", place(0, 2), 2); });
    QVERIFY2(mentions(e, "dist.transport 'gloo': expected auto, nccl or mpi"), e.c_str());
  }

  // configured device, transport, local rank of local ranks, GPUs -> this rank's device.
  void rankDevice_data() {
    QTest::addColumn<QString>("device");
    QTest::addColumn<QString>("transport");
    QTest::addColumn<int>("local_rank");
    QTest::addColumn<int>("local");
    QTest::addColumn<int>("gpus");
    QTest::addColumn<QString>("want");
    QTest::newRow("one rank keeps its device") << "cuda:3" << "nccl" << 0 << 1 << 1 << "cuda:3";
    QTest::newRow("a gpu each") << "cuda" << "nccl" << 1 << 2 << 2 << "cuda:1";
    QTest::newRow("auto device, a gpu each") << "auto" << "auto" << 1 << 2 << 4 << "cuda:1";
    QTest::newRow("mpi, a gpu each") << "cuda" << "mpi" << 1 << 2 << 2 << "cuda:1";
    QTest::newRow("mpi, one gpu") << "cuda" << "mpi" << 1 << 2 << 1 << "cuda:0";
    QTest::newRow("auto, one gpu") << "cuda" << "auto" << 1 << 2 << 1 << "cuda:0";
    QTest::newRow("auto, rank 2 on 2 gpus") << "cuda" << "auto" << 2 << 3 << 2 << "cuda:0";
    QTest::newRow("auto, rank 3 on 2 gpus") << "auto" << "auto" << 3 << 4 << 2 << "cuda:1";
    QTest::newRow("mpi, a named gpu for all") << "cuda:0" << "mpi" << 1 << 2 << 1 << "cuda:0";
    QTest::newRow("cpu") << "cpu" << "auto" << 1 << 2 << 2 << "cpu";
    QTest::newRow("cpu, mpi") << "cpu" << "mpi" << 1 << 2 << 0 << "cpu";
    QTest::newRow("no gpu: cuda") << "cuda" << "auto" << 1 << 2 << 0 << "cuda:1";
    QTest::newRow("no gpu: auto falls back later") << "auto" << "nccl" << 1 << 2 << 0 << "auto";
  }
  void rankDevice() {
    QFETCH(QString, device);
    QFETCH(QString, transport);
    QFETCH(int, local_rank);
    QFETCH(int, local);
    QFETCH(int, gpus);
    QFETCH(QString, want);
    QCOMPARE(q(rank_device(device.toStdString(), place(local_rank, local), transport.toStdString(), gpus)), want);
  }

  void rankDeviceErrors() {
    std::string e = error_of([] { rank_device("cuda", place(1, 2), "nccl", 1); });
    QVERIFY2(mentions(e, "dist.transport nccl needs a GPU for each rank") && mentions(e, "use dist.transport=mpi"),
             e.c_str());
    for (const char* transport : {"auto", "nccl"}) {
      e = error_of([&] { rank_device("cuda:0", place(1, 2), transport, 1); });
      QVERIFY2(mentions(e, "device.name cuda:0 names one GPU for the 2 ranks on this machine: use cuda") &&
                   mentions(e, "or dist.transport=mpi to run them all on cuda:0"),
               e.c_str());
    }
    e = error_of([] { rank_device("cpu", place(0, 2), "nccl", 0); });
    QVERIFY2(mentions(e, "dist.transport nccl moves GPU tensors") && mentions(e, "(device cpu)"), e.c_str());
    e = error_of([] { rank_device("cuda", place(0, 2), "ucx", 2); });
    QVERIFY2(mentions(e, "dist.transport 'ucx': expected auto, nccl or mpi"), e.c_str());
  }

  // make_world decides before it asks MPI: nccl on CPU ranks fails here even without mpirun; one
  // rank needs no transport at all.
  void makeWorldDecidesFirst() {
    CpuBackend be;
    const std::string e = error_of([&] { make_world(place(0, 2), be, 1.0, "nccl"); });
    QVERIFY2(mentions(e, "dist.transport nccl moves GPU tensors, but this rank runs on the CPU"), e.c_str());
    std::string notice = "stale";
    auto one = make_world(LaunchInfo{}, be, 1.0, "nccl", &notice);
    QCOMPARE(q(one->kind()), QString("single"));
    QVERIFY(notice.empty());
  }
};

QTEST_APPLESS_MAIN(TestDistTransport)
#include "test_dist_transport.moc"
