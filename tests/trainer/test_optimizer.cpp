// FlatAdam against torch::optim::Adam, its parameter and gradient views, checkpoints of the
// torch Adam era, and the training loss against torch's cross entropy.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "adgnn/trainer.h"

namespace {

struct Params {
  std::vector<std::pair<std::string, at::Tensor>> decay, no_decay;
};

Params make_params(torch::Dtype dt, uint64_t seed) {
  torch::manual_seed(seed);
  Params p;
  auto leaf = [&](std::vector<int64_t> shape) { return torch::randn(shape, torch::dtype(dt)).requires_grad_(true); };
  p.decay = {{"w1", leaf({7, 5})}, {"b1", leaf({5})}, {"w2", leaf({5, 3})}};
  p.no_decay = {{"theta", leaf({4})}};
  return p;
}

// Equal results to torch's Adam over several steps, two weight-decay groups, in float32 and
// float64 (the same operations in the same order: equal to the last bit is expected; a 1e-6 /
// 1e-14 relative tolerance allows a vectorised tail that rounds differently).
TEST(FlatAdam, MatchesTorchAdam) {
  for (const auto dt : {torch::kFloat32, torch::kFloat64}) {
    Params ours = make_params(dt, 3), theirs = make_params(dt, 3);
    adgnn::FlatAdam flat({{ours.decay, 5e-4}, {ours.no_decay, 0.0}}, 0.01);
    std::vector<at::Tensor> d, nd;
    for (auto& [n, t] : theirs.decay) d.push_back(t);
    for (auto& [n, t] : theirs.no_decay) nd.push_back(t);
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(d, std::make_unique<torch::optim::AdamOptions>(torch::optim::AdamOptions(0.01).weight_decay(5e-4)));
    groups.emplace_back(nd, std::make_unique<torch::optim::AdamOptions>(torch::optim::AdamOptions(0.01).weight_decay(0)));
    torch::optim::Adam ref(groups, torch::optim::AdamOptions(0.01));
    auto loss_of = [](const Params& p, int step) {
      at::Tensor x = torch::linspace(-1, 1, 7 * 2, p.decay[0].second.options().requires_grad(false)).view({2, 7});
      at::Tensor h = torch::tanh(x.mm(p.decay[0].second) + p.decay[1].second).mm(p.decay[2].second);
      return (h * h).sum() * (1.0 + 0.1 * step) + (p.no_decay[0].second * double(step)).sin().sum();
    };
    const double tol = dt == torch::kFloat32 ? 1e-6 : 1e-14;
    for (int step = 1; step <= 6; ++step) {
      flat.zero_grad();
      ref.zero_grad();
      loss_of(ours, step).backward();
      loss_of(theirs, step).backward();
      flat.step();
      ref.step();
      for (size_t i = 0; i < ours.decay.size(); ++i)
        EXPECT_TRUE(torch::allclose(ours.decay[i].second, theirs.decay[i].second, tol, tol))
            << ours.decay[i].first << " step " << step << " " << dt;
      EXPECT_TRUE(torch::allclose(ours.no_decay[0].second, theirs.no_decay[0].second, tol, tol)) << step;
    }
    EXPECT_EQ(flat.steps(), 6);
  }
}

TEST(FlatAdam, ParametersAndGradientsAreViewsOfItsBuffers) {
  Params p = make_params(torch::kFloat64, 5);
  const at::Tensor before = p.decay[0].second.detach().clone();
  at::Tensor handle = p.decay[0].second;  // another holder of the same tensor (as the model)
  adgnn::FlatAdam flat({{p.decay, 0.0}, {p.no_decay, 0.0}}, 0.01);
  EXPECT_TRUE(torch::equal(handle, before));  // values kept, seen through every holder
  ASSERT_EQ(flat.gradient_buffers().size(), 2u);
  EXPECT_EQ(flat.gradient_buffers()[0].numel(), 7 * 5 + 5 + 5 * 3);
  // Two backward passes accumulate into the buffer (the gradients start as views of it).
  for (int k = 0; k < 2; ++k) (handle * handle).sum().backward();
  EXPECT_TRUE(torch::allclose(handle.grad(), 4 * before));
  EXPECT_TRUE(torch::allclose(flat.gradient_buffers()[0].slice(0, 0, 35).view({7, 5}), 4 * before));
  // zero_grad unsets them; backward sets them again, here two backward passes through two
  // parameters of the first group: packing copies them in, as views of the buffer again, and the
  // group's third parameter, which no backward reached, reads zero.
  flat.zero_grad();
  EXPECT_FALSE(handle.grad().defined());
  const at::Tensor b1 = p.decay[1].second;
  for (int k = 0; k < 2; ++k) (handle * handle).sum().add((b1 * 3.0).sum()).backward();
  EXPECT_TRUE(torch::allclose(handle.grad(), 4 * before));
  const at::Tensor buf = flat.gradient_buffers()[0];
  EXPECT_TRUE(torch::allclose(buf.slice(0, 0, 35).view({7, 5}), 4 * before));
  EXPECT_TRUE(torch::allclose(buf.slice(0, 35, 40), torch::full({5}, 6.0, buf.options())));
  EXPECT_EQ(buf.slice(0, 40).abs().sum().item<double>(), 0.0);
  EXPECT_EQ(handle.grad().data_ptr(), buf.data_ptr());  // a view of the buffer again
  EXPECT_EQ(flat.gradient_buffers()[1].abs().sum().item<double>(), 0.0);
  // Every parameter of the group reached (one concatenation), after a zero_grad.
  flat.zero_grad();
  const at::Tensor w2 = p.decay[2].second;
  (handle.sum() + b1.sum() + (w2 * 2.0).sum()).backward();
  EXPECT_EQ(flat.gradient_buffers()[0].min().item<double>(), 1.0);
  EXPECT_EQ(flat.gradient_buffers()[0].slice(0, 40).min().item<double>(), 2.0);
  // A step writes through the views: the parameter moves against its gradient.
  flat.zero_grad();
  (handle.sum()).backward();
  flat.step();
  EXPECT_TRUE(torch::allclose(handle, before - 0.01, 1e-9, 1e-9));
  // The all-reduce's one buffer holds both groups' gradients (shared storage, group order).
  const std::vector<at::Tensor> red = flat.reduction_buffers();
  ASSERT_EQ(red.size(), 1u);
  ASSERT_EQ(red[0].numel(), 7 * 5 + 5 + 5 * 3 + 4);
  red[0].fill_(2.5);
  EXPECT_EQ(flat.gradient_buffers()[0].min().item<double>(), 2.5);
  EXPECT_EQ(flat.gradient_buffers()[1].min().item<double>(), 2.5);
  EXPECT_EQ(p.no_decay[0].second.grad().min().item<double>(), 2.5);
  // The state views are writable (checkpoint loading).
  for (auto& [name, s] : flat.named_state()) {
    if (name == "exp_avg/w1") s.fill_(0.5);
  }
  for (auto& [name, s] : flat.named_state()) {
    if (name == "exp_avg/w1") {
      EXPECT_EQ(s.min().item<double>(), 0.5);
    }
  }
  EXPECT_THROW(flat.set_steps(-1), std::invalid_argument);
}

// Groups of different dtypes keep a buffer each, and the all-reduce gets each.
TEST(FlatAdam, GroupsOfDifferentTypesReduceApart) {
  Params a = make_params(torch::kFloat64, 6), b = make_params(torch::kFloat32, 7);
  adgnn::FlatAdam flat({{a.decay, 0.0}, {b.no_decay, 0.0}}, 0.01);
  const std::vector<at::Tensor> red = flat.reduction_buffers();
  ASSERT_EQ(red.size(), 2u);
  EXPECT_EQ(red[0].scalar_type(), torch::kFloat64);
  EXPECT_EQ(red[1].scalar_type(), torch::kFloat32);
  EXPECT_EQ(red[1].numel(), 4);
}

at::Tensor tensor_of(const adgnn::H5Array& a) {
  return torch::from_blob(const_cast<char*>(a.bytes.data()), a.shape, torch::kFloat32).clone();
}

// Checkpoints written before FlatAdam held torch::optim::Adam's archive ("optimizer"): such a
// checkpoint (made here by rewriting a current one) resumes to the uninterrupted run's result.
TEST(FlatAdam, TorchAdamCheckpointsOfEarlierVersionsResume) {
  const auto dir = std::filesystem::temp_directory_path() / ("adgnn-optimizer-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  adgnn::CsbmParams gp;
  gp.nodes = 600;
  gp.classes = 3;
  gp.features = 12;
  gp.homophily = 0.3;
  gp.seed = 4;
  const adgnn::Graph g = adgnn::generate_csbm(gp);
  adgnn::TrainConfig c;
  c.model.variant = adgnn::Variant::AdFast;  // theta: a second, undecayed group
  c.model.hidden = 16;
  c.model.layers = 3;
  c.model.dropout = 0.5;
  c.epochs = 16;
  c.progress = false;
  c.threads = 1;
  c.checkpoint = (dir / "straight.h5").string();
  const auto straight = adgnn::train_run(g, c, 0);
  c.checkpoint = (dir / "legacy.h5").string();
  c.epochs = 8;
  adgnn::train_run(g, c, 0);

  std::map<std::string, std::string> attrs;
  auto arrays = adgnn::read_arrays_h5(c.checkpoint, &attrs);
  const int64_t steps = std::stoll(attrs.at("adam_steps"));
  EXPECT_EQ(steps, 8);
  adgnn::ModelConfig mc = c.model;
  mc.in_dim = g.features.cols;
  mc.out_dim = g.num_classes;
  const adgnn::Model model(mc);  // the parameters' names in the trainer's order
  std::vector<at::Tensor> decay, no_decay;
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (const auto& [name, p] : model.named_parameters()) {
    at::Tensor t = tensor_of(arrays.at("param/" + name)).requires_grad_(true);
    (name.rfind("theta.", 0) == 0 ? no_decay : decay).push_back(t);
    named.emplace_back(name, t);
  }
  ASSERT_FALSE(no_decay.empty());
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay);
  groups.emplace_back(no_decay);
  torch::optim::Adam legacy(groups, torch::optim::AdamOptions(c.lr));
  for (const auto& [name, t] : named) {
    auto st = std::make_unique<torch::optim::AdamParamState>();
    st->step(steps);
    st->exp_avg(tensor_of(arrays.at("adam/exp_avg/" + name)));
    st->exp_avg_sq(tensor_of(arrays.at("adam/exp_avg_sq/" + name)));
    legacy.state()[t.unsafeGetTensorImpl()] = std::move(st);
  }
  torch::serialize::OutputArchive archive;
  legacy.save(archive);
  std::ostringstream os;
  archive.save_to(os);
  for (auto it = arrays.begin(); it != arrays.end();)
    it = it->first.rfind("adam/", 0) == 0 ? arrays.erase(it) : std::next(it);
  attrs.erase("adam_steps");
  arrays["optimizer"] = adgnn::H5Array{"u8", {int64_t(os.str().size())}, os.str()};
  adgnn::write_arrays_h5(c.checkpoint, arrays, attrs);

  c.epochs = 16;
  c.resume = true;
  const auto resumed = adgnn::train_run(g, c, 0);
  EXPECT_EQ(resumed.best_epoch, straight.best_epoch);
  EXPECT_EQ(resumed.best_val, straight.best_val);
  EXPECT_EQ(resumed.test_at_best, straight.test_at_best);
  std::map<std::string, std::string> a1, a2;
  const auto p1 = adgnn::read_arrays_h5((dir / "straight.h5").string(), &a1);
  const auto p2 = adgnn::read_arrays_h5(c.checkpoint, &a2);
  for (const auto& [name, arr] : p1) {
    if (name.rfind("param/", 0) == 0) {
      EXPECT_EQ(arr.bytes, p2.at(name).bytes) << name;
    }
  }
  // An unreadable archive is refused with the file's name.
  arrays = adgnn::read_arrays_h5(c.checkpoint, &attrs);
  for (auto it = arrays.begin(); it != arrays.end();)
    it = it->first.rfind("adam/", 0) == 0 ? arrays.erase(it) : std::next(it);
  arrays["optimizer"] = adgnn::H5Array{"u8", {3}, "abc"};
  adgnn::write_arrays_h5(c.checkpoint, arrays, attrs);
  try {
    adgnn::train_run(g, c, 0);
    ADD_FAILURE() << "a corrupt optimizer archive was accepted";
  } catch (const adgnn::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("legacy.h5"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
