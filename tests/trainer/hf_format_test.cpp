// Hugging Face directories (trainer/hf_format.h): our weights written as HF's and read back are
// ours bit for bit (GPT's Conv1D transposes undone, --vocab-size padding rows cut on the way out
// and zero on the way in); config.json carries our sizes; a config.json that disagrees with the
// model, or a directory without weights, is an error naming the file and the field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/file.h"
#include "fixtures.h"
#include "test_util.h"
#include "trainer/checkpoint.h"
#include "trainer/hf_format.h"

namespace pretrain::hf_format_test {
namespace {

using pretrain::testing::TempDir;
using pretrain::testing::error_message;
using pretrain::testing::tiny_model;
const Device kCpu{};

TEST(HfFormat, DirectoryOrFile) {
  TempDir tmp;
  EXPECT_TRUE(is_hf_directory(tmp.path()));
  EXPECT_TRUE(is_hf_directory(tmp.file("bert-hf")));
  EXPECT_FALSE(is_hf_directory(tmp.file("bert.safetensors")));
}

TEST(HfFormat, RoundTripIsBitExactForBothModels) {
  for (ModelKind kind : {ModelKind::bert, ModelKind::gpt}) {
    TempDir tmp;
    const ModelConfig c = tiny_model(kind);
    Model model(c, kCpu);
    model.init_weights(5);
    const auto ours = export_weights(model);
    write_hf_model(tmp.path(), c, ours, c.vocab_size, {});
    const auto back = read_hf_model(tmp.path(), c);
    for (const auto& [name, t] : ours) {
      ASSERT_TRUE(back.count(name)) << name;
      EXPECT_EQ(back.at(name).shape, t.shape) << name;
      EXPECT_EQ(back.at(name).data, t.data) << name;
    }
  }
}

TEST(HfFormat, GptWeightsAreHfConv1dLayout) {
  const ModelConfig c = tiny_model(ModelKind::gpt);
  Model model(c, kCpu);
  model.init_weights(5);
  const auto ours = export_weights(model);
  const auto hf = to_hf_tensors(c, ours, c.vocab_size);
  const HostTensor& a = ours.at("transformer.h.0.attn.c_attn.weight");  // [3C, C]
  const HostTensor& b = hf.at("transformer.h.0.attn.c_attn.weight");    // [C, 3C]
  ASSERT_EQ(b.shape, (std::vector<int64_t>{16, 48}));
  EXPECT_EQ(b.data[1 * 48 + 7], a.data[7 * 16 + 1]);
  EXPECT_EQ(hf.at("transformer.wpe.weight").data, ours.at("transformer.wpe.weight").data);  // not Conv1D
}

TEST(HfFormat, PaddedVocabularyRowsStayBehind) {
  TempDir tmp;
  const ModelConfig c = tiny_model(ModelKind::bert, 16, 32);  // 23 real ids, padded to 32 (--vocab-size)
  Model model(c, kCpu);
  model.init_weights(5);
  write_hf_model(tmp.path(), c, export_weights(model), 23, {{"[PAD]", 0}});
  const auto config = nlohmann::json::parse(read_file(tmp.file("config.json")));
  EXPECT_EQ(config["vocab_size"], 23);
  EXPECT_EQ(config["hidden_size"], 16);
  EXPECT_EQ(config["architectures"][0], "BertForPreTraining");
  const auto back = read_hf_model(tmp.path(), c);  // padded again, with zero rows
  const HostTensor& wte = back.at("bert.embeddings.word_embeddings.weight");
  ASSERT_EQ(wte.shape, (std::vector<int64_t>{32, 16}));
  EXPECT_EQ(wte.data[23 * 16], 0.0f);
  EXPECT_EQ(back.at("cls.predictions.bias").shape, (std::vector<int64_t>{32}));
}

TEST(HfFormat, ConfigMismatchNamesTheField) {
  TempDir tmp;
  const ModelConfig c = tiny_model(ModelKind::gpt);
  Model model(c, kCpu);
  model.init_weights(5);
  write_hf_model(tmp.path(), c, export_weights(model), c.vocab_size, {});
  ModelConfig deeper = c;
  deeper.layers = 3;
  const std::string e = error_message([&] { read_hf_model(tmp.path(), deeper); });
  EXPECT_NE(e.find("config.json"), std::string::npos) << e;
  EXPECT_NE(e.find("\"n_layer\" is 2, the model's is 3"), std::string::npos) << e;
  const std::string kind = error_message([&] { read_hf_model(tmp.path(), tiny_model(ModelKind::bert)); });
  EXPECT_NE(kind.find("model_type"), std::string::npos) << kind;
}

TEST(HfFormat, DirectoryWithoutWeightsOrConfig) {
  TempDir tmp;
  const ModelConfig c = tiny_model(ModelKind::bert);
  EXPECT_NE(error_message([&] { read_hf_model(tmp.path(), c); }).find("config.json is missing"), std::string::npos);
  write_file_atomic(tmp.file("config.json"), hf_config(c, c.vocab_size, {}).dump());
  EXPECT_NE(error_message([&] { read_hf_model(tmp.path(), c); }).find("no model.safetensors"), std::string::npos);
}

TEST(HfFormat, TfStyleLayerNormNamesAreRead) {
  const ModelConfig c = tiny_model(ModelKind::bert);
  std::map<std::string, HostTensor> hf;
  hf["bert.embeddings.LayerNorm.gamma"] = {{16}, std::vector<float>(16, 1.5f)};
  hf["bert.embeddings.LayerNorm.beta"] = {{16}, std::vector<float>(16, 0.5f)};
  const auto ours = from_hf_tensors(c, hf);
  EXPECT_EQ(ours.at("bert.embeddings.LayerNorm.weight").data[0], 1.5f);
  EXPECT_EQ(ours.at("bert.embeddings.LayerNorm.bias").data[0], 0.5f);
}

}  // namespace
}  // namespace pretrain::hf_format_test
