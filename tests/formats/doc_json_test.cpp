// Document JSON lines, read through nlohmann's SAX parser: the four fields, what is skipped,
// UTF-8 and surrogate repairs (replaced and counted, not refused), duplicate keys, deep nesting,
// and errors that name the file, line and column. (Writing is tested with the shards, in
// doc_shards_test.cpp: its bytes are the shards' bytes.)
#include "formats/doc_json.h"

#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/utf8.h"

namespace pretrain::doc_json_test {
namespace {

const Where kWhere = Where::at_line("docs.jsonl", 7);

// The document of one line, and the replacements made.
std::pair<Document, size_t> read_line(const std::string& line) {
  DocJsonLineReader reader;
  Document doc;
  size_t replaced = reader.read(line, doc, kWhere);
  return {doc, replaced};
}

// The message of the error that reading `line` throws ("" when it throws none).
std::string error_of(const std::string& line) {
  DocJsonLineReader reader;
  Document doc;
  try {
    reader.read(line, doc, kWhere);
  } catch (const Error& e) {
    EXPECT_EQ(e.where().file, "docs.jsonl");
    EXPECT_EQ(e.where().line, 7);
    return e.what();
  }
  return "";
}

#define EXPECT_CONTAINS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

TEST(DocJson, ReadsTheFourFieldsAndDefaultsTheOthers) {
  auto [doc, replaced] = read_line(R"({"id":"1","url":"u","title":"T","text":"a\nb"})");
  EXPECT_EQ(doc, (Document{"1", "u", "T", "a\nb"}));
  EXPECT_EQ(replaced, 0u);
  // A reused document loses the fields the next line does not give.
  DocJsonLineReader reader;
  reader.read(R"({"id":"1","url":"u","title":"T","text":"x"})", doc, kWhere);
  reader.read(R"( {"text":"only"} )", doc, kWhere);
  EXPECT_EQ(doc, (Document{"", "", "", "only"}));
}

TEST(DocJson, DecodesEveryEscape) {
  auto [doc, replaced] = read_line(R"({"text":"\"\\\/\b\f\n\r\t\u00e9\u0000\u20AC"})");
  EXPECT_EQ(doc.text, "\"\\/\b\f\n\r\t" "é" + std::string(1, '\0') + "€");
  EXPECT_EQ(replaced, 0u);
}

TEST(DocJson, InvalidUtf8IsReplacedAndCounted) {
  // \xFF (1), a cut emoji (1), an overlong '/' (2); in a skipped field (1) and in a key (1) too.
  auto [doc, replaced] =
      read_line("{\"text\":\"a\xFF b\xF0\x9F\x98\",\"title\":\"\xC0\xAF\",\"meta\":\"\x80\",\"k\xFE\":1}");
  EXPECT_EQ(doc.text, "a\xEF\xBF\xBD b\xEF\xBF\xBD");
  EXPECT_EQ(doc.title, "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(replaced, 6u);
  EXPECT_TRUE(is_valid_utf8(doc.text + doc.title));
  // Valid multi-byte text next to the repairs is kept as it is.
  EXPECT_EQ(read_line("{\"text\":\"日本\xFF語 😀\"}").first.text, "日本\xEF\xBF\xBD語 😀");
}

TEST(DocJson, LoneSurrogatesBecomeReplacementCharacters) {
  auto [doc, replaced] =
      read_line(R"({"text":"\ud800 high, \udc00 low, \uD800\u0041 then A, end \udbff"})");
  EXPECT_EQ(doc.text, "\xEF\xBF\xBD high, \xEF\xBF\xBD low, \xEF\xBF\xBD" "A then A, end \xEF\xBF\xBD");
  EXPECT_EQ(replaced, 4u);
  // "\\ud800" is a backslash and the letters "ud800", not an escape.
  auto [literal, none] = read_line(R"({"text":"\\ud800"})");
  EXPECT_EQ(literal.text, "\\ud800");
  EXPECT_EQ(none, 0u);
}

TEST(DocJson, SurrogatePairsDecodeToOneCharacter) {
  auto [doc, replaced] = read_line(R"({"text":"\ud83d\ude00 \uD800\uDC00 \ud800\ud83d\ude00"})");
  EXPECT_EQ(doc.text, "😀 \xF0\x90\x80\x80 \xEF\xBF\xBD😀");  // the last: a lone high, then a pair
  EXPECT_EQ(replaced, 1u);
}

TEST(DocJson, SkipsNestedObjectsAndArrays) {
  auto [doc, replaced] = read_line(
      R"({"meta":{"text":5,"id":"inner","a":[1,{"title":[]},[[],{}]]},"list":[{"text":"no"}],"text":"yes"})");
  EXPECT_EQ(doc, (Document{"", "", "", "yes"}));
  EXPECT_EQ(replaced, 0u);
}

TEST(DocJson, SkipsNumbersBooleansAndNull) {
  auto [doc, replaced] = read_line(
      R"({"n":-1.5e3,"u":18446744073709551615,"i":-3,"z":0,"b":true,"f":false,"x":null,"text":"t"})");
  EXPECT_EQ(doc.text, "t");
  EXPECT_EQ(replaced, 0u);
  // nlohmann refuses a number past a double's range (Python reads it as inf; the hand-written
  // parser before it only checked the syntax). Neither wikiextractor nor wikiprep writes numbers.
  EXPECT_CONTAINS(error_of(R"({"big":1e400,"text":"t"})"), "number overflow");
}

TEST(DocJson, RefusesAFieldThatIsNotAString) {
  const std::pair<std::string, std::string> cases[] = {
      {R"({"id":"1", "text" : 5})", "found a number (column 21)"},
      {R"({"id":"1", "text" : true})", "found a boolean (column 21)"},
      {R"({"id":"1", "text" : null})", "found null (column 21)"},
      {R"({"id":"1", "text" : {"a":"b"}})", "found an object (column 21)"},
      {R"({"id":"1", "text" : ["a"]})", "found an array (column 21)"},
  };
  for (const auto& [line, found] : cases) {
    std::string error = error_of(line);
    EXPECT_CONTAINS(error, "expected field 'text' to be a string, " + found);
  }
  EXPECT_CONTAINS(error_of(R"({"title":1.5,"text":"t"})"), "expected field 'title' to be a string, found a number (column 10)");
  EXPECT_CONTAINS(error_of(R"({"title":"t"})"), "expected field 'text' (a string) in the JSON object (column 14)");
  EXPECT_CONTAINS(error_of("{}"), "expected field 'text'");
}

TEST(DocJson, RefusesWhatIsNotAnObject) {
  for (const char* line : {R"(["text"])", R"("text")", "5", "null", "  true"})
    EXPECT_CONTAINS(error_of(line), "expected '{' starting a JSON object, found");
  EXPECT_CONTAINS(error_of("  [1]"), "found an array (column 3)");
}

TEST(DocJson, TruncatedLinesNameWhatIsMissing) {
  EXPECT_CONTAINS(error_of(R"({"text":"abc)"), "missing closing quote");
  EXPECT_CONTAINS(error_of(R"({"text":"abc")"), "expected ',' or '}' after a field, found the end of the line (column 14)");
  EXPECT_CONTAINS(error_of(R"({"text":)"), "expected a JSON value, found the end of the line (column 9)");
  EXPECT_CONTAINS(error_of(R"({"text")"), "expected ':' after a field name, found the end of the line");
  EXPECT_CONTAINS(error_of("{"), "expected '\"' starting a field name, found the end of the line (column 2)");
  EXPECT_CONTAINS(error_of(R"({"text":"x","a":[1,2)"), "expected ',' or ']' after a value, found the end of the line");
  EXPECT_CONTAINS(error_of(R"({"text":"\u12)"), "'\\u' must be followed by 4 hex digits");
  EXPECT_CONTAINS(error_of(R"({"text":"x","n":tru)"), "invalid literal");
  EXPECT_CONTAINS(error_of(R"({"text":"x","n":-)"), "invalid number");
  EXPECT_CONTAINS(error_of(""), "expected a JSON value, found the end of the line (column 1)");
}

TEST(DocJson, RefusesTrailingGarbage) {
  EXPECT_CONTAINS(error_of(R"({"text":"x"}})"), "expected the end of the line after the JSON object, found '}' (column 13)");
  EXPECT_CONTAINS(error_of(R"({"text":"x"} {"text":"y"})"), "expected the end of the line after the JSON object, found an object");
  EXPECT_CONTAINS(error_of(R"({"text":"x"} trailing)"), "expected the end of the line after the JSON object, found invalid literal");
  EXPECT_EQ(error_of("{\"text\":\"x\"} \t\r"), "");  // whitespace is not garbage
}

// As in Python's json and wikiextractor: of a repeated field the last wins; but each value must
// be a string, the overridden one too.
TEST(DocJson, DuplicateKeysLastWins) {
  EXPECT_EQ(read_line(R"({"text":"a","title":"t1","text":"b","title":"t2"})").first, (Document{"", "", "t2", "b"}));
  EXPECT_CONTAINS(error_of(R"({"text":"a","text":5})"), "expected field 'text' to be a string, found a number");
  EXPECT_CONTAINS(error_of(R"({"text":5,"text":"b"})"), "expected field 'text' to be a string, found a number");
}

TEST(DocJson, DeepNestingIsRefusedWithoutACrash) {
  auto nested = [](int depth) {  // the line's object and depth - 1 arrays inside it
    return "{\"a\":" + std::string(depth - 1, '[') + std::string(depth - 1, ']') + ",\"text\":\"t\"}";
  };
  EXPECT_EQ(read_line(nested(DocJsonLineReader::kMaxDepth)).first.text, "t");
  EXPECT_CONTAINS(error_of(nested(DocJsonLineReader::kMaxDepth + 1)), "expected JSON nested at most 64 deep (column 69)");
  EXPECT_CONTAINS(error_of(nested(1000000)), "nested at most 64 deep");
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  EXPECT_CONTAINS(error_of(objects), "nested at most 64 deep");
}

TEST(DocJson, ControlCharactersAndBadEscapesAreRefused) {
  EXPECT_CONTAINS(error_of("{\"text\":\"raw\ttab\"}"), "control character U+0009 (HT) must be escaped");
  EXPECT_CONTAINS(error_of(R"({"text":"bad \q escape"})"), "forbidden character after backslash (last read: '\"bad \\q')");
  EXPECT_CONTAINS(error_of("{\"text\":\"x\\\xC3\xA9\"}"), "forbidden character after backslash");
}

// Columns count the bytes of the line as read, before its repairs; a reader that repaired one
// line does not shift the columns of the next.
TEST(DocJson, ColumnsCountTheLineAsRead) {
  DocJsonLineReader reader;
  Document doc;
  auto error = [&](const std::string& line) {
    try {
      reader.read(line, doc, kWhere);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_CONTAINS(error("{\"text\":\"\xFF\xFF\",x}"), "(column 14)");  // 'x' is byte 14 of the line
  EXPECT_CONTAINS(error("{\"text\":\"\xF0\x9F\x98\",x}"), "(column 15)");
  EXPECT_EQ(reader.read("{\"text\":\"\xFF\"}", doc, kWhere), 1u);
  EXPECT_CONTAINS(error(R"({"text":"ok",x})"), "(column 14)");
  EXPECT_CONTAINS(error(R"({"text":"\ud800",x})"), "(column 18)");  // \ufffd is as long as \ud800
}

// Long strings (32 bytes or more) are decoded by our fast path, short ones by nlohmann: both must
// give what nlohmann's own parser gives, in every field, in keys and in skipped values.
TEST(DocJson, LongStringsDecodeLikeNlohmann) {
  const std::string bodies[] = {
      R"(plain)", R"(\"quoted\" \\ back\/slash)", R"(\b\f\n\r\t)", R"(\u00e9\u20AC\u0000\uFFFF)",
      R"(\ud83d\ude00\uD800\uDC00)", "日本語 עברית 😀", R"(\\u0041 is not an escape)",
  };
  for (const std::string& body : bodies) {
    for (size_t pad : {0, 40}) {
      std::string s = std::string(pad, 'x') + body + std::string(pad, 'y');
      std::string line = "{\"" + s + "\":1,\"id\":\"" + s + "\",\"meta\":[\"" + s + "\"],\"text\":\"" + s + "\"}";
      std::string expected = nlohmann::json::parse("\"" + s + "\"").get<std::string>();
      auto [doc, replaced] = read_line(line);
      EXPECT_EQ(doc.text, expected) << line;
      EXPECT_EQ(doc.id, expected) << line;
      EXPECT_EQ(replaced, 0u);
    }
  }
  // Long keys count among the strings too: the fields after them get the right values.
  std::string key(40, 'k'), value(50, 'v');
  auto [doc, replaced] = read_line("{\"" + key + "\":\"" + key + "\",\"m\":{\"" + key + "\":[\"" + key +
                                   "\"]},\"title\":\"t\",\"text\":\"" + value + "\"}");
  EXPECT_EQ(doc, (Document{"", "", "t", value}));
  EXPECT_CONTAINS(error_of("{\"" + key + "\":1}"), "expected field 'text'");
}

// An escape, a non-ASCII character or an invalid byte at every offset of a text as long as two
// SSE2 blocks and a half: the pre-pass's 16-byte, 8-byte and byte-at-a-time scans each stop at it.
TEST(DocJson, EscapesAtEveryOffsetReadBack) {
  const std::pair<std::string, std::string> cases[] = {
      {"\\\"", "\""}, {"\\\\", "\\"}, {"\\n", "\n"}, {"\\u00e9", "é"}, {"\\ud83d\\ude00", "😀"},
      {"\xC3\xA9", "é"}, {"\xE6\x97\xA5", "日"}, {"\xFF", "\xEF\xBF\xBD"}, {"\\udc00", "\xEF\xBF\xBD"},
  };
  for (const auto& [raw, value] : cases) {
    for (size_t at = 0; at <= 40; ++at) {
      std::string text(40, 'a');
      auto [doc, replaced] = read_line("{\"text\":\"" + text.substr(0, at) + raw + text.substr(at) + "\"}");
      EXPECT_EQ(doc.text, text.substr(0, at) + value + text.substr(at)) << raw << " at " << at;
      EXPECT_EQ(replaced, value == "\xEF\xBF\xBD" ? 1u : 0u);
    }
  }
}

// What the fast path must leave to nlohmann (or to the repairs) in a long string.
TEST(DocJson, LongStringsWithErrorsOrRepairsGoThroughNlohmann) {
  const std::string pad(40, 'x');
  EXPECT_CONTAINS(error_of("{\"text\":\"" + pad + "\\q\"}"), "forbidden character after backslash");
  EXPECT_CONTAINS(error_of("{\"text\":\"" + pad + "\\u12\"}"), "'\\u' must be followed by 4 hex digits");
  EXPECT_CONTAINS(error_of("{\"text\":\"" + pad + "\t\"}"), "control character U+0009 (HT)");
  auto [doc, replaced] = read_line("{\"text\":\"" + pad + "\xFF\\ud800\"}");
  EXPECT_EQ(doc.text, pad + "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(replaced, 2u);
  // Columns after a long string still count the line as read: 'x' is byte 9 + 40 + 2 + 1.
  EXPECT_CONTAINS(error_of("{\"text\":\"" + pad + "\",x}"), "(column 52)");
  EXPECT_CONTAINS(error_of("{\"id\":\"" + pad + "\", \"text\" : 5}"), "found a number (column 60)");
  EXPECT_CONTAINS(error_of("\"" + pad + "\""), "expected '{' starting a JSON object, found a string");
}

// An error in a long string quotes the end of what was read, not the whole string.
TEST(DocJson, ErrorsStayShort) {
  std::string error = error_of("{\"text\":\"" + std::string(1 << 20, 'x'));
  EXPECT_CONTAINS(error, "missing closing quote (last read: '…xxxx");
  EXPECT_LT(error.size(), 200u);
  error = error_of("{\"text\":\"" + std::string(100, 'x') + "日本語\t\"}");
  EXPECT_TRUE(is_valid_utf8(error)) << error;  // cut at a character boundary
}

}  // namespace
}  // namespace pretrain::doc_json_test
