/* c_consumer <shards>: the first batch (4 rows, in file order) of a BERT shard set through the C
 * API, built with `cc` and `pkg-config --static --cflags --libs pretrain_loader`. Prints the same
 * "batch …" and "row0 …" lines as ../cpp/consumer.cpp, which tests/e2e/test_install.sh compares. */
#include <stdio.h>

#include "loader/c_api.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: c_consumer <shards>\n");
    return 2;
  }
  char config[4096];
  snprintf(config, sizeof config,
           "{\"sources\": [\"%s\"], \"batch_size\": 4, \"shuffle\": false, \"epochs\": 1, \"workers\": 1}",
           argv[1]);
  pretrain_loader_t* loader = NULL;
  if (pretrain_loader_create(config, &loader) != PRETRAIN_OK) {
    fprintf(stderr, "c_consumer: %s\n", pretrain_loader_last_error());
    return 1;
  }
  pretrain_batch_t batch;
  int rc = pretrain_loader_next(loader, &batch);
  if (rc != PRETRAIN_OK) {
    fprintf(stderr, "c_consumer: next() gave %d: %s\n", rc, pretrain_loader_last_error());
    pretrain_loader_destroy(loader);
    return 1;
  }
  const pretrain_tensor_t* ids = pretrain_batch_tensor(&batch, "input_ids");
  const pretrain_tensor_t* positions = pretrain_batch_tensor(&batch, "masked_lm_positions");
  if (ids == NULL || positions == NULL || ids->dtype != PRETRAIN_DTYPE_INT32 || ids->device != -1) {
    fprintf(stderr, "c_consumer: the batch has no int32 host input_ids / masked_lm_positions\n");
    return 1;
  }
  printf("batch %lld input_ids %lld %lld masked_lm_positions %lld %lld\n", (long long)batch.size,
         (long long)ids->shape[0], (long long)ids->shape[1], (long long)positions->shape[0],
         (long long)positions->shape[1]);
  printf("row0");
  const int32_t* row = (const int32_t*)ids->data;
  for (int64_t i = 0; i < ids->shape[1]; ++i) printf(" %d", (int)row[i]);
  printf("\n");
  pretrain_batch_release(&batch);
  pretrain_loader_destroy(loader);
  return 0;
}
