// LoaderConfig from and to JSON (loader/config_json.{h,cpp}), the spelling the C API and the Python
// module share: every key sets its field, null keeps the default, the JSON of a config reads back
// as that config, and an unknown key or a value of the wrong type is a UsageError naming the key.
#include "loader/config_json.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>

#include "common/error.h"
#include "test_util.h"

namespace pretrain::config_json_test {
namespace {

using json = nlohmann::json;

TEST(ConfigJson, EveryKeySetsItsField) {
  const LoaderConfig c = loader_config_from_json(json{
      {"sources", "shards/"}, {"weights", {0.25, 3}}, {"kind", "gpt"}, {"batch_size", 7}, {"seq_len", 512},
      {"rank", 3}, {"world_size", 4}, {"seed", uint64_t{1} << 63}, {"shuffle", false}, {"drop_last", false},
      {"epochs", 2}, {"workers", 5}, {"prefetch", 6}, {"device", "cuda:1"}, {"pin_memory", false},
      {"narrow_tokens", false}, {"id_dtype", "int64"}, {"shuffle_window", 99}, {"bin_batches", 8},
      {"add_extra_token", false}, {"samples_per_epoch", 1000}, {"verify_checksums", true},
      {"dynamic_masking", true}, {"mask_probability", 0.2}, {"max_predictions", 30}, {"mask_id", 103},
      {"vocab_size", 30522}, {"special_ids", {0, 101, 102}}, {"consumer_stream", 12345}});
  EXPECT_EQ(c.sources, std::vector<std::string>{"shards/"}) << "one string is a list of one";
  EXPECT_EQ(c.weights, (std::vector<double>{0.25, 3}));
  EXPECT_EQ(c.kind, ModelKind::gpt);
  EXPECT_EQ(c.batch_size, 7);
  EXPECT_EQ(c.seq_len, 512);
  EXPECT_EQ(c.rank, 3);
  EXPECT_EQ(c.world_size, 4);
  EXPECT_EQ(c.seed, uint64_t{1} << 63) << "seeds past INT64_MAX";
  EXPECT_FALSE(c.shuffle);
  EXPECT_FALSE(c.drop_last);
  EXPECT_EQ(c.epochs, 2u);
  EXPECT_EQ(c.workers, 5);
  EXPECT_EQ(c.prefetch, 6);
  EXPECT_EQ(c.device, "cuda:1");
  EXPECT_FALSE(c.pin_memory);
  EXPECT_FALSE(c.narrow_tokens);
  EXPECT_EQ(c.id_dtype, TensorDType::i64);
  EXPECT_EQ(c.shuffle_window, 99);
  EXPECT_EQ(c.bin_batches, 8);
  EXPECT_FALSE(c.add_extra_token);
  EXPECT_EQ(c.samples_per_epoch, 1000);
  EXPECT_TRUE(c.verify_checksums);
  EXPECT_TRUE(c.masking.enabled);
  EXPECT_EQ(c.masking.probability, 0.2);
  EXPECT_EQ(c.masking.max_predictions, 30);
  EXPECT_EQ(c.masking.mask_id, 103);
  EXPECT_EQ(c.masking.vocab_size, 30522);
  EXPECT_EQ(c.masking.special_ids, (std::vector<int64_t>{0, 101, 102}));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(c.consumer_stream), uintptr_t{12345});
}

// null (Python's None) and absent keys keep LoaderConfig's defaults, whatever they are.
TEST(ConfigJson, NullAndAbsentKeysKeepTheDefaults) {
  const json defaults = loader_config_to_json(LoaderConfig{});
  EXPECT_EQ(loader_config_to_json(loader_config_from_json(json::object())), defaults);
  json nulls = json::object();
  for (const auto& [key, value] : defaults.items()) nulls[key] = nullptr;
  EXPECT_EQ(loader_config_to_json(loader_config_from_json(nulls)), defaults);
  EXPECT_EQ(loader_config_to_json(loader_config_from_json(std::string("{\"batch_size\": null}"))), defaults);
}

// to_json names every option from_json takes, and what it writes reads back as the same config.
TEST(ConfigJson, ItsJsonReadsBackAsTheSameConfig) {
  LoaderConfig c;
  c.sources = {"a/", "b/manifest.json"};
  c.weights = {1, 2};
  c.kind = ModelKind::gpt;
  c.seq_len = 1024;
  c.seed = ~uint64_t{0};
  c.id_dtype = TensorDType::i64;
  c.masking.special_ids = {1, 2};
  c.consumer_stream = reinterpret_cast<void*>(uintptr_t{77});
  const json j = loader_config_to_json(c);
  EXPECT_EQ(loader_config_to_json(loader_config_from_json(j)), j);
  EXPECT_EQ(loader_config_to_json(loader_config_from_json(j.dump())), j) << "as text, as the C API takes it";
  EXPECT_EQ(j["kind"], "gpt");
  EXPECT_EQ(j["id_dtype"], "int64");
  EXPECT_EQ(j["seed"], ~uint64_t{0});
  // Every key it writes is one from_json knows (from_json refuses unknown keys).
  for (const auto& [key, value] : j.items()) EXPECT_NO_THROW(loader_config_from_json(json{{key, value}})) << key;
}

TEST(ConfigJson, BadOptionsAreUsageErrorsNamingTheKey) {
  struct Case {
    json options;
    std::string expected;
  };
  const Case cases[] = {
      {{{"batch_sise", 4}}, "unknown loader option 'batch_sise' (options: add_extra_token, batch_size,"},
      {{{"batch_size", "4"}}, "loader option 'batch_size': expected an integer, found string \"4\""},
      {{{"batch_size", 4.5}}, "loader option 'batch_size': expected an integer"},
      {{{"rank", int64_t{1} << 40}}, "loader option 'rank': expected a 32-bit integer"},
      {{{"seed", -1}}, "loader option 'seed': expected a non-negative integer, found number -1"},
      {{{"epochs", 1.0}}, "loader option 'epochs': expected a non-negative integer"},
      {{{"shuffle", 1}}, "loader option 'shuffle': expected true or false"},
      {{{"mask_probability", "0.15"}}, "loader option 'mask_probability': expected a number"},
      {{{"weights", 1}}, "loader option 'weights': expected a list"},
      {{{"weights", {1, "x"}}}, "loader option 'weights': expected a number"},
      {{{"sources", 5}}, "loader option 'sources': expected a string or a list of strings"},
      {{{"sources", {"a", 1}}}, "loader option 'sources': expected a string"},
      {{{"special_ids", {1.5}}}, "loader option 'special_ids': expected an integer"},
      {{{"device", 0}}, "loader option 'device': expected a string"},
      {{{"id_dtype", "float32"}}, "loader option 'id_dtype': expected \"int32\" or \"int64\", found \"float32\""},
      {{{"kind", "t5"}}, "loader option 'kind'"},
      {{{"consumer_stream", -5}}, "loader option 'consumer_stream': expected a non-negative integer"},
      {json::array({1}), "loader options: expected a JSON object, found [1]"},
  };
  for (const Case& c : cases) {
    try {
      loader_config_from_json(c.options);
      ADD_FAILURE() << "no error for " << c.options.dump();
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(c.expected), std::string::npos) << e.what();
    }
  }
  try {
    loader_config_from_json(std::string("{\"batch_size\": 4,"));
    ADD_FAILURE() << "malformed JSON read";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("loader options are not valid JSON"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pretrain::config_json_test
