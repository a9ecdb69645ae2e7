#include "datagen/wikiprep/page_pipeline.h"

#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_pipeline.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <vector>

#include "common/log.h"
#include "common/progress.h"
#include "common/utf8.h"
#include "datagen/wikiprep/page_range.h"
#include "datagen/wikiprep/wikitext.h"
#include "datagen/wikiprep/xml_pages.h"
#include "tokenizer/sentences.h"

namespace pretrain {
namespace {

// What became of one page. Decided in order by the XML stage (namespace, redirect) or by the
// cleaning stage (too short); counted in order by the writing stage.
enum class Outcome : uint8_t { article, redirect_kept, redirect_skipped, namespace_skipped, short_skipped };

struct Item {
  uint64_t ordinal = 0;  // the page's position in the dump
  Outcome outcome = Outcome::article;
  Page page;             // articles only: their wikitext until cleaned
  CleanDocument clean;   // filled by the cleaning stage
};

// The pages one decoded piece of input completed (about 1-4 MB of wikitext), in dump order.
struct Batch {
  std::vector<Item> items;
};

uint64_t code_points(std::string_view s) {
  uint64_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

class PagePipeline {
 public:
  PagePipeline(const WikiprepOptions& o, ShardSink& sink, const PipelineSetup& setup)
      : o_(o), sink_(sink), setup_(setup), share_(setup.share) {
    totals_.counts = setup.baseline;
  }

  PipelineResult run(Bz2Reader& reader) {
    std::string source = o_.input == "-" ? "<stdin>" : o_.input;
    if (share_) source = cat(source, " (the share of rank ", share_->rank, ", from byte ", share_->begin, ")");
    XmlPageReader xml(source, [this, &xml](Page&& page) { on_page(xml, std::move(page)); });
    std::optional<PageRangeFeeder> range;
    if (share_) range.emplace(xml, share_->head, share_->begin == 0);
    const uint64_t progress_base = share_ ? share_->begin : 0;
    const uint64_t progress_size = share_ ? share_->end - share_->begin : reader.compressed_size();
    Progress progress("wikiprep", progress_size, Progress::Unit::bytes);

    auto parse = tbb::make_filter<std::shared_ptr<Bz2Piece>, std::shared_ptr<Batch>>(
        tbb::filter_mode::serial_in_order, [&](std::shared_ptr<Bz2Piece> piece) {
          auto batch = std::make_shared<Batch>();
          if (read_error_ || stop_ || (range && range->done())) return batch;  // the rest is not wanted
          try {
            std::string_view bytes = piece->bytes();
            if (range) {
              range->feed(bytes, share_cut(*piece));
              if (range->done()) reader.stop();  // what follows is the next rank's, errors included
              else piece->check();
            } else {
              totals_.xml_bytes += bytes.size();
              xml.feed(bytes);
              piece->check();
            }
          } catch (...) {
            read_error_ = std::current_exception();
          }
          batch->items.swap(pending_);
          progress.set(std::min(progress_size, reader.compressed_consumed() - std::min(progress_base, reader.compressed_consumed())));
          progress.set_note(cat(human_count(static_cast<double>(xml.pages())), " pages"));
          return batch;
        });
    auto clean = tbb::make_filter<std::shared_ptr<Batch>, std::shared_ptr<Batch>>(
        tbb::filter_mode::parallel, [&](std::shared_ptr<Batch> batch) {
          for (Item& item : batch->items) clean_item(item);
          return batch;
        });
    auto write = tbb::make_filter<std::shared_ptr<Batch>, void>(
        tbb::filter_mode::serial_in_order, [&](std::shared_ptr<Batch> batch) { write_batch(*batch); });
    tbb::parallel_pipeline(reader.max_in_flight(), reader.source_filter() & parse & clean & write);

    if (!read_error_ && !stop_) {
      try {
        if (range) range->finish();
        else xml.finish();  // may hand out the last pages, or find the input cut inside a page
      } catch (...) {
        read_error_ = std::current_exception();
      }
      Batch tail;
      tail.items.swap(pending_);
      for (Item& item : tail.items) clean_item(item);
      write_batch(tail);
    }
    totals_.bytes_in = reader.compressed_consumed();
    if (range) totals_.xml_bytes = range->range_bytes();
    progress.set(progress_size);
    progress.finish();
    if (!xml.warnings().empty()) totals_.warnings = xml.warnings();
    totals_.site = site_;
    return {std::move(totals_), read_error_, write_error_};
  }

 private:
  // Where in this piece the next rank's range begins, if it does: a bz2 range at its first block
  // that starts at or after its first byte (PageRangeFeeder), a plain one at that byte.
  size_t share_cut(const Bz2Piece& piece) const {
    if (share_->end >= share_->dump_size) return PageRangeFeeder::npos;
    const uint64_t begin_bit = piece.compressed_begin_bit();
    if (piece.bytes().empty()) return PageRangeFeeder::npos;
    if (!share_->bz2) {
      uint64_t first = begin_bit / 8;
      return share_->end < first + piece.bytes().size() ? static_cast<size_t>(share_->end > first ? share_->end - first : 0)
                                                         : PageRangeFeeder::npos;
    }
    return begin_bit >= share_->end * 8 ? 0 : PageRangeFeeder::npos;
  }

  // XML stage, in dump order: keep what is wanted, count nothing yet (the writer counts in order).
  void on_page(const XmlPageReader& xml, Page&& page) {
    if (page.ordinal < setup_.skip_pages) return;  // already in the kept shards
    if (!cleaner_) prepare_site(xml.siteinfo());
    Item item;
    item.ordinal = page.ordinal;
    if (std::find(o_.namespaces.begin(), o_.namespaces.end(), page.ns) == o_.namespaces.end()) {
      item.outcome = Outcome::namespace_skipped;
    } else if (page.redirect && !o_.keep_redirects) {
      item.outcome = Outcome::redirect_skipped;
    } else {
      item.outcome = page.redirect ? Outcome::redirect_kept : Outcome::article;
      item.page = std::move(page);
    }
    pending_.push_back(std::move(item));
  }

  // Runs once, at the first page: siteinfo precedes the pages, so it is complete by then.
  void prepare_site(const SiteInfo& site) {
    site_ = site;
    WikitextOptions options;
    auto names = [&](int64_t key, std::vector<std::string>& into) {
      auto it = site.namespaces.find(key);
      if (it != site.namespaces.end() && !it->second.empty()) into.push_back(it->second);
    };
    names(6, options.file_namespaces);
    names(14, options.category_namespaces);
    cleaner_ = std::make_unique<WikitextCleaner>(options);
    if (o_.format == WikiprepFormat::sentences) splitter_ = std::make_unique<SentenceSplitter>(site.lang);
    if (!site.present) log_warn(o_.input, ": the dump has no <siteinfo>: documents get no url");
  }

  // Cleaning stage, any thread: pure work on the item alone.
  void clean_item(Item& item) const {
    if (item.outcome != Outcome::article && item.outcome != Outcome::redirect_kept) return;
    Page& page = item.page;
    CleanDocument& clean = item.clean;
    clean.doc.id = std::to_string(page.id);
    clean.doc.url = page_url(site_, page.id);
    clean.doc.title = std::move(page.title);
    if (item.outcome == Outcome::article) {
      cleaner_->clean(page.text, clean.doc.text);
      if (o_.min_chars > 0 && code_points(clean.doc.text) < o_.min_chars) item.outcome = Outcome::short_skipped;
    }
    std::string().swap(page.text);  // the wikitext is done with: free it now
    if (o_.format == WikiprepFormat::sentences && item.outcome != Outcome::short_skipped) {
      auto& local = splitters_.local();
      if (!local) local = std::make_unique<SentenceSplitter>(*splitter_);
      clean.sentence_count = local->append_lines(clean.doc.text, clean.sentences);
      clean.repaired = repair_utf8(clean.sentences);
      std::string().swap(clean.doc.text);
      // Google's format has no empty documents: a blank line alone would end the one before.
      if (clean.sentence_count == 0) item.outcome = Outcome::short_skipped;
    }
  }

  // Writing stage, in dump order.
  void write_batch(Batch& batch) {
    if (write_error_) return;
    try {
      for (Item& item : batch.items) write_item(item);
    } catch (...) {
      write_error_ = std::current_exception();
      stop_ = true;
    }
  }

  void write_item(Item& item) {
    WikiprepCounts& counts = totals_.counts;
    switch (item.outcome) {
      case Outcome::redirect_skipped: ++counts.redirects_skipped; break;
      case Outcome::namespace_skipped: ++counts.namespaces_skipped; break;
      case Outcome::short_skipped: ++counts.short_skipped; break;
      case Outcome::article:
      case Outcome::redirect_kept: {
        WikiprepCounts before = counts;  // every page before this one is in the committed shards
        size_t shards_before = sink_.shards().size();
        sink_.add(item.clean);
        ++counts.articles_written;
        counts.sentences += item.clean.sentence_count;
        counts.text_bytes = setup_.baseline.text_bytes + sink_.text_bytes();
        counts.invalid_utf8_replaced = setup_.baseline.invalid_utf8_replaced + sink_.invalid_utf8_replaced();
        if (sink_.shards().size() != shards_before && setup_.shard_committed) setup_.shard_committed(before);
        break;
      }
    }
    ++counts.pages_seen;
    item = Item();  // frees the document: batches wait in the pipeline only as long as needed
  }

  const WikiprepOptions& o_;
  ShardSink& sink_;
  const PipelineSetup& setup_;
  const DumpShare* share_;
  WikiprepTotals totals_;  // the writing stage's counts; the reading stage's bytes

  // XML stage (serial): the pages completed since the last piece; the site and what depends on it.
  std::vector<Item> pending_;
  SiteInfo site_;
  std::unique_ptr<const WikitextCleaner> cleaner_;
  std::unique_ptr<const SentenceSplitter> splitter_;  // cloned once per thread
  mutable tbb::enumerable_thread_specific<std::unique_ptr<SentenceSplitter>> splitters_;

  std::exception_ptr read_error_, write_error_;
  std::atomic<bool> stop_{false};  // set by the writing stage, read by the XML stage (other threads)
};

}  // namespace

PipelineResult run_page_pipeline(const WikiprepOptions& o, Bz2Reader& reader, ShardSink& sink, const PipelineSetup& setup) {
  return PagePipeline(o, sink, setup).run(reader);
}

}  // namespace pretrain
