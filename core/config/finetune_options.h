// The fine-tuning options (finetune.*, with compress.init_from: the trained weights to adapt) as
// plain values: what core/finetune/ works from. finetune_options(config) reads and checks them; the
// meaning, range and default of each key is the schema's (config_schema.cpp).
#pragma once
#include <string>
#include <vector>

#include "config/config.h"

namespace trainlab {

enum class FinetuneMethod : uint8_t { Full, Lora, Qlora, Dora };
FinetuneMethod finetune_method_from_name(const std::string& name);  // Error naming the choices
const char* finetune_method_name(FinetuneMethod m);

struct FinetuneOptions {
  FinetuneMethod method = FinetuneMethod::Full;
  int64_t rank = 8;
  double alpha = 16.0;
  // finetune.targets in the canonical order qkv, proj, fc1, fc2, head (each at most once).
  std::vector<std::string> targets{"qkv", "proj", "fc1", "fc2"};
  std::string init_from;  // compress.init_from as given (a run folder or a weights file)
  bool adapters() const { return method != FinetuneMethod::Full; }
  double scale() const { return alpha / static_cast<double>(rank); }
};

// Parses finetune.targets ("qkv,fc1"): Error naming the key, the item and the expected names when
// an item names no char-gpt product, when one repeats or when the list is empty.
std::vector<std::string> parse_finetune_targets(const std::string& text);
FinetuneOptions finetune_options(const Config& c);

}  // namespace trainlab
