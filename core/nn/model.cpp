#include "nn/model.h"

#include "nn/linear.h"
#include "nn/transformer.h"
#include "util/error.h"

namespace trainlab {

void Model::set_compute_dtype(Backend& be, DType dtype) {
  flat_params().set_compute_dtype(be, dtype);
  m_dtype = dtype;
  release_buffers();
}

void Model::set_random_state(const nlohmann::json& state) {
  if (!state.is_object() || !state.empty())
    throw Error("random state: a " + kind() +
                " model draws no random numbers while training, so it has none to restore");
}

int64_t Model::parameter_count() {
  int64_t n = 0;
  for (Parameter* p : parameters()) n += p->numel();
  return n;
}

Parameter* Model::find_parameter(const std::string& name) {
  for (Parameter* p : parameters())
    if (p->name == name) return p;
  return nullptr;
}

void Sequential::add(std::unique_ptr<Layer> layer, int index) {
  layer->name = m_prefix + "." + std::to_string(index);
  for (Parameter* p : layer->parameters()) p->name = layer->name + "." + p->name;
  layer->matmul_mode = m_matmul_mode;
  if (m_first_param.empty()) m_first_param.push_back(0);
  m_first_param.push_back(m_first_param.back() + layer->parameters().size());
  m_layers.push_back(std::move(layer));
}

void Sequential::on_matmul_mode() {
  for (auto& l : m_layers) l->matmul_mode = m_matmul_mode;
}

Tensor Sequential::forward(Backend& be, const Tensor& x, bool training) {
  Tensor h = x;
  for (size_t i = 0; i < m_layers.size(); ++i) {
    unit_begins(m_first_param[i], m_first_param[i + 1], false);
    h = m_layers[i]->forward(be, h, training);
    unit_ends(m_first_param[i], m_first_param[i + 1], false);
  }
  return h;
}

void Sequential::backward(Backend& be, Tensor& dlogits, bool accumulate) {
  Tensor g = dlogits;
  for (size_t i = m_layers.size(); i-- > 0;) {
    unit_begins(m_first_param[i], m_first_param[i + 1], true);
    g = m_layers[i]->backward(be, g, i > 0, accumulate);
    unit_ends(m_first_param[i], m_first_param[i + 1], true);
    grads_ready(m_first_param[i]);
  }
}

std::vector<Parameter*> Sequential::parameters() {
  std::vector<Parameter*> out;
  for (auto& l : m_layers)
    for (Parameter* p : l->parameters()) out.push_back(p);
  return out;
}

void Sequential::release_buffers() {
  for (auto& l : m_layers) l->release_buffers();
}

Mlp::Mlp(Backend& be, std::vector<int64_t> sizes, Activation act, uint64_t seed)
    : Sequential("net"), m_sizes(std::move(sizes)), m_act(act) {
  if (m_sizes.size() < 2) throw Error("an MLP needs at least an input and an output size");
  std::mt19937_64 rng(seed);
  FlatParamsBuilder params;
  int index = 0;
  for (size_t i = 0; i + 1 < m_sizes.size(); ++i) {
    const bool last = i + 2 == m_sizes.size();
    add(std::make_unique<Linear>(params, m_sizes[i], m_sizes[i + 1], last ? Activation::None : act, true, rng), index);
    index += last ? 1 : 2;  // the fused activation occupies the next index, as in nn.Sequential
  }
  params.finish(be, parameters());  // draws net.0.weight, net.0.bias, net.2.weight, ... in turn
}

nlohmann::json Mlp::architecture() const {
  return {{"kind", "mlp"}, {"sizes", m_sizes}, {"activation", activation_name(m_act)}};
}

std::unique_ptr<Model> build_model(Backend& be, const nlohmann::json& arch, uint64_t seed) {
  const std::string kind = arch.value("kind", "");
  if (kind == "mlp") {
    const std::string a = arch.value("activation", "relu");
    Activation act = a == "gelu" ? Activation::GELU : a == "relu" ? Activation::ReLU : Activation::None;
    return std::make_unique<Mlp>(be, arch.at("sizes").get<std::vector<int64_t>>(), act, seed);
  }
  if (kind == "char-gpt") return build_char_gpt(be, arch, seed);
  throw Error("unknown model kind '" + kind + "': expected mlp or char-gpt");
}

int64_t architecture_int(const nlohmann::json& arch, const char* key, int64_t lo, int64_t hi) {
  const auto it = arch.find(key);
  if (it == arch.end() || !it->is_number_integer() || it->get<int64_t>() < lo || it->get<int64_t>() > hi)
    throw Error(std::string("key '") + key + "': expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return it->get<int64_t>();
}

namespace {
void visit_mlp(const nlohmann::json& arch, const ParameterVisitor& visit) {
  constexpr int64_t kMaxSize = int64_t(1) << 24;
  const auto act = arch.find("activation");
  if (act != arch.end()) {
    const std::string a = act->is_string() ? act->get<std::string>() : std::string();
    if (a != "relu" && a != "gelu" && a != "none") throw Error("key 'activation': expected relu, gelu or none");
  }
  const auto sizes = arch.find("sizes");
  const std::string expected = "key 'sizes': expected a list of at least 2 integers in [1, " + std::to_string(kMaxSize) + "]";
  if (sizes == arch.end() || !sizes->is_array() || sizes->size() < 2) throw Error(expected);
  auto size = [&](size_t i) {
    const auto& v = (*sizes)[i];
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > kMaxSize) throw Error(expected);
    return v.get<int64_t>();
  };
  // Sequential's names: a hidden Linear and its fused activation take two indices, the last one.
  int64_t in = size(0), index = 0;
  for (size_t i = 1; i < sizes->size(); ++i) {
    const int64_t out = size(i);
    const std::string name = "net." + std::to_string(index);
    visit(name + ".weight", {out, in});
    visit(name + ".bias", {out});
    index += i + 1 == sizes->size() ? 1 : 2;
    in = out;
  }
}
}  // namespace

void visit_architecture(const nlohmann::json& arch, const ParameterVisitor& visit) {
  if (!arch.is_object()) throw Error("expected a JSON object");
  const auto kind = arch.find("kind");
  const std::string k = kind != arch.end() && kind->is_string() ? kind->get<std::string>() : std::string();
  if (k == "mlp") return visit_mlp(arch, visit);
  if (k == "char-gpt") return visit_char_gpt(arch, visit);
  throw Error("key 'kind': expected mlp or char-gpt");
}

}  // namespace trainlab
