// The Loader: a planner that cuts each epoch's order into this rank's batches, a driver thread
// that reads them with oneTBB into host slots and copies them to device slots, and next(), which
// hands out the batches in order. See loader.h for the contract; the pieces are:
//   Planner     (epoch, samples consumed) → the next batch's positions, or an end-of-epoch mark
//   Ring        host and device slots, their free lists; shared with the Batches handed out, so a
//               Batch outliving its Loader still owns valid memory
//   driver      plan into free host slots ▶ read + collate + mask (parallel_for) ▶ copy in order
//   ready queue batches (and end marks, and errors) waiting for next()
#include "loader/loader.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <algorithm>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include "common/device.h"
#include "common/error.h"
#include "common/hash.h"
#include "common/json_integer.h"
#include "loader/device_copy.h"
#include "loader/masking.h"
#include "loader/source.h"

namespace pretrain {

size_t dtype_size(TensorDType dtype) {
  switch (dtype) {
    case TensorDType::u8: case TensorDType::i8: return 1;
    case TensorDType::u16: return 2;
    case TensorDType::i32: return 4;
    case TensorDType::i64: return 8;
  }
  return 0;
}

const char* dtype_name(TensorDType dtype) {
  switch (dtype) {
    case TensorDType::u8: return "uint8";
    case TensorDType::i8: return "int8";
    case TensorDType::u16: return "uint16";
    case TensorDType::i32: return "int32";
    case TensorDType::i64: return "int64";
  }
  return "?";
}

template <typename T>
T* Tensor::as() const {
  constexpr TensorDType want = std::is_same_v<T, uint8_t> ? TensorDType::u8
                               : std::is_same_v<T, int8_t> ? TensorDType::i8
                               : std::is_same_v<T, uint16_t> ? TensorDType::u16
                               : std::is_same_v<T, int32_t> ? TensorDType::i32
                                                             : TensorDType::i64;
  if (want != dtype) throw Error(cat("tensor holds ", dtype_name(dtype), ", not ", dtype_name(want)));
  if (device >= 0) throw Error(cat("tensor is on cuda:", device, "; as<T>() reads host memory only"));
  return static_cast<T*>(data);
}
template uint8_t* Tensor::as<uint8_t>() const;
template int8_t* Tensor::as<int8_t>() const;
template uint16_t* Tensor::as<uint16_t>() const;
template int32_t* Tensor::as<int32_t>() const;
template int64_t* Tensor::as<int64_t>() const;

std::vector<std::pair<std::string, Tensor>> Batch::tensors() const {
  if (kind == ModelKind::gpt) return {{"tokens", tokens}, {"targets", targets}};
  std::vector<std::pair<std::string, Tensor>> out = {
      {"input_ids", input_ids}, {"segment_ids", segment_ids}, {"input_mask", input_mask},
      {"masked_lm_positions", masked_lm_positions}, {"masked_lm_ids", masked_lm_ids},
      {"mlm_labels", mlm_labels}, {"next_sentence_labels", next_sentence_labels}};
  if (packed())
    out.insert(out.end(), {{"position_ids", position_ids}, {"sequence_ids", sequence_ids},
                           {"next_sentence_positions", next_sentence_positions}});
  return out;
}

std::string LoaderState::to_json() const {
  return nlohmann::json{{"epoch", epoch}, {"consumed", consumed}, {"seed", hex64(seed)}, {"fingerprint", hex64(fingerprint)}}
      .dump();
}

LoaderState LoaderState::from_json(const std::string& text) {
  try {
    const auto j = nlohmann::json::parse(text);
    LoaderState s;
    s.epoch = json_integer<uint64_t>(j.at("epoch"));
    s.consumed = json_integer<uint64_t>(j.at("consumed"));
    s.seed = parse_hex64(j.at("seed").get<std::string>());
    s.fingerprint = parse_hex64(j.at("fingerprint").get<std::string>());
    return s;
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(cat("not a loader state (expected {\"epoch\", \"consumed\", \"seed\", \"fingerprint\"}): ", e.what()));
  }
}

namespace {

// One step of a rank's walk through the epochs.
struct Plan {
  uint64_t epoch = 0;
  uint64_t index = 0;          // batch number within the epoch (this rank's)
  uint64_t begin = 0, end = 0;  // positions of the epoch's order
  uint64_t consumed = 0;       // the epoch's samples consumed (globally) once this batch is
  int64_t seq_len = 0;         // of its samples (a binned source: its bin's length)
  bool end_of_epoch = false;   // a mark: the epoch is over (begin/end unused)
  bool finished = false;       // past the last epoch: nothing more
};

// The epoch's order comes in runs (SampleSource::runs: one of the whole epoch, or a binned source's
// draws) that no global batch straddles. In a run, global batch k is positions [kG, (k+1)G) of the
// run, G = batch × world; rank r takes [kG + rB, kG + (r+1)B). A run's tail (its length mod G) is
// dropped, or with drop_last off split as evenly as possible: rank r takes [KG + ⌊rR/w⌋, KG +
// ⌊(r+1)R/w⌋) of it (a rank whose share is empty skips it).
class Planner {
 public:
  using Runs = std::function<std::vector<SampleSource::Run>(uint64_t epoch)>;
  Planner() = default;
  Planner(Runs runs, uint64_t batch, int rank, int world, bool drop_last, uint64_t epochs)
      : runs_of_(std::move(runs)), b_(batch), g_(batch * uint64_t(world)), rank_(uint64_t(rank)),
        world_(uint64_t(world)), drop_last_(drop_last), epochs_(epochs) {}

  uint64_t global_batch() const { return g_; }
  // This rank's batches in an epoch (the same in every epoch: a binned epoch's runs only reorder).
  uint64_t batches_per_epoch() const {
    uint64_t n = 0;
    for (const SampleSource::Run& r : runs_of_(0)) n += r.samples / g_ + (tail_share(r.samples) > 0 ? 1 : 0);
    return n;
  }

  // Throws UsageError when `consumed` is not a point this walk passes through.
  void seek(uint64_t epoch, uint64_t consumed) {
    load(epoch);
    uint64_t index = 0;
    for (size_t i = 0; i < runs_.size(); ++i) {
      const uint64_t start = starts_[i], length = runs_[i].samples, full = length / g_;
      if (consumed >= start && consumed - start <= full * g_ && (consumed - start) % g_ == 0) {
        index += (consumed - start) / g_;
        return set(epoch, consumed, index);
      }
      index += full + (tail_share(length) > 0 ? 1 : 0);
      if (consumed == start + length) return set(epoch, consumed, index);
    }
    throw UsageError(cat("state: ", consumed, " samples consumed is not a batch boundary of an epoch of ", total_,
                         " samples in global batches of ", g_));
  }

  Plan next() {
    Plan p;
    p.epoch = epoch_;
    if (epochs_ && epoch_ >= epochs_) return p.finished = true, p;
    load(epoch_);
    while (consumed_ < total_) {
      const size_t i = size_t(std::upper_bound(starts_.begin(), starts_.end(), consumed_) - starts_.begin() - 1);
      const uint64_t start = starts_[i], length = runs_[i].samples, full = length / g_, at = consumed_ - start;
      p.seq_len = runs_[i].seq_len;
      if (at < full * g_) {
        p.begin = start + at / g_ * g_ + rank_ * b_;
        p.end = p.begin + b_;
        p.consumed = consumed_ += g_;
        p.index = index_++;
        return p;
      }
      consumed_ = start + length;  // the run's tail: dropped, or this rank's share of it
      if (drop_last_) continue;
      const uint64_t tail = length - full * g_;
      p.begin = start + full * g_ + tail * rank_ / world_;
      p.end = start + full * g_ + tail * (rank_ + 1) / world_;
      p.consumed = consumed_;
      if (p.end > p.begin) return p.index = index_++, p;
    }
    p.end_of_epoch = true;
    set(epoch_ + 1, 0, 0);
    return p;
  }

 private:
  uint64_t tail_share(uint64_t run_length) const {
    const uint64_t tail = run_length % g_;
    return drop_last_ ? 0 : tail * (rank_ + 1) / world_ - tail * rank_ / world_;
  }
  void set(uint64_t epoch, uint64_t consumed, uint64_t index) { epoch_ = epoch, consumed_ = consumed, index_ = index; }
  void load(uint64_t epoch) {
    if (loaded_ && loaded_epoch_ == epoch) return;
    runs_ = runs_of_(epoch);
    starts_.clear();
    total_ = 0;
    for (const SampleSource::Run& r : runs_) starts_.push_back(total_), total_ += r.samples;
    loaded_ = true, loaded_epoch_ = epoch;
  }

  Runs runs_of_;
  uint64_t b_ = 1, g_ = 1, rank_ = 0, world_ = 1;
  bool drop_last_ = true;
  uint64_t epochs_ = 0;
  uint64_t epoch_ = 0, consumed_ = 0, index_ = 0;
  bool loaded_ = false;
  uint64_t loaded_epoch_ = 0, total_ = 0;
  std::vector<SampleSource::Run> runs_;
  std::vector<uint64_t> starts_;
};

// -1: the CPU; otherwise the CUDA device's index.
int device_index(const std::string& device) {
  const DeviceSpec spec = parse_device_spec(device);
  return spec.cuda ? spec.index : -1;
}

void check_config(const LoaderConfig& c) {
  if (c.batch_size <= 0) throw UsageError(cat("batch_size must be positive, not ", c.batch_size));
  if (c.world_size < 1) throw UsageError(cat("world_size must be at least 1, not ", c.world_size));
  if (c.rank < 0 || c.rank >= c.world_size) throw UsageError(cat("rank ", c.rank, " is outside [0, ", c.world_size, ")"));
  if (c.workers < 1) throw UsageError(cat("workers must be at least 1, not ", c.workers));
  if (c.prefetch < 1) throw UsageError(cat("prefetch must be at least 1, not ", c.prefetch));
  if (c.bin_batches < 1) throw UsageError(cat("bin_batches must be at least 1, not ", c.bin_batches));
  if (c.id_dtype != TensorDType::i32 && c.id_dtype != TensorDType::i64)
    throw UsageError(cat("id_dtype must be int32 or int64, not ", dtype_name(c.id_dtype)));
  if (c.kind == ModelKind::gpt && c.seq_len <= 0) throw UsageError("a GPT loader needs seq_len (tokens per sample)");
  if (c.masking.enabled) {
    if (c.kind != ModelKind::bert) throw UsageError("dynamic masking is for BERT loaders");
    if (!(c.masking.probability > 0 && c.masking.probability <= 1))
      throw UsageError(cat("masking probability must be in (0, 1], not ", c.masking.probability));
    if (c.masking.max_predictions < 0) throw UsageError("masking max_predictions must not be negative");
  }
}

}  // namespace

// Host and device slots. Batches hold it through their lease, so it outlives the Loader if needed.
struct Ring {
  std::unique_ptr<DeviceBackend> backend;
  std::vector<uint8_t*> host, device;
  void* consumer_stream = nullptr;
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<int> free_host, free_device;
  int leased = 0;  // device slots held by the consumer's Batches

  ~Ring() {
    for (uint8_t* p : host) backend->free_host(p);
    for (uint8_t* p : device) backend->free_device(p);
  }
  void release_device(int d) {
    backend->consumed(d, consumer_stream);
    std::lock_guard lock(mutex);
    free_device.push_back(d);
    --leased;
    changed.notify_all();
  }
};

namespace {

// Gives device slot `slot` back when the last copy of the Batch holding it goes.
class SlotLease {
 public:
  SlotLease(std::shared_ptr<Ring> ring, int slot) : ring_(std::move(ring)), slot_(slot) {}
  ~SlotLease() { ring_->release_device(slot_); }
  SlotLease(const SlotLease&) = delete;
  SlotLease& operator=(const SlotLease&) = delete;

 private:
  std::shared_ptr<Ring> ring_;
  int slot_;
};

// A batch (or a mark) on its way: planned into a host slot, read, then copied.
struct Work {
  Plan plan;
  int host_slot = -1;
  bool read = false;
  std::exception_ptr error;
  int64_t error_row = 0;
};

// What next() takes from the ready queue.
struct Ready {
  Plan plan;
  int device_slot = -1;
  std::exception_ptr error;
};

}  // namespace

struct Loader::Impl {
  LoaderConfig config;
  tbb::task_arena arena;
  // The sources' work ahead of time (BERT's next window). A task group, not arena.enqueue: wait()
  // runs what no worker has started, so closing never waits for a worker that may not come.
  tbb::task_group background;
  std::unique_ptr<SampleSource> source;
  SlotLayout slot;   // the longest batch's: what the ring's slots hold
  OutputLayout out;
  // Per sequence length a batch may have (one, or a binned source's bin lengths): its layouts,
  // inside the slots (made at construction; the driver and next() only read them).
  std::map<int64_t, std::pair<SlotLayout, OutputLayout>> layouts;
  std::shared_ptr<Ring> ring;
  std::optional<MaskingPlan> masking;
  uint64_t fingerprint = 0;
  int device = -1;

  // Producer side (the driver thread).
  std::thread thread;
  Planner planner;
  std::atomic<bool> stop{false};
  bool planned_all = false;  // the planner said "finished": the driver ends once it is out
  std::atomic<int64_t> read_nanos{0};

  // The ready queue, guarded by ring->mutex and signalled through ring->changed (one lock for all
  // the hand-offs keeps the waits simple; none of them is hot).
  std::deque<Ready> ready;
  bool pipeline_done = false;

  // Consumer side.
  Planner consumer_view;  // only for batches_per_epoch() and checking a state to restore
  LoaderState position;
  bool finished = false;
  std::exception_ptr failure;
  LoaderStats stats;
  std::chrono::steady_clock::time_point first_next{};
  bool started_clock = false;
  std::map<std::string, int64_t> special_ids;

  // The driver plus `workers` oneTBB workers, no more than the process may use: the cores it may run
  // on (mpirun binds each rank to one) and --threads. oneTBB refuses the rest anyway, with a
  // warning on stderr. At least one worker when any is allowed, so the background decode runs
  // beside the driver; none on one core.
  static int arena_slots(int workers) {
    const int allowed = std::min(tbb::info::default_concurrency(),
                                 int(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism)));
    return allowed < 2 ? 1 : std::max(2, std::min(std::max(workers, 1) + 1, allowed));
  }

  explicit Impl(LoaderConfig c) : config(std::move(c)), arena(arena_slots(config.workers), 1) {
    check_config(config);
    device = device_index(config.device);
    std::vector<ShardSet> sets = resolve_sources(config);
    // Blends and sources run their background work in our arena.
    const bool binned = std::any_of(sets.begin(), sets.end(), [](const ShardSet& s) { return s.bin_length > 0; });
    if (config.kind == ModelKind::bert) {
      BertSourceOptions o;
      o.sets = std::move(sets);
      o.seq_len = config.seq_len;
      o.seed = config.seed;
      o.shuffle = config.shuffle;
      o.shuffle_window = config.shuffle_window;
      o.background = [this](std::function<void()> task) {
        arena.execute([&] { background.run(std::move(task)); });
      };
      if (binned) {
        if (config.seq_len > 0)
          throw UsageError(cat("seq_len ", config.seq_len, ": binned shards come at each bin's length (leave it 0)"));
        const uint64_t group = uint64_t(config.batch_size) * uint64_t(config.world_size) * uint64_t(config.bin_batches);
        source = make_binned_bert_source({.bert = std::move(o), .group = group, .drop_short = config.drop_last});
      } else {
        source = make_bert_source(o);
      }
    } else {
      GptSourceOptions o;
      if (config.weights.empty() && sets.size() > 1) {  // one dataset over every source's files
        ShardSet all = sets.front();
        for (size_t i = 1; i < sets.size(); ++i) {
          if (sets[i].format != all.format)
            throw UsageError(Where{sets[i].origin}, cat("is '", sets[i].format, "' but ", all.origin, " is '", all.format,
                                                        "': mixed formats need weights (a blend)"));
          all.files.insert(all.files.end(), sets[i].files.begin(), sets[i].files.end());
          if (!all.manifest) all.manifest = sets[i].manifest;
        }
        all.origin = "all sources";
        sets = {std::move(all)};
      }
      o.sets = std::move(sets);
      o.weights = config.weights;
      o.seq_len = config.seq_len;
      o.seed = config.seed;
      o.shuffle = config.shuffle;
      o.add_extra_token = config.add_extra_token;
      o.samples_per_epoch = config.samples_per_epoch;
      source = make_gpt_source(o);
    }
    special_ids = source->special_ids();
    if (source->samples_per_epoch() == 0) throw Error(Where{config.sources.front()}, "the sources hold no samples");

    int64_t predictions = source->max_predictions();
    if (config.masking.enabled) masking = make_masking(predictions);
    slot = SlotLayout::make(config.kind, config.batch_size, source->seq_len(), predictions, source->vocab_size(),
                            config.narrow_tokens, source->max_pack());
    std::vector<int64_t> lengths{source->seq_len()};
    for (const SampleSource::Run& r : source->runs(0)) lengths.push_back(r.seq_len);

    ring = std::make_shared<Ring>();
    const int slots = config.prefetch;
    ring->backend = device < 0 ? make_cpu_backend() : make_cuda_backend(device, slots, slots, config.pin_memory);
    ring->consumer_stream = config.consumer_stream;
    out = OutputLayout::make(slot, dtype_size(config.id_dtype), ring->backend->needs_staging());
    for (int64_t length : lengths) {
      if (layouts.count(length)) continue;
      const SlotLayout s = slot.shorter(length);
      layouts[length] = {s, OutputLayout::make(s, dtype_size(config.id_dtype), ring->backend->needs_staging())};
    }
    for (int i = 0; i < slots; ++i) {
      ring->host.push_back(ring->backend->alloc_host(slot.bytes));
      ring->device.push_back(ring->backend->alloc_device(out.bytes));
      ring->free_device.push_back(i);
    }

    std::string key = cat(hex64(source->fingerprint()), "|", int(config.kind), "|", config.batch_size * config.world_size, "|",
                          config.drop_last, "|", config.masking.enabled);
    if (binned) key += cat("|bins of ", config.bin_batches, " global batches");
    if (masking) key += cat("|", masking->probability, "|", masking->max_predictions, "|", masking->mask_id);
    fingerprint = xxh3_bytes(key.data(), key.size());
    consumer_view = make_planner();
    position = LoaderState{0, 0, config.seed, fingerprint};
    start();
  }

  ~Impl() {
    halt();
    arena.execute([&] { background.wait(); });
  }

  MaskingPlan make_masking(int64_t& predictions) const {
    const DynamicMasking& m = config.masking;
    MaskingPlan plan;
    plan.probability = m.probability;
    plan.seed = config.seed;
    plan.max_predictions = m.max_predictions > 0 ? m.max_predictions : predictions;
    if (plan.max_predictions <= 0) throw UsageError("dynamic masking needs max_predictions (the shards have none)");
    predictions = std::max(predictions, plan.max_predictions);
    plan.vocab_size = m.vocab_size > 0 ? m.vocab_size : source->vocab_size();
    if (plan.vocab_size <= 0) throw UsageError("dynamic masking needs vocab_size (no manifest tokenizer says it)");
    // Manifests name special ids by role ("mask", "cls", … as our tokenizers do) or by the token
    // itself ("[MASK]"); both are understood.
    auto role = [&](std::initializer_list<const char*> names) -> int64_t {
      for (const char* n : names)
        if (auto it = special_ids.find(n); it != special_ids.end()) return it->second;
      return -1;
    };
    plan.mask_id = m.mask_id >= 0 ? m.mask_id : role({"mask", "[MASK]", "<mask>"});
    if (plan.mask_id < 0 || plan.mask_id >= plan.vocab_size)
      throw UsageError("dynamic masking needs mask_id (no [MASK] in the manifest's tokenizer)");
    plan.special.assign(size_t(plan.vocab_size), false);
    std::vector<int64_t> ids = m.special_ids;
    if (ids.empty())  // every special token but [UNK], which Google's masking treats as a word
      for (const auto& [name, id] : special_ids)
        if (name != "unk" && name != "[UNK]" && name != "<unk>") ids.push_back(id);
    if (ids.empty()) throw UsageError("dynamic masking needs the special ids ([CLS], [SEP], [PAD], …): none given or in the manifest");
    for (int64_t id : ids)
      if (id >= 0 && id < plan.vocab_size) plan.special[size_t(id)] = true;
    return plan;
  }

  Planner make_planner() const {
    const SampleSource* src = source.get();
    return Planner([src](uint64_t epoch) { return src->runs(epoch); }, uint64_t(config.batch_size), config.rank,
                   config.world_size, config.drop_last, config.epochs);
  }

  const std::pair<SlotLayout, OutputLayout>& layout_of(const Plan& p) const {
    auto it = layouts.find(p.seq_len);
    if (it == layouts.end()) throw Error(cat("internal: a batch of length ", p.seq_len, " the loader has no layout for"));
    return it->second;
  }

  // --- producer -------------------------------------------------------------------------------

  void start() {
    planner = make_planner();
    planner.seek(position.epoch, position.consumed);
    stop = false;
    planned_all = false;
    pipeline_done = false;
    thread = std::thread([this] { run_driver(); });
  }

  // Stops the driver and waits for it; what it had made goes back to the free lists.
  void halt() {
    if (!thread.joinable()) return;
    {
      std::lock_guard lock(ring->mutex);
      stop = true;
      ring->changed.notify_all();
    }
    thread.join();
    std::lock_guard lock(ring->mutex);
    for (const Ready& r : ready)
      if (r.device_slot >= 0) ring->free_device.push_back(r.device_slot);
    ready.clear();
    for (size_t h = 0; h < ring->host.size(); ++h) ring->backend->wait_host_free(int(h));
  }

  // The driver: one thread of ours that plans, hands reads to oneTBB and copies in order. Only
  // this thread ever waits for a slot: a oneTBB task that blocked would hold a worker that every
  // arena in the process shares (two loaders on two cores would starve each other).
  void run_driver() {
    {
      std::lock_guard lock(ring->mutex);
      ring->free_host.clear();
      for (int h = 0; h < int(ring->host.size()); ++h) ring->free_host.push_back(h);
    }
    std::deque<Work> pending;  // planned, in order: reading, read, or marks
    try {
      while (!stop) {
        bool progressed = copy_ready(pending);
        progressed |= plan_more(pending);
        progressed |= read_planned(pending);
        if (pending.empty() && planned_all) break;
        if (!progressed) {  // every slot is full: wait for the consumer to release one
          std::unique_lock lock(ring->mutex);
          ring->changed.wait(lock, [&] { return stop || !ring->free_device.empty(); });
        }
      }
    } catch (...) {
      push(Ready{Plan{}, -1, std::current_exception()});
    }
    std::lock_guard lock(ring->mutex);
    for (const Work& w : pending)
      if (w.host_slot >= 0) ring->free_host.push_back(w.host_slot);
    pipeline_done = true;
    ring->changed.notify_all();
  }

  // Plans batches into free host slots (marks need none), at most prefetch + 2 items ahead.
  bool plan_more(std::deque<Work>& pending) {
    bool planned = false;
    while (!stop && !planned_all && pending.size() < ring->host.size() + 2) {
      int h = -1;
      {
        std::lock_guard lock(ring->mutex);
        if (ring->free_host.empty()) break;
        h = ring->free_host.back();
        ring->free_host.pop_back();
      }
      Work w;
      w.plan = planner.next();
      planned = true;
      planned_all = w.plan.finished;
      if (w.plan.end_of_epoch || w.plan.finished) {
        std::lock_guard lock(ring->mutex);
        ring->free_host.push_back(h);
      } else {
        w.host_slot = h;
        try {
          ring->backend->wait_host_free(h);
          source->will_read(w.plan.epoch, w.plan.begin);
        } catch (...) {
          w.error = std::current_exception();
        }
      }
      pending.push_back(std::move(w));
    }
    return planned;
  }

  // Reads every planned batch not read yet, all rows of all of them in one parallel_for (the
  // driver thread joins the arena's workers).
  bool read_planned(std::deque<Work>& pending) {
    std::vector<Work*> todo;
    for (Work& w : pending)
      if (w.host_slot >= 0 && !w.read && !w.error) todo.push_back(&w);
    if (todo.empty()) return false;
    std::vector<uint64_t> first_row{0};  // prefix sums of rows over todo
    for (Work* w : todo) first_row.push_back(first_row.back() + (w->plan.end - w->plan.begin));
    std::mutex error_mutex;
    const auto t0 = std::chrono::steady_clock::now();
    arena.execute([&] {
      tbb::parallel_for(tbb::blocked_range<uint64_t>(0, first_row.back(), 4), [&](const tbb::blocked_range<uint64_t>& r) {
        for (uint64_t i = r.begin(); i < r.end(); ++i) {
          const size_t k = size_t(std::upper_bound(first_row.begin(), first_row.end(), i) - first_row.begin() - 1);
          Work& w = *todo[k];
          const int64_t row = int64_t(i - first_row[k]);
          const uint64_t pos = w.plan.begin + uint64_t(row);
          try {
            const HostRows rows(layout_of(w.plan).first, ring->host[size_t(w.host_slot)]);
            source->read(w.plan.epoch, pos, rows, row);
            if (masking) mask_row(*masking, rows, row, w.plan.epoch, source->sample_id(w.plan.epoch, pos));
          } catch (...) {
            // The first bad row of the batch, whichever thread read it first: errors repeat.
            std::lock_guard lock(error_mutex);
            if (!w.error || row < w.error_row) w.error = std::current_exception(), w.error_row = row;
          }
        }
      });
    });
    read_nanos += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
    for (Work* w : todo) w->read = true;
    return true;
  }

  // Copies read batches to device slots in order, as far as free device slots allow.
  bool copy_ready(std::deque<Work>& pending) {
    bool copied = false;
    while (!pending.empty() && !stop) {
      Work& w = pending.front();
      if (w.error) {
        push(Ready{w.plan, -1, w.error});
        stop = true;  // nothing after a failed batch: next() rethrows and the loader stays failed
        return true;
      }
      if (w.plan.end_of_epoch || w.plan.finished) {
        push(Ready{w.plan, -1, nullptr});
        pending.pop_front();
        copied = true;
        continue;
      }
      if (!w.read) break;
      int d = -1;
      {
        std::lock_guard lock(ring->mutex);
        if (ring->free_device.empty()) break;
        d = ring->free_device.back();
        ring->free_device.pop_back();
      }
      CopyJob job;
      job.slot = &layout_of(w.plan).first;
      job.out = &layout_of(w.plan).second;
      job.rows = int64_t(w.plan.end - w.plan.begin);
      job.host_slot = w.host_slot;
      job.device_slot = d;
      job.host = ring->host[size_t(w.host_slot)];
      job.device = ring->device[size_t(d)];
      try {
        ring->backend->copy(job);
      } catch (...) {
        std::lock_guard lock(ring->mutex);
        ring->free_device.push_back(d);
        w.error = std::current_exception();
        continue;  // reported by the branch above
      }
      {
        std::lock_guard lock(ring->mutex);
        ring->free_host.push_back(w.host_slot);
      }
      push(Ready{w.plan, d, nullptr});
      pending.pop_front();
      copied = true;
    }
    return copied;
  }

  void push(Ready r) {
    std::lock_guard lock(ring->mutex);
    ready.push_back(std::move(r));
    ring->changed.notify_all();
  }

  // --- consumer -------------------------------------------------------------------------------

  std::optional<Batch> next() {
    if (failure) std::rethrow_exception(failure);
    if (finished) return std::nullopt;
    const auto t0 = std::chrono::steady_clock::now();
    if (!started_clock) first_next = t0, started_clock = true;
    Ready r;
    {
      std::unique_lock lock(ring->mutex);
      ring->changed.wait(lock, [&] {
        return !ready.empty() || pipeline_done || ring->leased == int(ring->device.size());
      });
      if (ready.empty()) {
        if (ring->leased == int(ring->device.size()))
          throw Error(cat("all ", ring->device.size(), " batch slots are still held by earlier Batches: release them "
                          "(or copy what you keep) before asking for the next, or raise prefetch"));
        throw Error("internal: the loader's driver ended without a reason");
      }
      r = std::move(ready.front());
      ready.pop_front();
      if (r.device_slot >= 0) ++ring->leased;
    }
    stats.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r.error) {
      failure = r.error;
      std::rethrow_exception(failure);
    }
    if (r.plan.finished) {
      finished = true;
      return std::nullopt;
    }
    if (r.plan.end_of_epoch) {
      position.epoch = r.plan.epoch + 1;
      position.consumed = 0;
      if (config.epochs && position.epoch >= config.epochs) finished = true;
      return std::nullopt;
    }
    ring->backend->wait_ready(r.device_slot, config.consumer_stream);
    Batch b = make_batch(r);
    position.epoch = r.plan.epoch;
    position.consumed = r.plan.consumed;
    stats.batches += 1;
    stats.samples += uint64_t(b.size);
    return b;
  }

  Batch make_batch(const Ready& r) {
    Batch b;
    b.size = int64_t(r.plan.end - r.plan.begin);
    b.epoch = r.plan.epoch;
    b.index = r.plan.index;
    b.kind = config.kind;
    uint8_t* base = ring->device[size_t(r.device_slot)];
    const auto& [batch_slot, batch_out] = layout_of(r.plan);
    const int64_t s = batch_slot.seq_len, p = batch_slot.max_predictions;
    auto tensor = [&](size_t offset, int64_t cols) {
      Tensor t;
      t.data = base + offset;
      t.dtype = config.id_dtype;
      t.ndim = cols > 0 ? 2 : 1;
      t.shape = {b.size, cols > 0 ? cols : 0};
      t.device = device;
      return t;
    };
    if (config.kind == ModelKind::bert) {
      b.input_ids = tensor(batch_out.input_ids, s);
      b.segment_ids = tensor(batch_out.segment_ids, s);
      b.input_mask = tensor(batch_out.input_mask, s);
      b.masked_lm_positions = tensor(batch_out.masked_lm_positions, p);
      b.masked_lm_ids = tensor(batch_out.masked_lm_ids, p);
      b.mlm_labels = tensor(batch_out.mlm_labels, s);
      b.next_sentence_labels = tensor(batch_out.next_sentence_labels, batch_slot.max_pack);
      if (batch_slot.max_pack > 0) {
        b.position_ids = tensor(batch_out.position_ids, s);
        b.sequence_ids = tensor(batch_out.sequence_ids, s);
        b.next_sentence_positions = tensor(batch_out.next_sentence_positions, batch_slot.max_pack);
      }
    } else {
      b.tokens = tensor(batch_out.tokens, s);
      b.targets = tensor(batch_out.targets, s);
    }
    b.lease = std::make_shared<SlotLease>(ring, r.device_slot);
    return b;
  }

  void restore(const LoaderState& s) {
    if (s.seed != config.seed)
      throw UsageError(cat("state was taken with seed ", s.seed, ", this loader has seed ", config.seed));
    if (s.fingerprint != fingerprint)
      throw UsageError("state was taken from a loader over other shards or with another global batch, drop_last or "
                       "masking (fingerprints differ)");
    Planner check = consumer_view;
    check.seek(s.epoch, s.consumed);  // throws when it is not a batch boundary
    halt();
    position = s;
    finished = config.epochs && s.epoch >= config.epochs;
    failure = nullptr;
    start();
  }

  LoaderStats get_stats() const {
    LoaderStats s = stats;
    if (started_clock) s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - first_next).count();
    if (s.seconds > 0) s.samples_per_second = double(s.samples) / s.seconds;
    if (s.batches > 0) s.wait_ms_per_batch = s.wait_seconds * 1e3 / double(s.batches);
    s.read_seconds = double(read_nanos.load()) * 1e-9;
    return s;
  }
};

Loader::Loader(LoaderConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}
Loader::~Loader() = default;
std::optional<Batch> Loader::next() { return impl_->next(); }
LoaderState Loader::state() const { return impl_->position; }
void Loader::restore(const LoaderState& state) { impl_->restore(state); }
LoaderStats Loader::stats() const { return impl_->get_stats(); }
const LoaderConfig& Loader::config() const { return impl_->config; }
int64_t Loader::seq_len() const { return impl_->slot.seq_len; }
int64_t Loader::max_predictions() const { return impl_->slot.max_predictions; }
int64_t Loader::max_pack() const { return impl_->slot.max_pack; }
int64_t Loader::vocab_size() const { return impl_->source->vocab_size(); }
uint64_t Loader::samples_per_epoch() const { return impl_->source->samples_per_epoch(); }
uint64_t Loader::batches_per_epoch() const { return impl_->consumer_view.batches_per_epoch(); }
const std::map<std::string, int64_t>& Loader::special_ids() const { return impl_->special_ids; }

}  // namespace pretrain
