#include "palette.h"

#include <QApplication>
#include <QPalette>
#include <QStyle>

namespace trainlab::app {

namespace {

struct SystemLook {
  QString style;
  QPalette palette;
};
// The look the application started with, taken before the first switch to dark.
SystemLook& system_look() {
  static SystemLook look{QApplication::style() ? QApplication::style()->name() : QString(), QApplication::palette()};
  return look;
}
bool g_dark = false;

// Disabled text keeps enough contrast to stay readable.
QPalette dark_palette() {
  QPalette p;
  const QColor window(45, 45, 48), base(30, 30, 32), text(225, 225, 228), disabled(135, 135, 140);
  p.setColor(QPalette::Window, window);
  p.setColor(QPalette::WindowText, text);
  p.setColor(QPalette::Base, base);
  p.setColor(QPalette::AlternateBase, QColor(40, 40, 43));
  p.setColor(QPalette::ToolTipBase, QColor(60, 60, 64));
  p.setColor(QPalette::ToolTipText, text);
  p.setColor(QPalette::PlaceholderText, disabled);
  p.setColor(QPalette::Text, text);
  p.setColor(QPalette::Button, QColor(58, 58, 62));
  p.setColor(QPalette::ButtonText, text);
  p.setColor(QPalette::BrightText, QColor(255, 90, 90));
  p.setColor(QPalette::Link, QColor(110, 170, 255));
  p.setColor(QPalette::Highlight, QColor(52, 110, 190));
  p.setColor(QPalette::HighlightedText, Qt::white);
  p.setColor(QPalette::Light, QColor(75, 75, 80));
  p.setColor(QPalette::Midlight, QColor(62, 62, 66));
  p.setColor(QPalette::Mid, QColor(40, 40, 43));
  p.setColor(QPalette::Dark, QColor(25, 25, 27));
  p.setColor(QPalette::Shadow, Qt::black);
  for (auto role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText})
    p.setColor(QPalette::Disabled, role, disabled);
  p.setColor(QPalette::Disabled, QPalette::Base, window);
  p.setColor(QPalette::Disabled, QPalette::Button, window);
  return p;
}

}  // namespace

void use_dark_palette(bool dark) {
  if (dark == g_dark) return;
  const SystemLook& system = system_look();
  if (dark) {
    QApplication::setStyle("Fusion");
    QApplication::setPalette(dark_palette());
  } else {
    if (!system.style.isEmpty()) QApplication::setStyle(system.style);
    QApplication::setPalette(system.palette);
  }
  g_dark = dark;
}

bool dark_palette_in_use() { return g_dark; }

}  // namespace trainlab::app
