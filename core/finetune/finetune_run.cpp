#include "finetune/finetune_run.h"

#include <filesystem>

#include "io/weights.h"
#include "util/error.h"
#include "util/paths.h"
#include "util/safe_file.h"

namespace trainlab {

namespace fs = std::filesystem;

void check_adapter_model(const std::string& kind, const FinetuneOptions& o) {
  if (!o.adapters() || kind == "char-gpt") return;
  const std::string m = finetune_method_name(o.method);
  std::string why = "finetune.method " + m + " wraps char-gpt's products (qkv, proj, fc1, fc2, head); model " + kind +
                    " has none of them (use finetune.method full)";
  if (o.method == FinetuneMethod::Qlora)
    why += ". QLoRA would not pay there either: the digits MLP's 85,002 fp32 weights take 340 KB, and NF4's "
           "blocks of 64 with scales in blocks of 256 save memory only on layers far larger than its";
  throw Error(why);
}

std::unique_ptr<Model> attach_adapters(Backend& be, std::unique_ptr<Model> model, const FinetuneOptions& o,
                                       uint64_t seed) {
  if (!o.adapters()) return model;
  const std::string m = finetune_method_name(o.method);
  if (o.init_from.empty())
    throw Error("finetune.method " + m + " adapts a trained model: set compress.init_from (train --init-from "
                "RUN_DIR_OR_WEIGHTS)");
  check_adapter_model(model->kind(), o);
  auto* gpt = dynamic_cast<CharGpt*>(model.get());
  if (!gpt) throw Error("internal: a char-gpt model that is not a CharGpt");
  if (be.info().kind != DeviceKind::Cpu && o.method != FinetuneMethod::Lora)
    throw Error("finetune.method " + m + " runs on the CPU device in this version (device.name cpu): " +
                (o.method == FinetuneMethod::Qlora ? "its NF4 dequantization" : "DoRA's adapter arithmetic") +
                " is host code (docs/FINETUNE.md; finetune.method lora runs on every device)");
  if (gpt->tensor_parallel().active()) throw Error("finetune.method " + m + " does not combine with dist.tp > 1");
  model.release();
  return std::make_unique<AdaptedModel>(be, std::unique_ptr<CharGpt>(gpt), o, seed);
}

namespace {

Json finetune_json(const FinetuneOptions& o) {
  Json targets = Json::array();
  for (const std::string& t : o.targets) targets.push_back(t);
  return {{"method", finetune_method_name(o.method)}, {"rank", o.rank}, {"alpha", o.alpha},
          {"targets", targets}, {"init_from", o.init_from}};
}

FinetuneOptions finetune_from_json(const Json& j, const std::string& path) {
  try {
    FinetuneOptions o;
    o.method = finetune_method_from_name(j.at("method").get<std::string>());
    o.rank = j.at("rank").get<int64_t>();
    o.alpha = j.at("alpha").get<double>();
    std::string targets;
    for (const Json& t : j.at("targets")) targets += (targets.empty() ? "" : ",") + t.get<std::string>();
    o.targets = parse_finetune_targets(targets);
    o.init_from = j.at("init_from").get<std::string>();
    if (o.rank < 1 || !(o.alpha > 0.0)) throw Error("rank or alpha out of range");
    return o;
  } catch (const Json::exception&) {
    throw Error(path + ": trainlab_finetune metadata: expected method, rank, alpha, targets and init_from");
  } catch (const Error& e) {
    throw Error(path + ": trainlab_finetune metadata: " + e.what());
  }
}

SafeTensorsFile adapter_file(Backend& be, AdaptedModel& model, const Json& config) {
  SafeTensorsFile f;
  for (Parameter* p : model.parameters()) {
    SafeTensor t{p->name, "F32", p->shape, std::vector<uint8_t>(static_cast<size_t>(p->numel()) * 4)};
    be.download(p->master, t.bytes.data(), DType::F32);
    f.tensors.push_back(std::move(t));
  }
  f.metadata["format"] = "pt";
  f.metadata["trainlab_finetune"] = finetune_json(model.options()).dump();
  if (!config.is_null()) f.metadata["trainlab_config"] = config.dump();
  return f;
}

void write_adapter_config(const std::string& dir, const FinetuneOptions& o, const Json& targets) {
  const Json j = {{"peft_type", "LORA"},   {"r", o.rank},       {"lora_alpha", o.alpha}, {"lora_dropout", 0.0},
                  {"bias", "none"},        {"target_modules", targets},
                  {"use_dora", o.method == FinetuneMethod::Dora}, {"task_type", nullptr}};
  write_file_atomic((fs::path(dir) / "adapter_config.json").string(), j.dump(2) + "\n");
}

void save_adapter_files(Backend& be, AdaptedModel& model, const std::string& dir, const Json& config) {
  write_safetensors((fs::path(dir) / "adapter_model.safetensors").string(), adapter_file(be, model, config));
  Json modules = Json::array();
  for (const Adapter& ad : model.adapters()) modules.push_back(ad.target.module);
  write_adapter_config(dir, model.options(), modules);
}

}  // namespace

void save_adapters(Backend& be, AdaptedModel& model, const std::string& dir, const Config& config) {
  save_adapter_files(be, model, dir, config.to_json());
}

MergeReport merge_run(const std::string& run_dir, const std::string& out) {
  MergeReport r;
  r.adapter_path = (fs::path(run_dir) / "adapter_model.safetensors").string();
  const SafeTensorsFile f = read_safetensors(r.adapter_path);
  const auto fm = f.metadata.find("trainlab_finetune");
  const auto cm = f.metadata.find("trainlab_config");
  if (fm == f.metadata.end() || cm == f.metadata.end())
    throw Error(r.adapter_path + ": not a lab run's adapter file (no trainlab_finetune or trainlab_config metadata)");
  Json fj, cj;
  try {
    fj = Json::parse(fm->second);
    cj = Json::parse(cm->second);
  } catch (const Json::exception&) {
    throw Error(r.adapter_path + ": its trainlab_* metadata is not JSON");
  }
  const FinetuneOptions o = finetune_from_json(fj, r.adapter_path);
  r.base_path = weights_file_of(o.init_from);
  std::unique_ptr<Backend> be = create_backend("cpu");
  std::unique_ptr<Model> base = load_model_file(*be, r.base_path);
  auto adapted = attach_adapters(*be, std::move(base), o, 0);
  auto* am = static_cast<AdaptedModel*>(adapted.get());
  for (Parameter* p : am->parameters()) {
    const SafeTensor* t = f.find(p->name);
    if (!t || t->dtype != "F32" || t->shape != p->shape)
      throw Error(r.adapter_path + ": expected tensor " + p->name + " F32 " + shape_str(p->shape) + " (the adapters of " +
                  finetune_method_name(o.method) + " over " + r.base_path + ")");
    be->upload(p->master, t->bytes.data(), DType::F32);
    ++r.adapters;
    r.adapter_params += p->numel();
  }
  if (static_cast<int64_t>(f.tensors.size()) != r.adapters)
    throw Error(r.adapter_path + ": " + std::to_string(f.tensors.size()) + " tensors, expected the " +
                std::to_string(r.adapters) + " adapters of its finetune options");
  am->fold(*be);
  r.weights_path = out;
  save_model_weights(*be, am->base(), Config::from_record(cj), out);
  const fs::path dir = fs::path(out).parent_path();
  save_adapter_files(*be, *am, dir.empty() ? "." : dir.string(), cj);
  r.adapter_path = ((dir.empty() ? fs::path(".") : dir) / "adapter_model.safetensors").string();
  r.method = finetune_method_name(o.method);
  return r;
}

}  // namespace trainlab
