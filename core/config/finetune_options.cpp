#include "config/finetune_options.h"

#include <algorithm>

#include "util/error.h"

namespace trainlab {

namespace {
const std::vector<std::string> kTargets{"qkv", "proj", "fc1", "fc2", "head"};
}

FinetuneMethod finetune_method_from_name(const std::string& name) {
  if (name == "full") return FinetuneMethod::Full;
  if (name == "lora") return FinetuneMethod::Lora;
  if (name == "qlora") return FinetuneMethod::Qlora;
  if (name == "dora") return FinetuneMethod::Dora;
  throw Error("finetune.method '" + name + "': expected full, lora, qlora or dora");
}

const char* finetune_method_name(FinetuneMethod m) {
  switch (m) {
    case FinetuneMethod::Full: return "full";
    case FinetuneMethod::Lora: return "lora";
    case FinetuneMethod::Qlora: return "qlora";
    case FinetuneMethod::Dora: return "dora";
  }
  return "?";
}

std::vector<std::string> parse_finetune_targets(const std::string& text) {
  std::vector<bool> seen(kTargets.size(), false);
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(begin, end - begin);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    const auto it = std::find(kTargets.begin(), kTargets.end(), item);
    if (it == kTargets.end())
      throw Error("finetune.targets: '" + item + "' names no layer (expected a comma-separated list of qkv, proj, "
                  "fc1, fc2 and head: char-gpt's products)");
    const size_t i = static_cast<size_t>(it - kTargets.begin());
    if (seen[i]) throw Error("finetune.targets: '" + item + "' is named twice");
    seen[i] = true;
    begin = end + 1;
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < kTargets.size(); ++i)
    if (seen[i]) out.push_back(kTargets[i]);
  return out;
}

FinetuneOptions finetune_options(const Config& c) {
  FinetuneOptions o;
  o.method = finetune_method_from_name(c.get_string("finetune.method"));
  o.rank = c.get_int("finetune.rank");
  o.alpha = c.get_float("finetune.alpha");
  o.targets = parse_finetune_targets(c.get_string("finetune.targets"));
  o.init_from = c.get_string("compress.init_from");
  return o;
}

}  // namespace trainlab
