// The window's colours: the system palette, or a dark palette for the Fusion style. Chosen with
// View > Dark palette (remembered in QSettings as "view/dark_palette") or --palette dark|system.
#pragma once

namespace trainlab::app {

// Applies the dark palette (Fusion style) or gives the system palette (and style) back. Every
// widget gets a PaletteChange event; the plots restyle on it.
void use_dark_palette(bool dark);
bool dark_palette_in_use();

}  // namespace trainlab::app
