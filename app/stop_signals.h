// StopSignals: SIGINT (Ctrl+C), SIGTERM (kill, timeout, session managers, schedulers) and SIGHUP (a
// closed terminal) delivered to the GUI thread as the Qt signal received(signo), by Qt's documented
// pattern for Unix signals ("Calling Qt Functions From Unix Signal Handlers"): the handler only
// write()s the signal's number to one end of a socket pair, which is async-signal-safe, and a
// QSocketNotifier on the other end reads it in the event loop, where anything may be done. The app
// connects it to MainWindow::quit_for_signal (the run stops like with the Stop button, its record is
// written, then the app quits). One instance at a time; the destructor puts back the handlers that
// were there before.
#pragma once
#include <signal.h>

#include <QObject>

class QSocketNotifier;

namespace trainlab::app {

class StopSignals : public QObject {
  Q_OBJECT
 public:
  // Installs the handlers. Throws Error when the socket pair or a handler cannot be made, or when
  // another StopSignals exists.
  explicit StopSignals(QObject* parent = nullptr);
  ~StopSignals() override;
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 signals:
  void received(int signo);

 private:
  void read_signal();

  int m_read_fd = -1;
  QSocketNotifier* m_notifier = nullptr;
  struct sigaction m_previous[3] = {};
};

}  // namespace trainlab::app
