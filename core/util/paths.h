// Where the shipped data and presets are: $TRAINLAB_DATA_DIR, then <prefix>/share/trainlab next to
// an installed binary, then the source tree's resources/ (a run from the build tree).
#pragma once
#include <string>
#include <vector>

namespace trainlab {

// Folders searched for resources, in order (each holds data/, presets/ ...).
std::vector<std::string> resource_roots();
// Path of resources/<relative> (e.g. "data/digits.csv.gz"); throws Error listing where it looked.
std::string find_resource(const std::string& relative);

}  // namespace trainlab
