// json_integer & co.: integers out of JSON files, refusing what nlohmann's get<T>() would cast
// (a float, which past T's range is undefined behaviour) or wrap.
#include "common/json_integer.h"

#include <gtest/gtest.h>

#include <string>

namespace pretrain::json_integer_test {
namespace {

using json = nlohmann::json;

// Expects a json::type_error whose message holds `part`.
template <typename F>
void expect_type_error(F&& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no exception, expected one mentioning " << part;
  } catch (const json::type_error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(JsonInteger, TakesIntegersThatFit) {
  EXPECT_EQ(json_integer<int64_t>(json::parse("-9223372036854775808")), INT64_MIN);
  EXPECT_EQ(json_integer<uint64_t>(json::parse("18446744073709551615")), UINT64_MAX);
  EXPECT_EQ(json_integer<int>(json::parse("2147483647")), 2147483647);
  EXPECT_EQ(json_integer<uint64_t>(json::parse("0")), 0u);
}

TEST(JsonInteger, RefusesFloatsOtherTypesAndWhatDoesNotFit) {
  // The fuzzed safetensors shape: parsed as a double, 4.6e20, which get<int64_t>() cast (UBSan).
  expect_type_error([] { json_integer<int64_t>(json::parse("461168601842738793047")); }, "but is 4.611686018427388e+20");
  expect_type_error([] { json_integer<int64_t>(json::parse("2.5")); }, "but is 2.5");  // get<> truncated it to 2
  expect_type_error([] { json_integer<int64_t>(json::parse("128.0")); }, "type must be an integer");
  expect_type_error([] { json_integer<int64_t>(json::parse("\"7\"")); }, "but is string");
  expect_type_error([] { json_integer<int64_t>(json::parse("null")); }, "but is null");
  // Past the type's range: get<> wrapped these.
  expect_type_error([] { json_integer<int64_t>(json::parse("9223372036854775808")); }, "to 9223372036854775807");
  expect_type_error([] { json_integer<uint64_t>(json::parse("-1")); }, "from 0 to 18446744073709551615");
  expect_type_error([] { json_integer<int>(json::parse("2147483648")); }, "to 2147483647");
}

TEST(JsonInteger, ArraysMapsAndFallbacks) {
  EXPECT_EQ(json_integers<int64_t>(json::parse("[1, -2, 3]")), (std::vector<int64_t>{1, -2, 3}));
  expect_type_error([] { json_integers<int64_t>(json::parse("[1, 2e30]")); }, "but is 2e+30");
  expect_type_error([] { json_integers<int64_t>(json::parse("{}")); }, "type must be array");
  EXPECT_EQ(json_integer_map<int64_t>(json::parse(R"({"a": 1, "b": 2})")), (std::map<std::string, int64_t>{{"a", 1}, {"b", 2}}));
  expect_type_error([] { json_integer_map<int64_t>(json::parse(R"({"a": 0.5})")); }, "but is 0.5");
  const json object = json::parse(R"({"seq_len": 128, "bad": 1e300})");
  EXPECT_EQ(json_integer_or<int64_t>(object, "seq_len", 0), 128);
  EXPECT_EQ(json_integer_or<int64_t>(object, "absent", 7), 7);
  expect_type_error([&] { json_integer_or<int64_t>(object, "bad", 0); }, "but is 1e+300");
  expect_type_error([] { json_integer_or<int64_t>(json::parse("[]"), "x", 0); }, "cannot use value() with array");
}

}  // namespace
}  // namespace pretrain::json_integer_test
