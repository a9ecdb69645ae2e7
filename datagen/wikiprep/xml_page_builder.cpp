#include "datagen/wikiprep/xml_page_builder.h"

#include <algorithm>
#include <charconv>
#include <cstring>

#include "common/error.h"

namespace pretrain {
namespace {

// Most a <text bytes="…"> hint may reserve: far above Wikipedia's own 2 MiB page limit
// ($wgMaxArticleSize), low enough that a lying hint cannot exhaust memory.
constexpr uint64_t kMaxTextReserve = uint64_t{256} << 20;
// Text that may grow as strings do before the hint is taken up: a short page (or a fuzzed input
// whose hint lies) never maps the hinted size, and a huge one copies these few bytes once.
constexpr size_t kTextBeforeHint = size_t{64} << 10;

const char* attribute(const char** attrs, const char* name) {
  for (; *attrs; attrs += 2)
    if (std::strcmp(attrs[0], name) == 0) return attrs[1];
  return nullptr;
}

bool is(const char* name, const char* expected) { return std::strcmp(name, expected) == 0; }

}  // namespace

std::string printable_bytes(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    if (c >= 0x20 && c < 0x7f && c != '\\') out += static_cast<char>(c);
    else if (c == '\n') out += "\\n";
    else out += cat("\\x", "0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 15]);
  }
  return out;
}

std::string XmlPageBuilder::start(const char* name, const char** attrs, uint64_t offset) {
  ++depth_;
  switch (depth_) {
    case 1:
      if (!is(name, "mediawiki"))
        return cat("expected the root element <mediawiki>, found <", name, ">: not a MediaWiki XML dump");
      saw_root_ = true;
      if (const char* lang = attribute(attrs, "xml:lang")) site_.lang = lang;
      break;
    case 2:
      if (is(name, "page")) begin_page(offset);
      else if (is(name, "siteinfo")) in_siteinfo_ = site_.present = true;
      break;
    case 3:
      if (in_page_) {
        if (is(name, "title")) start_field(Field::title, &page_.title);
        else if (is(name, "ns")) start_field(Field::ns, &number_);
        else if (is(name, "id")) start_field(Field::page_id, &number_);
        else if (is(name, "revision")) begin_revision();
        else if (is(name, "redirect")) {
          page_.redirect = true;
          const char* target = attribute(attrs, "title");
          page_.redirect_target = target ? target : "";
        }
      } else if (in_siteinfo_) {
        if (is(name, "sitename")) start_field(Field::sitename, &site_.sitename);
        else if (is(name, "dbname")) start_field(Field::dbname, &site_.dbname);
        else if (is(name, "base")) start_field(Field::base, &site_.base);
        else if (is(name, "generator")) start_field(Field::generator, &site_.generator);
        else if (is(name, "namespaces")) in_namespaces_ = true;
      }
      break;
    case 4:
      if (in_revision_) {
        if (is(name, "text")) {
          start_field(Field::text, &page_.text);
          if (in_text()) reserve_text(attribute(attrs, "bytes"));
        } else if (is(name, "id")) {
          start_field(Field::revision_id, &number_);
        }
      } else if (in_namespaces_ && is(name, "namespace")) {
        const char* key = attribute(attrs, "key");
        number_ = key ? key : "";
        int64_t namespace_key = 0;
        if (std::string fault = parse_int("namespace key", namespace_key); !fault.empty()) return fault;
        start_field(Field::namespace_name, &site_.namespaces[namespace_key]);
      }
      break;
    default:
      break;
  }
  return {};
}

std::string XmlPageBuilder::end() {
  std::string fault;
  if (field_ != Field::none && depth_ == field_depth_) fault = end_field();
  switch (depth_) {
    case 2:
      if (in_page_) end_page();
      if (in_siteinfo_ && site_.lang.empty()) site_.lang = language_from_dbname(site_.dbname);
      in_siteinfo_ = false;
      break;
    case 3:
      in_revision_ = false;
      in_namespaces_ = false;
      break;
    default:
      break;
  }
  --depth_;
  return fault;
}

void XmlPageBuilder::start_field(Field f, std::string* target) {
  if (field_ != Field::none) return;  // markup nested inside a kept field: its text stays there
  field_ = f;
  field_depth_ = depth_;
  sink_ = target;
  sink_->clear();
}

std::string XmlPageBuilder::end_field() {
  Field f = field_;
  field_ = Field::none;
  sink_ = nullptr;
  switch (f) {
    case Field::ns: {
      std::string fault = parse_int("ns", page_.ns);
      page_has_ns_ = fault.empty();
      return fault;
    }
    case Field::page_id: return parse_int("id", page_.id);
    case Field::revision_id: return parse_int("revision id", page_.revision_id);
    case Field::text:  // a hint that lied must not leave its reservation on every queued page
      if (page_.text.capacity() > 2 * page_.text.size() + 4096) page_.text.shrink_to_fit();
      return {};
    default: return {};
  }
}

void XmlPageBuilder::begin_page(uint64_t offset) {
  page_ = Page{};
  page_.byte_offset = offset;
  page_.ordinal = pages_started_++;
  page_has_ns_ = false;
  in_page_ = true;
}

void XmlPageBuilder::begin_revision() {
  in_revision_ = true;
  page_.revision_id = -1;
  page_.text.clear();  // only the last revision counts
}

void XmlPageBuilder::end_page() {
  in_page_ = false;
  if (!page_has_ns_) page_.ns = namespace_from_title(page_.title);
  ready_.push_back(std::move(page_));
  page_ = Page{};
}

// <text bytes="N"> says how long the text is: reserving it keeps a huge page at one copy instead
// of the 1.5-2x of doubling. The reservation waits for make_room_for_text.
void XmlPageBuilder::reserve_text(const char* bytes) {
  text_hint_ = 0;
  if (!bytes) return;
  uint64_t n = 0;
  auto [end, ec] = std::from_chars(bytes, bytes + std::strlen(bytes), n);
  if (ec == std::errc() && *end == 0) text_hint_ = std::min<uint64_t>(n, kMaxTextReserve);
}

void XmlPageBuilder::make_room_for_text(size_t more) {
  std::string& text = page_.text;
  if (text_hint_ <= text.capacity() || text.size() + more <= std::max(text.capacity(), kTextBeforeHint)) return;
  text.reserve(text_hint_);
}

std::string XmlPageBuilder::parse_int(std::string_view what, int64_t& out) const {
  std::string_view s = number_;
  while (!s.empty() && std::strchr(" \t\r\n", s.front())) s.remove_prefix(1);
  while (!s.empty() && std::strchr(" \t\r\n", s.back())) s.remove_suffix(1);
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec == std::errc() && end == s.data() + s.size() && !s.empty()) return {};
  return cat("expected an integer in <", what, ">, found \"", printable_bytes(s.substr(0, 40)), "\"");
}

// Old schemas (before 0.6) have no <ns>: the title's prefix names the namespace.
int64_t XmlPageBuilder::namespace_from_title(std::string_view title) const {
  size_t colon = title.find(':');
  if (colon == std::string_view::npos) return 0;
  std::string_view prefix = title.substr(0, colon);
  for (const auto& [key, name] : site_.namespaces)
    if (key != 0 && name == prefix) return key;
  return 0;
}

}  // namespace pretrain
