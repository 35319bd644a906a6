// distillation: a teacher's logits softened by a temperature, and the gradient of the soft loss.
// The probabilities are the backend's softmax (softmax_xent's gradient with the label on class 0:
// dlogits = softmax(z) - onehot(0), so p = dlogits + onehot(0)); the gradient is the backend's
// distill_backward with alpha = 1, which is the gradient of T^2 KL(p_t^T || p_s^T) (backend.h):
//   T (softmax(zs / T) - softmax(zt / T)) per row, times grad_multiplier = 1 / batch.
// For large T that tends to (dz - mean(dz)) / C, dz = zs - zt: the factor T^2 keeps the soft
// loss's gradient the same size at every temperature, while KL alone shrinks as 1 / T^2.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "lessons/lesson.h"

namespace trainlab {

namespace {

const char* const kTeacherKeys[] = {"z1", "z2", "z3", "z4", "z5"};

std::vector<double> softened(Backend& be, const std::vector<double>& z, double t) {
  const auto c = static_cast<int64_t>(z.size());
  std::vector<float> scaled(z.size());
  for (size_t i = 0; i < z.size(); ++i) scaled[i] = static_cast<float>(z[i] / t);
  Tensor logits = be.empty({1, c}, DType::F32, MemCategory::Activations);
  be.upload(logits, scaled.data(), DType::F32);
  const int32_t label = 0;
  Tensor labels = be.empty({1}, DType::I32, MemCategory::Activations);
  be.upload(labels, &label, DType::I32);
  Tensor dlogits = be.empty({1, c}, DType::F32, MemCategory::Activations);
  Tensor stats = be.empty({2}, DType::F32, MemCategory::Activations);
  be.softmax_xent(logits, labels, &dlogits, 1.0f, stats, false);
  std::vector<float> g(z.size());
  be.download(dlogits, g.data(), DType::F32);
  std::vector<double> p(z.size());
  for (size_t i = 0; i < z.size(); ++i) p[i] = g[i] + (i == 0 ? 1.0 : 0.0);
  return p;
}

// ||d (T^2 KL) / d zs|| over the batch (the mean loss's gradient) at temperature t.
double soft_gradient_norm(Backend& be, const Tensor& zs, const Tensor& zt, double t) {
  Tensor dlogits = be.empty(zs.shape(), DType::F32, MemCategory::Activations);
  be.fill(dlogits, 0.0f);
  be.distill_backward(zs, zt, static_cast<float>(t), 1.0f, 1.0f / static_cast<float>(zs.dim(0)), dlogits, nullptr,
                      false);
  std::vector<float> g(static_cast<size_t>(dlogits.numel()));
  be.download(dlogits, g.data(), DType::F32);
  double s = 0.0;
  for (float v : g) s += static_cast<double>(v) * v;
  return std::sqrt(s);
}

LessonResult compute_distillation(const LessonValues& in) {
  auto be = create_backend("cpu");
  std::vector<double> teacher;
  for (const char* k : kTeacherKeys) teacher.push_back(in.at(k));
  LessonResult r;
  for (const char* which : {"t_low", "t_high"}) {
    const double t = in.at(which);
    const std::vector<double> p = softened(*be, teacher, t);
    char tl[32];
    std::snprintf(tl, sizeof tl, "T = %g", t);
    for (size_t i = 0; i < p.size(); ++i)
      r.figures.push_back({std::string(which) + ".p" + std::to_string(i + 1),
                           std::string(tl) + ": p(class " + std::to_string(i + 1) + ")", p[i]});
  }
  const auto c = static_cast<int64_t>(in.at("classes"));
  const auto batch = static_cast<int64_t>(in.at("batch"));
  std::mt19937_64 rng(static_cast<uint64_t>(in.at("seed")));
  std::vector<float> hs(static_cast<size_t>(batch * c)), ht(hs.size());
  for (auto& v : hs) v = static_cast<float>(in.at("logit_std") * lesson_normal(rng));
  for (auto& v : ht) v = static_cast<float>(in.at("logit_std") * lesson_normal(rng));
  Tensor zs = be->empty({batch, c}, DType::F32, MemCategory::Activations);
  Tensor zt = be->empty({batch, c}, DType::F32, MemCategory::Activations);
  be->upload(zs, hs.data(), DType::F32);
  be->upload(zt, ht.data(), DType::F32);
  const auto t_max = static_cast<int64_t>(in.at("t_max"));
  r.plot = {"Gradient norm of the soft loss across temperatures", "temperature T", "gradient norm", false, true, {}};
  LessonSeries scaled{"T^2 KL (the lab's soft loss)", {}, {}}, plain{"KL alone", {}, {}};
  for (int64_t t = 1; t <= t_max; ++t) {
    const double g = soft_gradient_norm(*be, zs, zt, static_cast<double>(t));
    scaled.x.push_back(static_cast<double>(t));
    scaled.y.push_back(g);
    plain.x.push_back(static_cast<double>(t));
    plain.y.push_back(g / static_cast<double>(t * t));
  }
  r.figures.push_back({"grad_t2.t1", "gradient norm of T^2 KL at T = 1", scaled.y.front()});
  r.figures.push_back({"grad_t2.tmax", "gradient norm of T^2 KL at the largest T", scaled.y.back()});
  r.figures.push_back({"grad_kl.t1", "gradient norm of KL alone at T = 1", plain.y.front()});
  r.figures.push_back({"grad_kl.tmax", "gradient norm of KL alone at the largest T", plain.y.back()});
  r.plot.series = {scaled, plain};
  return r;
}

}  // namespace

Lesson distillation_lesson() {
  Lesson l;
  l.name = "distillation";
  l.title = "Distillation: softened probabilities and the T^2 factor";
  l.text =
      "A teacher's logits turned into probabilities at temperature T, softmax(z / T): at T = 1 nearly all the "
      "mass is on the top class, at higher T the other classes' relative likelihoods (the \"dark knowledge\") "
      "show. The soft loss KL(p_t^T || p_s^T) has a gradient that shrinks as 1 / T^2, so the lab multiplies it "
      "by T^2 (as Hinton et al.); on random student and teacher logits its gradient norm then stays level.";
  l.inputs = {{"z1", "teacher logit 1", "", 9, -50, 50, false},
              {"z2", "teacher logit 2", "", 5, -50, 50, false},
              {"z3", "teacher logit 3", "", 4, -50, 50, false},
              {"z4", "teacher logit 4", "", -2, -50, 50, false},
              {"z5", "teacher logit 5", "", -3, -50, 50, false},
              {"t_low", "temperature 1", "a temperature to soften at", 1, 0.05, 100, false},
              {"t_high", "temperature 2", "another temperature", 4, 0.05, 100, false},
              {"t_max", "largest T", "the gradient sweep runs T = 1 .. this", 16, 1, 64, true},
              {"classes", "classes", "classes of the random logits", 10, 2, 1000, true},
              {"batch", "batch", "rows of the random logits", 64, 1, 1024, true},
              {"logit_std", "logit std", "standard deviation of the random logits", 2, 0.01, 20, false},
              {"seed", "seed", "the random logits", 1, 0, 1e9, true}};
  l.compute = compute_distillation;
  return l;
}

}  // namespace trainlab
