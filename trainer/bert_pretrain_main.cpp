// bert_pretrain: BERT pretraining (MLM + NSP) from NVIDIA-layout HDF5 shards. See trainer/train.h.
#include "common/cli.h"
#include "trainer/train.h"

int main(int argc, char** argv) {
  CLI::App app{"Pretrain BERT (MLM + NSP) on CPU or CUDA from HDF5 shards made by make-pretraining-shards", "bert_pretrain"};
  pretrain::ToolOptions common(app);
  pretrain::TrainOptions options;
  options.kind = pretrain::ModelKind::bert;
  options.optimizer.eps = 1e-6;
  pretrain::add_train_options(app, options);
  return pretrain::run_tool(app, argc, argv, [&] { return pretrain::run_training(options); });
}
