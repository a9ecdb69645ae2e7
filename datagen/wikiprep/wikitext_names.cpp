// The tables the wikitext cleaner looks names up in: HTML entities, interlanguage prefixes, the
// built-in File and Category namespace names.
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/utf8.h"
#include "datagen/wikiprep/wikitext.h"
#include "datagen/wikiprep/wikitext_internal.h"

namespace pretrain {
namespace {

struct Entity {
  std::string_view name;
  char32_t code_point;
};

// The HTML 4 entities and the HTML 5 ones that turn up in wikitext, sorted by name (byte order).
constexpr Entity kEntities[] = {
  {"AElig", 0xC6}, {"Aacute", 0xC1}, {"Acirc", 0xC2}, {"Agrave", 0xC0}, {"Alpha", 0x391},
  {"Aring", 0xC5}, {"Atilde", 0xC3}, {"Auml", 0xC4}, {"Beta", 0x392}, {"Ccedil", 0xC7},
  {"Chi", 0x3A7}, {"Dagger", 0x2021}, {"Delta", 0x394}, {"ETH", 0xD0}, {"Eacute", 0xC9},
  {"Ecirc", 0xCA}, {"Egrave", 0xC8}, {"Epsilon", 0x395}, {"Eta", 0x397}, {"Euml", 0xCB},
  {"Gamma", 0x393}, {"Hat", 0x5E}, {"Iacute", 0xCD}, {"Icirc", 0xCE}, {"Igrave", 0xCC},
  {"Iota", 0x399}, {"Iuml", 0xCF}, {"Kappa", 0x39A}, {"Lambda", 0x39B}, {"MediumSpace", 0x205F},
  {"Mu", 0x39C}, {"NoBreak", 0x2060}, {"Ntilde", 0xD1}, {"Nu", 0x39D}, {"OElig", 0x152},
  {"Oacute", 0xD3}, {"Ocirc", 0xD4}, {"Ograve", 0xD2}, {"Omega", 0x3A9}, {"Omicron", 0x39F},
  {"Oslash", 0xD8}, {"Otilde", 0xD5}, {"Ouml", 0xD6}, {"Phi", 0x3A6}, {"Pi", 0x3A0},
  {"Prime", 0x2033}, {"Psi", 0x3A8}, {"Rho", 0x3A1}, {"Scaron", 0x160}, {"Sigma", 0x3A3},
  {"THORN", 0xDE}, {"Tau", 0x3A4}, {"Theta", 0x398}, {"Uacute", 0xDA}, {"Ucirc", 0xDB},
  {"Ugrave", 0xD9}, {"Upsilon", 0x3A5}, {"Uuml", 0xDC}, {"Xi", 0x39E}, {"Yacute", 0xDD},
  {"Yuml", 0x178}, {"ZeroWidthSpace", 0x200B}, {"Zeta", 0x396}, {"aacute", 0xE1}, {"acirc", 0xE2},
  {"acute", 0xB4}, {"aelig", 0xE6}, {"agrave", 0xE0}, {"alefsym", 0x2135}, {"alpha", 0x3B1},
  {"amp", 0x26}, {"and", 0x2227}, {"ang", 0x2220}, {"apos", 0x27}, {"aring", 0xE5}, {"ast", 0x2A},
  {"asymp", 0x2248}, {"atilde", 0xE3}, {"auml", 0xE4}, {"bdquo", 0x201E}, {"beta", 0x3B2},
  {"brvbar", 0xA6}, {"bsol", 0x5C}, {"bull", 0x2022}, {"cap", 0x2229}, {"caret", 0x2041},
  {"ccedil", 0xE7}, {"cedil", 0xB8}, {"cent", 0xA2}, {"centerdot", 0xB7}, {"check", 0x2713},
  {"chi", 0x3C7}, {"circ", 0x2C6}, {"clubs", 0x2663}, {"colon", 0x3A}, {"comma", 0x2C},
  {"commat", 0x40}, {"cong", 0x2245}, {"copy", 0xA9}, {"crarr", 0x21B5}, {"cup", 0x222A},
  {"curren", 0xA4}, {"dArr", 0x21D3}, {"dagger", 0x2020}, {"darr", 0x2193}, {"dash", 0x2010},
  {"deg", 0xB0}, {"delta", 0x3B4}, {"diams", 0x2666}, {"divide", 0xF7}, {"dollar", 0x24},
  {"eacute", 0xE9}, {"ecirc", 0xEA}, {"egrave", 0xE8}, {"ell", 0x2113}, {"empty", 0x2205},
  {"emsp", 0x2003}, {"ensp", 0x2002}, {"epsilon", 0x3B5}, {"equals", 0x3D}, {"equiv", 0x2261},
  {"eta", 0x3B7}, {"eth", 0xF0}, {"euml", 0xEB}, {"euro", 0x20AC}, {"excl", 0x21},
  {"exist", 0x2203}, {"female", 0x2640}, {"flat", 0x266D}, {"fnof", 0x192}, {"forall", 0x2200},
  {"frac12", 0xBD}, {"frac14", 0xBC}, {"frac34", 0xBE}, {"frasl", 0x2044}, {"gamma", 0x3B3},
  {"ge", 0x2265}, {"grave", 0x60}, {"gt", 0x3E}, {"hArr", 0x21D4}, {"hairsp", 0x200A},
  {"half", 0xBD}, {"harr", 0x2194}, {"hearts", 0x2665}, {"hellip", 0x2026}, {"horbar", 0x2015},
  {"hyphen", 0x2010}, {"iacute", 0xED}, {"icirc", 0xEE}, {"iexcl", 0xA1}, {"igrave", 0xEC},
  {"image", 0x2111}, {"infin", 0x221E}, {"int", 0x222B}, {"iota", 0x3B9}, {"iquest", 0xBF},
  {"isin", 0x2208}, {"iuml", 0xEF}, {"kappa", 0x3BA}, {"lArr", 0x21D0}, {"lambda", 0x3BB},
  {"lang", 0x2329}, {"laquo", 0xAB}, {"larr", 0x2190}, {"lbrace", 0x7B}, {"lbrack", 0x5B},
  {"lceil", 0x2308}, {"lcub", 0x7B}, {"ldquo", 0x201C}, {"ldquor", 0x201E}, {"le", 0x2264},
  {"lfloor", 0x230A}, {"lowast", 0x2217}, {"lowbar", 0x5F}, {"loz", 0x25CA}, {"lpar", 0x28},
  {"lrm", 0x200E}, {"lsaquo", 0x2039}, {"lsqb", 0x5B}, {"lsquo", 0x2018}, {"lsquor", 0x201A},
  {"lt", 0x3C}, {"macr", 0xAF}, {"male", 0x2642}, {"mdash", 0x2014}, {"micro", 0xB5},
  {"middot", 0xB7}, {"minus", 0x2212}, {"mu", 0x3BC}, {"nabla", 0x2207}, {"natural", 0x266E},
  {"nbhy", 0x2011}, {"nbsp", 0xA0}, {"ndash", 0x2013}, {"ne", 0x2260}, {"ni", 0x220B},
  {"not", 0xAC}, {"notin", 0x2209}, {"nsub", 0x2284}, {"ntilde", 0xF1}, {"nu", 0x3BD},
  {"num", 0x23}, {"numsp", 0x2007}, {"oacute", 0xF3}, {"ocirc", 0xF4}, {"oelig", 0x153},
  {"ograve", 0xF2}, {"oline", 0x203E}, {"omega", 0x3C9}, {"omicron", 0x3BF}, {"oplus", 0x2295},
  {"or", 0x2228}, {"ordf", 0xAA}, {"ordm", 0xBA}, {"oslash", 0xF8}, {"otilde", 0xF5},
  {"otimes", 0x2297}, {"ouml", 0xF6}, {"para", 0xB6}, {"part", 0x2202}, {"percnt", 0x25},
  {"period", 0x2E}, {"permil", 0x2030}, {"perp", 0x22A5}, {"phi", 0x3C6}, {"phone", 0x260E},
  {"pi", 0x3C0}, {"piv", 0x3D6}, {"plus", 0x2B}, {"plusmn", 0xB1}, {"pound", 0xA3},
  {"prime", 0x2032}, {"prod", 0x220F}, {"prop", 0x221D}, {"psi", 0x3C8}, {"puncsp", 0x2008},
  {"quest", 0x3F}, {"quot", 0x22}, {"rArr", 0x21D2}, {"radic", 0x221A}, {"rang", 0x232A},
  {"raquo", 0xBB}, {"rarr", 0x2192}, {"rbrace", 0x7D}, {"rbrack", 0x5D}, {"rceil", 0x2309},
  {"rcub", 0x7D}, {"rdquo", 0x201D}, {"real", 0x211C}, {"reg", 0xAE}, {"rfloor", 0x230B},
  {"rho", 0x3C1}, {"rlm", 0x200F}, {"rpar", 0x29}, {"rsaquo", 0x203A}, {"rsqb", 0x5D},
  {"rsquo", 0x2019}, {"sbquo", 0x201A}, {"scaron", 0x161}, {"sdot", 0x22C5}, {"sect", 0xA7},
  {"semi", 0x3B}, {"sext", 0x2736}, {"sharp", 0x266F}, {"shy", 0xAD}, {"sigma", 0x3C3},
  {"sigmaf", 0x3C2}, {"sim", 0x223C}, {"sol", 0x2F}, {"spades", 0x2660}, {"star", 0x2606},
  {"starf", 0x2605}, {"sub", 0x2282}, {"sube", 0x2286}, {"sum", 0x2211}, {"sup", 0x2283},
  {"sup1", 0xB9}, {"sup2", 0xB2}, {"sup3", 0xB3}, {"supe", 0x2287}, {"szlig", 0xDF},
  {"tau", 0x3C4}, {"there4", 0x2234}, {"theta", 0x3B8}, {"thetasym", 0x3D1}, {"thinsp", 0x2009},
  {"thorn", 0xFE}, {"tilde", 0x2DC}, {"times", 0xD7}, {"trade", 0x2122}, {"uArr", 0x21D1},
  {"uacute", 0xFA}, {"uarr", 0x2191}, {"ucirc", 0xFB}, {"ugrave", 0xF9}, {"uml", 0xA8},
  {"upsih", 0x3D2}, {"upsilon", 0x3C5}, {"uuml", 0xFC}, {"verbar", 0x7C}, {"vert", 0x7C},
  {"weierp", 0x2118}, {"xi", 0x3BE}, {"yacute", 0xFD}, {"yen", 0xA5}, {"yuml", 0xFF},
  {"zeta", 0x3B6}, {"zwj", 0x200D}, {"zwnj", 0x200C},
};

constexpr bool entities_sorted() {
  for (size_t i = 1; i < std::size(kEntities); ++i)
    if (!(kEntities[i - 1].name < kEntities[i].name)) return false;
  return true;
}
static_assert(entities_sorted(), "kEntities must be sorted for binary search");


// The code point of the entity at the start of `text` ("amp;", "#160;", "#x2014;": the part after
// '&'), with the bytes it took including ';'; 0 bytes when it is none.
struct Parsed {
  char32_t code_point;
  size_t length;
};
Parsed parse_entity_body(std::string_view text) {
  constexpr size_t kMaxName = 32;
  if (!text.empty() && text[0] == '#') {
    bool hex = text.size() > 1 && (text[1] == 'x' || text[1] == 'X');
    size_t i = hex ? 2 : 1, digits_start = i;
    uint32_t value = 0;
    while (i < text.size() && i - digits_start < 8 &&
           (hex ? is_hex(text[i]) : (text[i] >= '0' && text[i] <= '9'))) {
      char c = text[i];
      uint32_t digit = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
      value = value * (hex ? 16 : 10) + digit;
      ++i;
    }
    if (i == digits_start || i >= text.size() || text[i] != ';') return {0, 0};
    return {value, i + 1};
  }
  size_t i = 0;
  while (i < text.size() && i < kMaxName && is_ascii_alnum(text[i])) ++i;
  if (i == 0 || i >= text.size() || text[i] != ';') return {0, 0};
  std::string_view name = text.substr(0, i);
  auto it = std::lower_bound(std::begin(kEntities), std::end(kEntities), name,
                             [](const Entity& e, std::string_view n) { return e.name < n; });
  if (it == std::end(kEntities) || it->name != name) return {0, 0};
  return {it->code_point, i + 1};
}

}  // namespace

size_t decode_html_entity(std::string_view text, std::string& out) {
  if (text.empty() || text[0] != '&') return 0;
  Parsed p = parse_entity_body(text.substr(1));
  if (p.length == 0) return 0;
  size_t used = 1 + p.length;
  // "&amp;" followed by another entity body is that entity escaped twice: decode through.
  while (p.code_point == '&') {
    Parsed inner = parse_entity_body(text.substr(used));
    if (inner.length == 0) break;
    p = inner;
    used += inner.length;
  }
  char32_t cp = p.code_point;
  // NUL and C0/C1 controls are no text; the other invalid values become U+FFFD in append_utf8.
  if (cp == 0 || (cp < 0x20 && cp != '\t' && cp != '\n') || (cp >= 0x7F && cp < 0xA0)) return used;
  append_utf8(cp, out);
  return used;
}

bool is_language_code(std::string_view p) {
  // Wikipedia language editions: two or three lowercase letters, optionally with -suffixes
  // (zh-yue, be-tarask, roa-rup, zh-min-nan), plus the few longer codes.
  static constexpr std::string_view kLong[] = {"simple", "bat-smg", "be-x-old", "cbk-zam",
                                               "fiu-vro", "map-bms", "nds-nl", "roa-rup",
                                               "roa-tara", "zh-classical", "zh-min-nan", "zh-yue"};
  for (std::string_view l : kLong)
    if (p == l) return true;
  // Interwiki prefixes of two or three letters that are not languages.
  static constexpr std::string_view kNotLanguages[] = {"doi", "iso", "mw", "wmf"};
  for (std::string_view n : kNotLanguages)
    if (p == n) return false;
  size_t i = 0;
  while (i < p.size() && p[i] >= 'a' && p[i] <= 'z') ++i;
  if (i < 2 || i > 3) return false;
  while (i < p.size()) {  // -suffix parts
    if (p[i] != '-') return false;
    size_t start = ++i;
    while (i < p.size() && p[i] >= 'a' && p[i] <= 'z') ++i;
    if (i == start) return false;
  }
  return true;
}

const std::vector<std::string_view>& builtin_dropped_namespaces() {
  // File (6) and Category (14) in English and the larger wikis' languages, with their aliases
  // (Image, Bild, 画像, Εικόνα, …). "Media:" links are left alone: they show their label.
  static const std::vector<std::string_view> names = {
      "file", "image", "category",
      "datei", "bild", "kategorie",                         // de
      "fichier", "catégorie",                               // fr
      "archivo", "imagen", "categoría",                     // es
      "ficheiro", "arquivo", "imagem", "categoria",         // pt, gl, it
      "immagine",                                           // it
      "plik", "grafika", "kategoria",                       // pl
      "bestand", "afbeelding", "categorie",                 // nl, ro
      "fil", "bild", "kategori",                            // sv, da, no, id, tr
      "tiedosto", "kuva", "luokka",                         // fi
      "soubor", "obrázek",                                  // cs
      "dosya", "berkas", "gambar",                          // tr, id, ms
      "tập tin", "hình", "thể loại",                        // vi
      "файл", "изображение", "категория", "категорія",     // ru, uk, bg
      "αρχείο", "εικόνα", "κατηγορία", "Αρχείο", "Εικόνα", "Κατηγορία",  // el
      "ファイル", "画像", "カテゴリ",                        // ja
      "文件", "檔案", "图像", "圖像", "分类", "分類",         // zh
      "파일", "그림", "분류",                                 // ko
      "ملف", "صورة", "تصنيف",                               // ar
      "پرونده", "تصویر", "رده",                             // fa
      "קובץ", "תמונה", "קטגוריה",                           // he
      "चित्र", "श्रेणी",                                     // hi
      "Файл", "Изображение", "Категория", "Категорія",     // capitalized Cyrillic
  };
  return names;
}

}  // namespace pretrain
