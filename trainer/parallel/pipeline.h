// Runs one training step's micro-batches through this rank's model chunks in its pipeline
// schedule's order (trainer/parallel/schedule.h). Activations and their gradients go point to
// point between neighbouring (virtual) stages: sends are non-blocking, so a stage never waits
// for its neighbour to take what it sent, only for what it needs next, and the schedule's order,
// valid on Megatron's stricter blocking exchange, cannot deadlock here. They travel through host
// memory over MPI for both backends (CUDA tensors are copied to the host first).
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <vector>

#include "common/communicator.h"
#include "trainer/model.h"
#include "trainer/parallel/schedule.h"

namespace pretrain {

class Grid;

class PipelineRunner {
 public:
  // pipeline: the ranks of this rank's pipeline (rank = stage). stages × chunks virtual stages.
  PipelineRunner(Model& model, const Communicator& pipeline, int stage, int stages);

  // The step's micro-batches (all of the same shape), the dropout key of each, and the loss scale.
  // Returns the sum of the micro-batches' losses (shares of the step's means): non-zero on the
  // last stage only. With `backward` false: forward passes only (evaluation).
  // before_last_backward(chunk) is called before the first op that finishes gradients of the chunk's
  // last micro-batch: its backward, or for the chunk with the heads (whose backward runs in the
  // forward op) that forward; data parallel attaches its gradient buckets there.
  Losses run(const std::vector<ModelInputs>& micro, const std::function<uint64_t(int)>& key, float loss_scale,
             bool backward = true, const std::function<void(int)>& before_last_backward = nullptr);

  const std::vector<PipelineOp>& schedule(int micros, bool backward);
  std::vector<int> slots(int micros, bool backward);  // activation sets per chunk at the peak
  double last_wait_seconds() const { return wait_seconds_; }  // time spent waiting in receives

 private:
  struct Peer {
    int rank, chunk;
  };
  Peer previous(int chunk) const;  // the (virtual) stage before this chunk's, if any
  Peer next(int chunk) const;
  bool first_virtual(int chunk) const { return stage_ == 0 && chunk == 0; }
  bool last_virtual(int chunk) const { return stage_ == stages_ - 1 && chunk == chunks_ - 1; }
  int tag(int micro, int chunk, bool forward) const;
  void send(const float* device_data, int64_t n, Peer to, int micro, bool forward);
  void receive(float* device_data, int64_t n, Peer from, int chunk, int micro, bool forward);
  void drain(bool all);

  Model& model_;
  const Communicator& pipeline_;
  int stage_, stages_, chunks_;
  std::map<std::pair<int, bool>, std::vector<PipelineOp>> schedules_;  // by (micros, backward)
  struct PendingSend {
    std::vector<float> data;
    Communicator::Request request;
  };
  std::deque<PendingSend> sends_;
  std::vector<float> host_;
  DeviceBuffer<float> grad_in_;
  double wait_seconds_ = 0;
};

}  // namespace pretrain
