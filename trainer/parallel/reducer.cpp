#include "trainer/parallel/reducer.h"

#include "common/error.h"

namespace pretrain {

GradientReducer::GradientReducer(const Communicator& comm, DeviceCommunicator* nccl, Model& model, int64_t bucket_floats)
    : comm_(comm), nccl_(nccl), model_(model), bucket_floats_(bucket_floats > 0 ? bucket_floats : 1) {
  if (!nccl_) worker_ = std::thread([this] { run(); });
}

GradientReducer::~GradientReducer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void GradientReducer::ready(int64_t begin, int64_t end) {
  if (open_begin_ < 0) {
    open_begin_ = begin, open_end_ = end;
  } else if (end == open_begin_) {  // the backward pass walks the arena downwards
    open_begin_ = begin;
  } else {  // not adjacent: close the bucket, start another
    submit(open_begin_, open_end_);
    open_begin_ = begin, open_end_ = end;
  }
  if (open_end_ - open_begin_ >= bucket_floats_) {
    submit(open_begin_, open_end_);
    open_begin_ = open_end_ = -1;
  }
}

void GradientReducer::submit(int64_t begin, int64_t end) {
  ++buckets_;
  if (nccl_) return nccl_->all_reduce_sum(model_.grads() + begin, end - begin);  // its stream, after the event
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace_back(begin, end);
    ++in_flight_;
  }
  cv_.notify_all();
}

void GradientReducer::run() {
  for (;;) {
    std::pair<int64_t, int64_t> range;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      range = queue_.front();
      queue_.pop_front();
    }
    try {
      comm_.all_reduce_sum(model_.grads() + range.first, range.second - range.first);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      --in_flight_;
    }
    cv_.notify_all();
  }
}

void GradientReducer::finish() {
  if (open_begin_ >= 0) submit(open_begin_, open_end_);
  open_begin_ = open_end_ = -1;
  if (nccl_) return nccl_->join();
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return in_flight_ == 0; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

}  // namespace pretrain
