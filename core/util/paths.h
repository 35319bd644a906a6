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
// The lab's folder in the user's cache: $XDG_CACHE_HOME/trainlab, else $HOME/.cache/trainlab
// (not created here); empty when neither variable is set to an absolute path.
std::string user_cache_dir();
// The weights file a run folder or a file names: a folder with a model.safetensors (what a run
// writes) means that file; anything else is returned as it is, for the weights reader to refuse
// (compress.init_from, train --init-from, merge).
std::string weights_file_of(const std::string& run_dir_or_file);

}  // namespace trainlab
