// Entry points of the trainlab binary: the window (with options for scripted screenshots) and the
// headless `trainlab report RUN_DIR... -o report.pdf|.html|.csv`.
#pragma once

namespace trainlab::app {

int run_report_command(int argc, char** argv);
int run_window(int argc, char** argv);
void set_application_names();

}  // namespace trainlab::app
