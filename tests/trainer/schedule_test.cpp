// Pipeline schedules (trainer/parallel/schedule.h) without MPI: every stage's order is a pure
// function, so the whole pipeline can be simulated here. Each schedule must run every forward and
// backward exactly once, keep a backward after its forward, hold no more activations than 1F1B
// promises, and, run together with the other stages' schedules, finish without a deadlock.
#include "trainer/parallel/schedule.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "common/error.h"

namespace pretrain::schedule_test {
namespace {

std::string order(const std::vector<PipelineOp>& ops) {
  std::string s;
  for (const PipelineOp& op : ops) s += (s.empty() ? "" : " ") + describe(op);
  return s;
}

void expect_each_pass_once(const std::vector<PipelineOp>& ops, int chunks, int micros) {
  std::set<std::tuple<bool, int, int>> seen;
  std::set<std::pair<int, int>> forwarded;
  for (const PipelineOp& op : ops) {
    EXPECT_TRUE(seen.insert({op.forward, op.chunk, op.micro}).second) << describe(op) << " twice";
    if (op.forward) forwarded.insert({op.chunk, op.micro});
    else EXPECT_TRUE(forwarded.count({op.chunk, op.micro})) << describe(op) << " before its forward";
  }
  EXPECT_EQ(seen.size(), size_t(2 * chunks * micros));
}

// Runs every stage's schedule together, an op starting once what it needs has run on the stage
// before it (forward: the same micro-batch's previous virtual stage; backward: the next one's).
// Sends never block, as the trainer's pipeline posts them. Returns false on a deadlock.
bool pipeline_completes(int stages, int chunks, int micros) {
  std::vector<std::vector<PipelineOp>> ops;
  for (int s = 0; s < stages; ++s) ops.push_back(pipeline_schedule(s, stages, chunks, micros));
  // Virtual stage of (chunk, stage): chunk·p + stage; done[{forward, virtual stage, micro}].
  std::set<std::tuple<bool, int, int>> done;
  std::vector<size_t> next(size_t(stages), 0);
  const int last = chunks * stages - 1;
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < stages; ++s) {
      while (next[size_t(s)] < ops[size_t(s)].size()) {
        const PipelineOp& op = ops[size_t(s)][next[size_t(s)]];
        const int v = op.chunk * stages + s;
        bool ready = op.forward ? v == 0 || done.count({true, v - 1, op.micro})
                                : (v == last ? done.count({true, v, op.micro}) > 0 : done.count({false, v + 1, op.micro}) > 0);
        if (!ready) break;
        done.insert({op.forward, v, op.micro});
        ++next[size_t(s)];
        progress = true;
      }
    }
  }
  for (int s = 0; s < stages; ++s)
    if (next[size_t(s)] != ops[size_t(s)].size()) return false;
  return true;
}

TEST(PipelineSchedule, OneStageIsGradientAccumulation) {
  EXPECT_EQ(order(pipeline_schedule(0, 1, 1, 3)), "F0.0 B0.0 F1.0 B1.0 F2.0 B2.0");
}

TEST(PipelineSchedule, OneFOneB) {
  EXPECT_EQ(order(pipeline_schedule(0, 4, 1, 6)), "F0.0 F1.0 F2.0 F3.0 B0.0 F4.0 B1.0 F5.0 B2.0 B3.0 B4.0 B5.0");
  EXPECT_EQ(order(pipeline_schedule(3, 4, 1, 6)), "F0.0 B0.0 F1.0 B1.0 F2.0 B2.0 F3.0 B3.0 F4.0 B4.0 F5.0 B5.0");
  // Fewer micro-batches than stages: the warm-up is cut to what there is.
  EXPECT_EQ(order(pipeline_schedule(0, 4, 1, 2)), "F0.0 F1.0 B0.0 B1.0");
  for (int stages : {1, 2, 3, 4, 8})
    for (int micros : {1, 2, 3, 4, 7, 16}) {
      for (int s = 0; s < stages; ++s) {
        auto ops = pipeline_schedule(s, stages, 1, micros);
        expect_each_pass_once(ops, 1, micros);
        EXPECT_EQ(peak_live(ops, 1)[0], std::min(stages - s, micros)) << s << "/" << stages << ", m " << micros;
      }
      EXPECT_TRUE(pipeline_completes(stages, 1, micros)) << stages << " stages, " << micros << " micro-batches";
    }
}

TEST(PipelineSchedule, Interleaved) {
  // p = 2, v = 2, m = 4 (Megatron's order): groups of p micro-batches go through each chunk in turn.
  EXPECT_EQ(order(pipeline_schedule(0, 2, 2, 4)), "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0");
  EXPECT_EQ(order(pipeline_schedule(1, 2, 2, 4)), "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0");
  for (int stages : {2, 3, 4})
    for (int chunks : {2, 3})
      for (int groups : {1, 2, 3}) {
        const int micros = stages * groups;
        for (int s = 0; s < stages; ++s) expect_each_pass_once(pipeline_schedule(s, stages, chunks, micros), chunks, micros);
        EXPECT_TRUE(pipeline_completes(stages, chunks, micros)) << stages << "×" << chunks << ", m " << micros;
      }
}

TEST(PipelineSchedule, Refusals) {
  EXPECT_THROW(pipeline_schedule(2, 2, 1, 4), Error);
  EXPECT_THROW(pipeline_schedule(0, 2, 1, 0), Error);
  try {
    pipeline_schedule(0, 4, 2, 6);
    FAIL() << "interleaved with 6 micro-batches over 4 stages";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--grad-accum (6) to be a multiple of --pipeline-parallel (4)"),
              std::string::npos) << e.what();
  }
}

TEST(PipelineSchedule, BubbleFormula) {
  EXPECT_DOUBLE_EQ(pipeline_bubble(1, 1, 8), 0.0);
  EXPECT_DOUBLE_EQ(pipeline_bubble(4, 1, 8), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(pipeline_bubble(4, 2, 8), 3.0 / 19.0);
}

}  // namespace
}  // namespace pretrain::schedule_test
