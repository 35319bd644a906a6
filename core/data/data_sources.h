// The data set a run names, loaded from typed options (config/train_options.h: DataOptions):
// which file or folder each data.name reads, its defaults, and the errors that say which option
// to set. The trainer's tasks, the benchmarks and the other commands call these.
#pragma once
#include "config/train_options.h"
#include "data/dataset.h"
#include "data/text.h"

namespace trainlab {

// digits (seeded split by test_fraction), fashion-mnist or idx (the folder's own test files).
// Throws Error for a name that is not a classification data set or a missing file.
TrainTestSplit load_classification_data(const DataOptions& o);

// The character model's text: tinyshakespeare (bundled; also what data.name=digits, the schema's
// default, means for a text model), kjv (bundled, the second text to fine-tune to) or data.name=text
// with data.path, split by val_fraction. `vocabulary` (UTF-8, a stored model's CharGptConfig::chars):
// tokenise with it instead of the text's own characters (load_text_corpus).
TextCorpus load_text_data(const DataOptions& o, const std::string* vocabulary = nullptr);

}  // namespace trainlab
