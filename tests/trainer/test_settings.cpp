// The settings table (trainer/include/adgnn/settings.h): every field of the configurations is in
// it or named below as deliberately outside it; each setting in the configuration line changes
// that line, the others do not; every settable one survives to_yaml and back.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <type_traits>
#include <utility>

#include "adgnn/settings.h"
#include "adgnn/trainer.h"

namespace {

// The number of fields of an aggregate: the most initialisers T{...} takes (each `Any` converts
// to whatever its field is; a nested aggregate takes one, as a whole).
struct Any {
  template <class T>
  operator T() const;
};
template <class T, class Seq, class = void>
struct BraceConstructible : std::false_type {};
template <class T, size_t... I>
struct BraceConstructible<T, std::index_sequence<I...>, std::void_t<decltype(T{(I, Any{})...})>> : std::true_type {};
template <class T, size_t N = 0>
constexpr size_t field_count() {
  if constexpr (BraceConstructible<T, std::make_index_sequence<N + 1>>::value) return field_count<T, N + 1>();
  else return N;
}

// A value other than `v` of the same type.
template <class T>
T changed(const T& v) {
  if constexpr (std::is_same_v<T, bool>) return !v;
  else if constexpr (std::is_same_v<T, std::string>) return v + "x";
  else if constexpr (std::is_same_v<T, adgnn::Backbone>) return v == adgnn::Backbone::Gat ? adgnn::Backbone::Sage : adgnn::Backbone::Gat;
  else if constexpr (std::is_same_v<T, adgnn::Variant>) return v == adgnn::Variant::Ad ? adgnn::Variant::AdFast : adgnn::Variant::Ad;
  else return v + 1;
}

std::set<std::string> setting_keys() {
  std::set<std::string> keys;
  adgnn::TrainConfig c;
  adgnn::for_each_setting([&](const adgnn::Setting& s, auto&) { keys.insert(s.key); }, c);
  return keys;
}

}  // namespace

// A field added to TrainConfig, ModelConfig or PartitionOptions without a setting fails here:
// put it in the table (settings.h) or, if no user sets it, in the counts below with the reason.
TEST(Settings, EveryFieldIsASettingOrNamedAsNone) {
  int model = 0, train = 0, partition = 0;
  adgnn::TrainConfig c;
  adgnn::for_each_setting(
      [&](const adgnn::Setting&, auto& field) {
        const auto* p = reinterpret_cast<const char*>(&field);
        const auto* m = reinterpret_cast<const char*>(&c.model);
        const auto* q = reinterpret_cast<const char*>(&c.partition);
        if (p >= m && p < m + sizeof c.model) ++model;
        else if (p >= q && p < q + sizeof c.partition) ++partition;
        else ++train;
      },
      c);
  // ModelConfig: in_dim and out_dim come from the graph; benefit_range (a trained model's, or a
  // test's) and dropout_rows_read (the tests' reference path) are set in code only.
  EXPECT_EQ(field_count<adgnn::ModelConfig>(), size_t(model) + 4);
  // TrainConfig: model and partition (counted apart); train_fraction and val_fraction (the
  // random split's, fixed); progress (the inverse of --no-progress); stop_requested (the
  // command's signal handlers).
  EXPECT_EQ(field_count<adgnn::TrainConfig>(), size_t(train) + 2 + 4);
  // PartitionOptions: only method and objective are training settings; `adgnn partition` sets
  // the rest (seed, balances, imbalance, ...).
  EXPECT_EQ(partition, 2);
  EXPECT_GT(field_count<adgnn::PartitionOptions>(), size_t(partition));
}

// Each setting in the configuration line (the checkpoint fingerprint) changes the line when it
// changes; the others leave it as it is. (fdelta_precision was once missing from the line.)
TEST(Settings, TheConfigurationLineHoldsExactlyTheSettingsThatChangeTheNumbers) {
  const adgnn::TrainConfig base;
  const std::string line = adgnn::describe(base);
  int in_line = 0;
  adgnn::TrainConfig probe;
  adgnn::for_each_setting(
      [&](const adgnn::Setting& s, auto& field) {
        SCOPED_TRACE(s.key);
        const auto saved = field;
        field = changed(field);
        const std::string other = adgnn::describe(probe);
        field = saved;
        if (s.line == adgnn::Setting::Line::Never) {
          EXPECT_EQ(other, line);
        } else {
          ++in_line;
          EXPECT_NE(other, line);
          EXPECT_NE(other.find(std::string(s.key) + "="), std::string::npos) << other;
        }
      },
      probe);
  EXPECT_GE(in_line, 25);
  EXPECT_NE(line.find("model=gcn variant=plain hidden=64"), std::string::npos) << line;
  EXPECT_EQ(line.find("fdelta_precision"), std::string::npos);  // at its default: not in the line
}

// to_yaml writes every setting a YAML config can hold, and loading it gives them back; unknown
// keys are refused.
TEST(Settings, EverySettableSettingSurvivesYaml) {
  adgnn::TrainConfig c;
  adgnn::for_each_setting(
      [&](const adgnn::Setting& s, auto& field) {
        if (s.source != adgnn::Setting::Source::TestsOnly) field = changed(field);
      },
      c);
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "/settings.yaml";
  {
    std::ofstream out(path);
    out << adgnn::to_yaml(c);
  }
  adgnn::TrainConfig back;
  adgnn::load_train_config(path, back);
  adgnn::for_each_setting(
      [&](const adgnn::Setting& s, const auto& want, const auto& got) {
        if (s.source != adgnn::Setting::Source::TestsOnly) {
          EXPECT_EQ(got, want) << s.key;
        }
      },
      c, back);
  {
    std::ofstream out(path);
    out << "hidden: 8\nhiden: 9\n";
  }
  try {
    adgnn::load_train_config(path, back);
    ADD_FAILURE() << "an unknown key was accepted";
  } catch (const adgnn::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown key 'hiden'"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
  EXPECT_EQ(setting_keys().count("fdelta_precision"), 1u);
}
