// quant-outlier and group-quant: the lab's symmetric b-bit quantizer (tensor/quant_format.h:
// s = fp16(max|w| / qmax) per group, q = clamp(rne(w / s), -qmax, qmax)) on random weights, and
// the backend's int8 product (quantize_i8, int8_linear: exact int32 accumulation, one rescale).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "lessons/lesson.h"
#include "tensor/quant_format.h"
#include "util/error.h"

namespace trainlab {

namespace {

std::vector<float> normal_weights(int64_t n, double std, std::mt19937_64& rng) {
  std::vector<float> w(static_cast<size_t>(n));
  for (auto& v : w) v = static_cast<float>(std * lesson_normal(rng));
  return w;
}

// ||q - w|| / ||w|| over rows [r0, r1) of [rows, cols] matrices, skipping row `skip` (-1: none).
double rows_error(const std::vector<float>& w, const std::vector<float>& q, int64_t cols, int64_t r0, int64_t r1,
                  int64_t skip) {
  double e = 0.0, s = 0.0;
  for (int64_t r = r0; r < r1; ++r) {
    if (r == skip) continue;
    for (int64_t c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r * cols + c);
      e += (static_cast<double>(q[i]) - w[i]) * (static_cast<double>(q[i]) - w[i]);
      s += static_cast<double>(w[i]) * w[i];
    }
  }
  return s > 0.0 ? std::sqrt(e / s) : 0.0;
}

struct Product {
  double error_all = 0.0;       // ||y_int8 - y|| / ||y|| over every output
  double error_ordinary = 0.0;  // the same without the outlier row's output column
};

// The reference y = x w^T is the backend's fp32 product (its rounding, about 1e-7 relative, is far
// below the int8 errors shown); against it the backend's W8A8 product with one scale for x
// (max|x| / 127) and w's scales from quantize_groups (one per `group` weights).
Product int8_product(Backend& be, const std::vector<float>& x, const std::vector<float>& w, int64_t m, int64_t n,
                     int64_t k, int64_t group, int64_t outlier) {
  std::vector<float> scales(static_cast<size_t>(n * k / group));
  std::vector<int8_t> codes(w.size());
  quantize_groups(w.data(), n * k, 8, group, scales.data(), codes.data());
  float xmax = 0.0f;
  for (float v : x) xmax = std::max(xmax, std::fabs(v));
  const float x_scale = xmax / 127.0f;
  Tensor tx = be.empty({m, k}, DType::F32, MemCategory::Activations);
  be.upload(tx, x.data(), DType::F32);
  Tensor tw = be.empty({n, k}, DType::F32, MemCategory::Weights);
  be.upload(tw, w.data(), DType::F32);
  Tensor ref = be.empty({m, n}, DType::F32, MemCategory::Activations);
  be.gemm(tx, false, tw, true, ref, 1.0f, 0.0f, MatmulMode::Native);
  Tensor xq = be.empty({m, k}, DType::I8, MemCategory::Activations);
  be.quantize_i8(tx, x_scale, xq);
  Tensor wq = be.empty({n, k}, DType::I8, MemCategory::Weights);
  be.upload(wq, codes.data(), DType::I8);
  Tensor ws = be.empty({static_cast<int64_t>(scales.size())}, DType::F32, MemCategory::Weights);
  be.upload(ws, scales.data(), DType::F32);
  Tensor ty = be.empty({m, n}, DType::F32, MemCategory::Activations);
  be.int8_linear(xq, x_scale, wq, ws, nullptr, Activation::None, ty);
  std::vector<float> y(static_cast<size_t>(m * n)), y_ref(y.size());
  be.download(ty, y.data(), DType::F32);
  be.download(ref, y_ref.data(), DType::F32);
  double e_all = 0.0, s_all = 0.0, e_ord = 0.0, s_ord = 0.0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const double r = y_ref[static_cast<size_t>(i * n + j)];
      const double e = (y[static_cast<size_t>(i * n + j)] - r) * (y[static_cast<size_t>(i * n + j)] - r);
      e_all += e;
      s_all += r * r;
      if (j != outlier) e_ord += e, s_ord += r * r;
    }
  return {std::sqrt(e_all / s_all), s_ord > 0.0 ? std::sqrt(e_ord / s_ord) : 0.0};
}

LessonResult compute_quant_outlier(const LessonValues& in) {
  const auto rows = static_cast<int64_t>(in.at("rows"));
  const auto cols = static_cast<int64_t>(in.at("cols"));
  const auto outlier = static_cast<int64_t>(in.at("outlier_row"));
  const auto batch = static_cast<int64_t>(in.at("batch"));
  if (outlier >= rows)
    throw Error("lesson quant-outlier: input 'outlier_row' (outlier row): expected an integer in [0, rows - 1] = [0, " +
                std::to_string(rows - 1) + "]");
  std::mt19937_64 rng(static_cast<uint64_t>(in.at("seed")));
  std::vector<float> w = normal_weights(rows * cols, in.at("std"), rng);
  for (int64_t c = 0; c < cols; ++c) w[static_cast<size_t>(outlier * cols + c)] *= static_cast<float>(in.at("factor"));
  const int64_t n = rows * cols;
  std::vector<float> per_tensor(w.size()), per_row(w.size());
  fake_quantize_host(w.data(), per_tensor.data(), n, 8, n);
  fake_quantize_host(w.data(), per_row.data(), n, 8, cols);
  int64_t zeros = 0, ordinary = 0;
  for (int64_t i = 0; i < n; ++i)
    if (i / cols != outlier && w[static_cast<size_t>(i)] != 0.0f) {
      ++ordinary;
      zeros += per_tensor[static_cast<size_t>(i)] == 0.0f;
    }
  const std::vector<float> x = normal_weights(batch * cols, 1.0, rng);
  auto be = create_backend("cpu");
  const Product pt = int8_product(*be, x, w, batch, rows, cols, n, outlier);
  const Product pr = int8_product(*be, x, w, batch, rows, cols, cols, outlier);
  LessonResult r;
  r.figures = {
      {"tensor.outlier_row_error", "one scale per tensor: relative error of the outlier row",
       rows_error(w, per_tensor, cols, outlier, outlier + 1, -1)},
      {"tensor.ordinary_rows_error", "one scale per tensor: relative error of the other rows",
       rows_error(w, per_tensor, cols, 0, rows, outlier)},
      {"tensor.ordinary_zero_share", "one scale per tensor: share of the other rows' weights that become 0",
       static_cast<double>(zeros) / std::max<int64_t>(1, ordinary)},
      {"row.outlier_row_error", "one scale per row: relative error of the outlier row",
       rows_error(w, per_row, cols, outlier, outlier + 1, -1)},
      {"row.ordinary_rows_error", "one scale per row: relative error of the other rows",
       rows_error(w, per_row, cols, 0, rows, outlier)},
      {"tensor.product_error", "int8 x int8 product, one weight scale: relative error", pt.error_all},
      {"tensor.product_ordinary_error", "... of the outputs of the other rows", pt.error_ordinary},
      {"row.product_error", "int8 x int8 product, a scale per row: relative error", pr.error_all},
      {"row.product_ordinary_error", "... of the outputs of the other rows", pr.error_ordinary},
      {"bytes.fp32", "storage: fp32 weights (bytes)", static_cast<double>(n * 4)},
      {"bytes.int8_tensor", "storage: int8 codes + one fp32 scale", static_cast<double>(n + 4)},
      {"bytes.int8_row", "storage: int8 codes + an fp32 scale per row", static_cast<double>(n + rows * 4)},
  };
  r.plot = {"8-bit relative error of each row", "row", "relative error", false, true, {}};
  LessonSeries st{"one scale per tensor", {}, {}}, sr{"one scale per row", {}, {}};
  for (int64_t row = 0; row < rows; ++row) {
    st.x.push_back(static_cast<double>(row));
    sr.x.push_back(static_cast<double>(row));
    st.y.push_back(rows_error(w, per_tensor, cols, row, row + 1, -1));
    sr.y.push_back(rows_error(w, per_row, cols, row, row + 1, -1));
  }
  r.plot.series = {st, sr};
  return r;
}

LessonResult compute_group_quant(const LessonValues& in) {
  const auto g = static_cast<int64_t>(in.at("group"));
  std::mt19937_64 rng(static_cast<uint64_t>(in.at("seed")));
  const std::vector<float> w = normal_weights(g, in.at("std"), rng);
  LessonResult r;
  r.plot = {"A group of weights and their quantized values", "weight index", "value", false, false, {}};
  LessonSeries ws{"weights", {}, {}};
  for (int64_t i = 0; i < g; ++i) ws.x.push_back(static_cast<double>(i)), ws.y.push_back(w[static_cast<size_t>(i)]);
  r.plot.series.push_back(ws);
  for (int bits : {8, 4, 2}) {
    std::vector<float> q(w.size());
    fake_quantize_host(w.data(), q.data(), g, bits, g);
    float scale = 0.0f;
    std::vector<int8_t> code(w.size());
    quantize_groups(w.data(), g, bits, g, &scale, code.data());
    int64_t zeros = 0, nonzero = 0;
    for (size_t i = 0; i < w.size(); ++i)
      if (w[i] != 0.0f) ++nonzero, zeros += q[i] == 0.0f;
    const std::string k = std::to_string(bits) + "bit", l = std::to_string(bits) + "-bit";
    r.figures.push_back({k + ".scale", l + ": the group's scale s = fp16(max|w| / qmax)", scale});
    r.figures.push_back({k + ".relative_error", l + ": ||q s - w|| / ||w||", rows_error(w, q, g, 0, 1, -1)});
    r.figures.push_back({k + ".zero_share", l + ": share of the weights that round to 0",
                         static_cast<double>(zeros) / std::max<int64_t>(1, nonzero)});
    LessonSeries s{l, ws.x, {}};
    for (float v : q) s.y.push_back(v);
    r.plot.series.push_back(std::move(s));
  }
  return r;
}

}  // namespace

Lesson quant_outlier_lesson() {
  Lesson l;
  l.name = "quant-outlier";
  l.title = "An outlier row: one scale per tensor or one per row";
  l.text =
      "A weight matrix of N(0, std^2) values with one row multiplied by a factor, quantized to 8 bits. With "
      "one scale for the whole tensor the outlier sets the scale, and the ordinary rows' small weights fall "
      "on a few codes or on zero; with one scale per row each row keeps its own resolution for 4 more bytes "
      "a row. The same holds for an int8 x int8 product with those weights.";
  l.inputs = {{"rows", "rows", "output features", 256, 2, 2048, true},
              {"cols", "columns", "input features", 512, 2, 4096, true},
              {"std", "std", "standard deviation of the weights", 0.02, 1e-6, 10, false},
              {"outlier_row", "outlier row", "the row that is multiplied (from 0)", 7, 0, 2047, true},
              {"factor", "factor", "the outlier row's factor", 50, 1, 1000, false},
              {"batch", "product rows", "rows of N(0, 1) inputs for the int8 product", 64, 1, 512, true},
              {"seed", "seed", "weights and inputs", 1, 0, 1e9, true}};
  l.compute = compute_quant_outlier;
  return l;
}

Lesson group_quant_lesson() {
  Lesson l;
  l.name = "group-quant";
  l.title = "Group quantization at 8, 4 and 2 bits";
  l.text =
      "One group of N(0, std^2) weights shares a scale s = max|w| / qmax, qmax = 2^(b-1) - 1 (127, 7, 1). "
      "Every weight smaller than s/2 rounds to zero: at 8 bits almost none, at 4 bits a few, at 2 bits most "
      "of the group, and the relative error grows accordingly. Smaller groups have smaller maxima and so "
      "finer scales.";
  l.inputs = {{"group", "group size", "weights that share a scale", 32, 2, 4096, true},
              {"std", "std", "standard deviation of the weights", 0.02, 1e-6, 10, false},
              {"seed", "seed", "the weights", 1, 0, 1e9, true}};
  l.compute = compute_group_quant;
  return l;
}

}  // namespace trainlab
