// common/model_kind.h: "bert" and "gpt", the two model families every stage names the same way.
#include "common/model_kind.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace pretrain::model_kind_test {
namespace {

TEST(ModelKind, NamesRoundTripAndOthersAreRefusedNamingTheOption) {
  for (ModelKind k : {ModelKind::bert, ModelKind::gpt}) EXPECT_EQ(parse_model_kind(model_kind_name(k), "x"), k);
  try {
    parse_model_kind("t5", "--model");
    ADD_FAILURE() << "accepted t5";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--model"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("\"t5\""), std::string::npos) << e.what();
  }
}

TEST(ModelKind, NamesAreExactlyBertAndGpt) {
  EXPECT_STREQ(model_kind_name(ModelKind::bert), "bert");
  EXPECT_STREQ(model_kind_name(ModelKind::gpt), "gpt");
  EXPECT_EQ(parse_model_kind("gpt", "--model"), ModelKind::gpt);
  for (const char* bad : {"BERT", "Gpt", "", "bert ", "gpt2"}) EXPECT_THROW(parse_model_kind(bad, "--model"), UsageError) << bad;
}

}  // namespace
}  // namespace pretrain::model_kind_test
