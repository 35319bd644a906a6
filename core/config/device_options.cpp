#include "config/device_options.h"

#include "config/config.h"
#include "util/error.h"

namespace trainlab {

const char* fp32_math_name(Fp32Math m) {
  switch (m) {
    case Fp32Math::Native: return "native";
    case Fp32Math::Bf16x9: return "bf16x9";
    case Fp32Math::Auto: return "auto";
  }
  return "?";
}

Fp32Math fp32_math_from_name(const std::string& name) {
  for (Fp32Math m : {Fp32Math::Native, Fp32Math::Bf16x9, Fp32Math::Auto})
    if (name == fp32_math_name(m)) return m;
  throw Error("device.fp32_gemm '" + name + "': expected native, bf16x9 or auto");
}

DeviceOptions device_options(const Config& config) {
  DeviceOptions o;
  o.fp32_gemm = fp32_math_from_name(config.get_string("device.fp32_gemm"));
  o.lt_autotune = config.get_bool("device.lt_autotune");
  o.attention_wgmma = config.get_bool("device.attention_wgmma");
  return o;
}

}  // namespace trainlab
