#include "trainer/parallel/pipeline.h"

#include <chrono>

#include "common/error.h"

namespace pretrain {

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

PipelineRunner::PipelineRunner(Model& model, const Communicator& pipeline, int stage, int stages)
    : model_(model), pipeline_(pipeline), stage_(stage), stages_(stages), chunks_(int(model.chunks())) {}

const std::vector<PipelineOp>& PipelineRunner::schedule(int micros, bool backward) {
  auto it = schedules_.find({micros, backward});
  if (it != schedules_.end()) return it->second;
  std::vector<PipelineOp> ops;
  if (backward) {
    ops = pipeline_schedule(stage_, stages_, chunks_, micros);
  } else {  // evaluation: every forward in order, each chunk's micro-batches one after another
    for (int m = 0; m < micros; ++m)
      for (int c = 0; c < chunks_; ++c) ops.push_back({true, c, m});
  }
  return schedules_.emplace(std::make_pair(micros, backward), std::move(ops)).first->second;
}

std::vector<int> PipelineRunner::slots(int micros, bool backward) {
  if (!backward) return std::vector<int>(static_cast<size_t>(chunks_), 1);
  return peak_live(schedule(micros, backward), chunks_);
}

PipelineRunner::Peer PipelineRunner::previous(int chunk) const {
  return stage_ > 0 ? Peer{stage_ - 1, chunk} : Peer{stages_ - 1, chunk - 1};
}
PipelineRunner::Peer PipelineRunner::next(int chunk) const {
  return stage_ + 1 < stages_ ? Peer{stage_ + 1, chunk} : Peer{0, chunk + 1};
}

// Unique per (micro-batch, receiving chunk, direction) within a step; MPI keeps the order of
// messages with equal tags between two ranks anyway.
int PipelineRunner::tag(int micro, int chunk, bool forward) const {
  return ((micro * chunks_ + chunk) * 2 + (forward ? 0 : 1)) % 32768;
}

void PipelineRunner::send(const float* device_data, int64_t n, Peer to, int micro, bool forward) {
  PendingSend s;
  s.data.resize(size_t(n));
  copy_to_host(model_.device(), s.data.data(), device_data, size_t(n) * sizeof(float));
  s.request = pipeline_.isend(s.data.data(), size_t(n) * sizeof(float), to.rank, tag(micro, to.chunk, forward));
  sends_.push_back(std::move(s));
  drain(false);
}

void PipelineRunner::receive(float* device_data, int64_t n, Peer from, int chunk, int micro, bool forward) {
  (void)from;
  host_.resize(size_t(n));
  const double t0 = now_seconds();
  pipeline_.recv(host_.data(), size_t(n) * sizeof(float), from.rank, tag(micro, chunk, forward));
  wait_seconds_ += now_seconds() - t0;
  copy_to_device(model_.device(), device_data, host_.data(), size_t(n) * sizeof(float));
}

// Frees the buffers of sends that completed (all: waits for every one).
void PipelineRunner::drain(bool all) {
  while (!sends_.empty() && (all || sends_.front().request.test())) {
    sends_.front().request.wait();
    sends_.pop_front();
  }
}

Losses PipelineRunner::run(const std::vector<ModelInputs>& micro, const std::function<uint64_t(int)>& key,
                           float loss_scale, bool backward, const std::function<void(int)>& before_last_backward) {
  const int micros = int(micro.size());
  if (micros == 0) return {};
  const ModelInputs& shape = micro.front();
  model_.prepare(shape.B, shape.T, shape.P, slots(micros, backward), shape.K);
  const int64_t n = model_.stage_rows(shape.B, shape.T) * model_.config().hidden;
  if (grad_in_.size() < size_t(n)) grad_in_ = DeviceBuffer<float>(model_.device(), size_t(n));
  wait_seconds_ = 0;

  // Slot of each (chunk, micro-batch) from its forward to its backward.
  std::vector<std::vector<int>> free_slots(static_cast<size_t>(chunks_));
  const std::vector<int> counts = slots(micros, backward);
  for (int c = 0; c < chunks_; ++c)
    for (int s = counts[size_t(c)] - 1; s >= 0; --s) free_slots[size_t(c)].push_back(s);
  std::map<std::pair<int, int>, int> slot_of;
  std::vector<int> backwards_left(static_cast<size_t>(chunks_), micros), forwards_left = backwards_left;

  Losses total;
  for (const PipelineOp& op : schedule(micros, backward)) {
    const ModelInputs& in = micro.at(size_t(op.micro));
    if (op.forward) {
      auto& pool = free_slots[size_t(op.chunk)];
      if (pool.empty()) throw Error("pipeline: no free activation slot (the schedule's peak was wrong)");
      const int slot = pool.back();
      pool.pop_back();
      slot_of[{op.chunk, op.micro}] = slot;
      if (!first_virtual(op.chunk))
        receive(model_.chunk_input(op.chunk, slot), n, previous(op.chunk), op.chunk, op.micro, true);
      // The heads' gradients are final in the last micro-batch's forward op of the last chunk.
      if (--forwards_left[size_t(op.chunk)] == 0 && last_virtual(op.chunk) && before_last_backward)
        before_last_backward(op.chunk);
      Losses l;
      const float* out = model_.forward_chunk(op.chunk, slot, in, key(op.micro), backward, loss_scale, &l);
      if (last_virtual(op.chunk)) {
        total.total += l.total, total.mlm += l.mlm, total.nsp += l.nsp, total.predictions += l.predictions;
        total.correct += l.correct;
      } else {
        send(out, n, next(op.chunk), op.micro, true);
      }
      if (!backward) pool.push_back(slot);
    } else {
      const int slot = slot_of.at({op.chunk, op.micro});
      const float* dout = nullptr;
      if (!last_virtual(op.chunk)) {
        receive(grad_in_.get(), n, next(op.chunk), op.chunk, op.micro, false);
        dout = grad_in_.get();
      }
      if (--backwards_left[size_t(op.chunk)] == 0 && !last_virtual(op.chunk) && before_last_backward)
        before_last_backward(op.chunk);
      const float* dinp = model_.backward_chunk(op.chunk, slot, in, dout, key(op.micro));
      if (!first_virtual(op.chunk)) send(dinp, n, previous(op.chunk), op.micro, false);
      slot_of.erase({op.chunk, op.micro});
      free_slots[size_t(op.chunk)].push_back(slot);
    }
  }
  drain(true);
  return total;
}

}  // namespace pretrain
