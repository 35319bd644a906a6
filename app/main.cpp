// trainlab: the desktop app, and `trainlab report RUN_DIR... -o FILE` (headless).
#include <cstring>

#include "app_cli.h"

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "report") == 0) return trainlab::app::run_report_command(argc, argv);
  return trainlab::app::run_window(argc, argv);
}
