#include "stop_signals.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <QSocketNotifier>
#include <cerrno>
#include <cstring>
#include <string>

#include "util/error.h"

namespace trainlab::app {

namespace {
constexpr int kStopSignals[3] = {SIGINT, SIGTERM, SIGHUP};

// The socket end the handler writes to; -1 while no StopSignals exists. Set before the handlers
// are installed and cleared after they are removed, so a handler never sees it change.
volatile sig_atomic_t g_write_fd = -1;

// Async-signal-safe: one write() of one byte to a non-blocking socket, errno kept. When the
// socket is full (signals far faster than the event loop reads), the byte is dropped: the ones
// already there stop the run all the same.
void on_stop_signal(int signo) {
  const int saved_errno = errno;
  const unsigned char b = static_cast<unsigned char>(signo);
  const ssize_t n = ::write(g_write_fd, &b, 1);
  static_cast<void>(n);
  errno = saved_errno;
}

std::string os_error(const char* what) { return std::string(what) + ": " + std::strerror(errno); }
}  // namespace

StopSignals::StopSignals(QObject* parent) : QObject(parent) {
  if (g_write_fd != -1) throw Error("stop signals: another handler is installed already");
  int fd[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd) != 0)
    throw Error(os_error("stop signals: cannot make the socket pair"));
  if (::fcntl(fd[0], F_SETFL, O_NONBLOCK) != 0) {
    const std::string e = os_error("stop signals: cannot make the socket non-blocking");
    ::close(fd[0]);
    ::close(fd[1]);
    throw Error(e);
  }
  g_write_fd = fd[0];
  m_read_fd = fd[1];
  m_notifier = new QSocketNotifier(static_cast<qintptr>(m_read_fd), QSocketNotifier::Read, this);
  connect(m_notifier, &QSocketNotifier::activated, this, &StopSignals::read_signal);

  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // the event loop's poll() and the trainer's I/O go on after the handler
  for (int i = 0; i < 3; ++i) {
    if (::sigaction(kStopSignals[i], &sa, &m_previous[i]) != 0) {
      const std::string e = os_error("stop signals: cannot install a handler");
      for (int j = 0; j < i; ++j) ::sigaction(kStopSignals[j], &m_previous[j], nullptr);
      g_write_fd = -1;
      ::close(fd[0]);
      ::close(fd[1]);
      throw Error(e);
    }
  }
}

StopSignals::~StopSignals() {
  for (int i = 0; i < 3; ++i) ::sigaction(kStopSignals[i], &m_previous[i], nullptr);
  const int write_fd = g_write_fd;
  g_write_fd = -1;
  delete m_notifier;
  ::close(write_fd);
  ::close(m_read_fd);
}

void StopSignals::read_signal() {
  unsigned char b = 0;
  if (::read(m_read_fd, &b, 1) == 1) emit received(static_cast<int>(b));
}

}  // namespace trainlab::app
