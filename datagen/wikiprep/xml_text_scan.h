// The fast path of XmlPageReader (xml_pages.h): the content of a revision's <text> element scanned
// at memory speed instead of by expat. Expat tokenizes byte by byte (~200 MB/s) and a dump is ~95%
// <text> content, so the reader gives expat the markup and hands the content here: plain UTF-8,
// the five predefined entities, character references, and XML's line-end normalization. Anything
// else (CDATA, a comment, a bad byte, an unknown entity, the closing '<') ends the scan, and the
// reader gives expat the bytes from there on, so expat alone decides what is well-formed and words
// every error. These functions know nothing of expat or pages: bytes in, decoded text out.
//
// The input arrives in chunks of any size, so every function can meet a construct cut by the end
// of its chunk; each says so, and the reader retries it once more bytes have come.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace pretrain::xml_text {

// How a scan of content ended.
enum class ScanEnd {
  chunk_end,  // every byte of the chunk was content
  cut,        // a construct (a character, a reference, "\r", "]]") is cut by the chunk's end
  markup,     // a byte expat must judge: '<', '&' of an unknown entity, invalid UTF-8, "]]>", …
};

struct Scan {
  size_t stop;  // index where the scan stopped: the chunk's size, the cut construct or the byte
  ScanEnd end;
};

// Scans content from data[from] on, appending its decoded text to `out`.
Scan scan_content(const char* data, size_t from, size_t size, std::string& out);

// Bytes of the character at p (lead byte >= 0x80) when it is well-formed UTF-8 (no overlong form,
// surrogate or value past U+10FFFF) and an XML character (not U+FFFE / U+FFFF); 0 when the chunk
// ends inside it (`available` bytes); -1 otherwise. decode_utf8's rules, inlined for CJK text.
int xml_char_length(const unsigned char* p, size_t available);

// A predefined entity or character reference at data[0] == '&', appended decoded to `out`. Returns
// the bytes used, 0 when the chunk ends inside the reference, kNotAReference for what expat must
// judge (another entity, a reference to a character XML forbids, more than 8 digits).
inline constexpr size_t kNotAReference = SIZE_MAX;
size_t decode_reference(const char* data, size_t size, std::string& out);

// XML 1.0's Char production.
bool is_xml_char(uint32_t c);

// Index of the '>' that ends a start tag whose attributes begin at data[from] (a quoted value may
// hold '>'), or `size` when the tag goes on past the chunk.
size_t tag_end(const char* data, size_t from, size_t size);

// How many bytes at the end of data[0, size) could begin "<text": kept back for the next chunk.
size_t cut_prefix_of_text_tag(const char* data, size_t size);

}  // namespace pretrain::xml_text
