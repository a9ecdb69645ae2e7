// gpt_pretrain: GPT-2 pretraining (next-token prediction) from Megatron .bin/.idx or llm.c shards.
#include "common/cli.h"
#include "trainer/train.h"

int main(int argc, char** argv) {
  CLI::App app{"Pretrain GPT-2 on CPU or CUDA from Megatron .bin/.idx or llm.c token shards", "gpt_pretrain"};
  pretrain::ToolOptions common(app);
  pretrain::TrainOptions options;
  options.kind = pretrain::ModelKind::gpt;
  options.data.batch_size = 8;
  options.optimizer.lr = 6e-4;
  options.optimizer.beta2 = 0.95;
  options.optimizer.weight_decay = 0.1;
  options.optimizer.schedule = pretrain::LrSchedule::cosine;
  options.schedule_name = "cosine";
  pretrain::add_train_options(app, options);
  return pretrain::run_tool(app, argc, argv, [&] { return pretrain::run_training(options); });
}
