// The layer stack of core/ (docs/DESIGN.md): each folder includes only folders below it, and
// kernels/ include nothing of core/ but util/ and tensor/. This test reads every #include "..."
// in core/ and kernels/ and fails on one that goes up the stack, naming the file and line.
//
//   util < config < tensor < backend < nn < optim < dist < plan < data < io < finetune < compress < decode
//        < train < lessons < cli
#include <QtTest>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kStack{"util", "config",   "tensor", "backend", "nn",      "optim", "dist", "plan",
                                      "data", "io",       "finetune", "compress", "decode", "train", "lessons", "cli"};

int layer_rank(const std::string& folder) {
  auto it = std::find(kStack.begin(), kStack.end(), folder);
  return it == kStack.end() ? -1 : static_cast<int>(it - kStack.begin());
}

bool is_source(const fs::path& p) {
  const std::string e = p.extension().string();
  return e == ".h" || e == ".cpp" || e == ".cu" || e == ".cuh";
}

// Violations under `root` (a checkout's top folder): "core/nn/x.h:12: nn includes train/y.h".
std::vector<std::string> layer_violations(const fs::path& root) {
  std::vector<std::string> out;
  const std::regex inc(R"(^\s*#\s*include\s*"([^"]+)\")");
  for (const char* top : {"core", "kernels"}) {
    const fs::path base = root / top;
    if (!fs::exists(base)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(base)) {
      if (!entry.is_regular_file() || !is_source(entry.path())) continue;
      const fs::path rel = fs::relative(entry.path(), root);
      const bool core = top == std::string("core");
      // core/<layer>/...: the layer is the first folder under core/.
      const std::string own = core && rel.parent_path() != fs::path("core") ? std::next(rel.begin())->string() : "";
      const int own_rank = layer_rank(own);
      if (core && !own.empty() && own_rank < 0) {
        out.push_back(rel.string() + ": folder core/" + own + " is not a layer of the stack");
        continue;
      }
      std::ifstream in(entry.path());
      std::string line;
      int n = 0;
      while (std::getline(in, line)) {
        ++n;
        std::smatch m;
        if (!std::regex_search(line, m, inc)) continue;
        const std::string target = m[1].str();
        const auto slash = target.find('/');
        if (slash == std::string::npos) continue;  // a file of the same folder (or a kernels header)
        const std::string folder = target.substr(0, slash);
        const int rank = layer_rank(folder);
        if (rank < 0) continue;  // not a core layer (e.g. a system header in quotes)
        const std::string where = rel.string() + ":" + std::to_string(n) + ": ";
        if (!core) {
          if (folder != "util" && folder != "tensor")
            out.push_back(where + "kernels/ may include only util/ and tensor/ of core, not " + target);
        } else if (rank > own_rank) {
          out.push_back(where + own + " includes " + target + ", which is above it in the stack");
        }
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

class TestLayering : public QObject {
  Q_OBJECT
 private slots:
  void checkoutFollowsTheStack() {
    const auto v = layer_violations(TRAINLAB_SOURCE_DIR);
    std::string all;
    for (const auto& s : v) all += s + "\n";
    if (!v.empty()) QFAIL(("includes that go up the stack:\n" + all).c_str());
  }

  // The checker itself: a planted upward include is found with its file and line.
  void upwardIncludeIsNamed() {
    QTemporaryDir dir;
    const fs::path root = dir.path().toStdString();
    fs::create_directories(root / "core/nn");
    fs::create_directories(root / "core/train");
    fs::create_directories(root / "kernels");
    std::ofstream(root / "core/nn/layer.h") << "#pragma once\n#include \"tensor/tensor.h\"\n#include \"train/trainer.h\"\n";
    std::ofstream(root / "core/train/trainer.h") << "#include \"nn/layer.h\"\n#include \"trainer_parts.h\"\n";
    std::ofstream(root / "kernels/x.cu") << "#include \"common.cuh\"\n#include \"backend/backend.h\"\n";
    const auto v = layer_violations(root);
    QCOMPARE(v.size(), size_t(2));
    QCOMPARE(QString::fromStdString(v[0]),
             QString("core/nn/layer.h:3: nn includes train/trainer.h, which is above it in the stack"));
    QCOMPARE(QString::fromStdString(v[1]),
             QString("kernels/x.cu:2: kernels/ may include only util/ and tensor/ of core, not backend/backend.h"));
  }

  // lessons/ sits above train (it may use every layer below) and below cli (whose verb calls it).
  void lessonsSitsBetweenTrainAndCli() {
    QTemporaryDir dir;
    const fs::path root = dir.path().toStdString();
    fs::create_directories(root / "core/lessons");
    fs::create_directories(root / "core/train");
    fs::create_directories(root / "core/cli");
    std::ofstream(root / "core/lessons/lesson.h") << "#include \"train/trainer.h\"\n#include \"cli/commands.h\"\n";
    std::ofstream(root / "core/train/trainer.h") << "#include \"lessons/lesson.h\"\n";
    std::ofstream(root / "core/cli/cmd_lesson.cpp") << "#include \"lessons/lesson.h\"\n";
    const auto v = layer_violations(root);
    QCOMPARE(v.size(), size_t(2));
    QCOMPARE(QString::fromStdString(v[0]),
             QString("core/lessons/lesson.h:2: lessons includes cli/commands.h, which is above it in the stack"));
    QCOMPARE(QString::fromStdString(v[1]),
             QString("core/train/trainer.h:1: train includes lessons/lesson.h, which is above it in the stack"));
  }

  void unknownFolderIsNamed() {
    QTemporaryDir dir;
    const fs::path root = dir.path().toStdString();
    fs::create_directories(root / "core/misc");
    std::ofstream(root / "core/misc/a.h") << "#pragma once\n";
    const auto v = layer_violations(root);
    QCOMPARE(v.size(), size_t(1));
    QVERIFY(v[0].find("core/misc is not a layer") != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(TestLayering)
#include "test_layering.moc"
