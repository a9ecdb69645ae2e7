/* The data loader for trainers written in C, or in anything that calls C (ctypes, cffi, Rust, Go,
 * Julia, …). A thin shell over pretrain::Loader (loader/loader.h): the same batches, the same
 * state strings, no C++ types here and no exception ever crossing this boundary.
 *
 *   pretrain_loader_t* loader;
 *   if (pretrain_loader_create("{\"sources\": [\"shards/\"], \"batch_size\": 32}", &loader))
 *     die(pretrain_loader_last_error());
 *   pretrain_batch_t batch;
 *   for (;;) {
 *     int rc = pretrain_loader_next(loader, &batch);
 *     if (rc == PRETRAIN_END_OF_EPOCH) continue;       // the next call starts the next epoch
 *     if (rc != PRETRAIN_OK) break;                     // PRETRAIN_FINISHED or an error
 *     const pretrain_tensor_t* ids = pretrain_batch_tensor(&batch, "input_ids");
 *     train_step(ids->data, ...);
 *     pretrain_batch_release(&batch);                   // the ring slot goes back to the loader
 *   }
 *   pretrain_loader_destroy(loader);
 *
 * Configuration is a JSON object whose keys are LoaderConfig's fields (loader/config_json.h has
 * the list): sources, weights, kind ("bert" | "gpt"), batch_size, seq_len, rank, world_size, seed,
 * shuffle, drop_last, epochs, workers, prefetch, device ("cpu" | "cuda" | "cuda:N"), pin_memory,
 * narrow_tokens, id_dtype ("int32" | "int64"), shuffle_window, bin_batches, add_extra_token,
 * samples_per_epoch, verify_checksums, dynamic_masking (bool), mask_probability,
 * max_predictions, mask_id, vocab_size, special_ids, consumer_stream (a cudaStream_t as an
 * integer). JSON rather than a struct so that options can be added without breaking the ABI.
 *
 * Errors: every function returns PRETRAIN_OK (0) or a negative code, and then
 * pretrain_loader_last_error() holds the message ("<file>: record 7: …"), per thread, until the
 * next failing call on that thread.
 *
 * Threads: one loader is driven by one thread at a time; a batch may be released from any thread.
 * A batch may outlive pretrain_loader_destroy(): the loader's memory goes with its last batch. */
#ifndef PRETRAIN_LOADER_C_API_H
#define PRETRAIN_LOADER_C_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes. */
enum {
  PRETRAIN_OK = 0,
  PRETRAIN_END_OF_EPOCH = 1, /* next(): the epoch is done; the next call starts the next one */
  PRETRAIN_FINISHED = 2,     /* next(): all `epochs` epochs are done; every later call says so */
  PRETRAIN_ERROR = -1,       /* data or runtime error: a corrupt shard, an id out of range, … */
  PRETRAIN_USAGE_ERROR = -2, /* the caller asked for something impossible: bad option, bad state */
  PRETRAIN_INTERNAL_ERROR = -3 /* anything else (out of memory, a bug) */
};

/* Element types of batch tensors (the values of pretrain::TensorDType). */
enum {
  PRETRAIN_DTYPE_UINT8 = 0,
  PRETRAIN_DTYPE_INT8 = 1,
  PRETRAIN_DTYPE_UINT16 = 2,
  PRETRAIN_DTYPE_INT32 = 3,
  PRETRAIN_DTYPE_INT64 = 4
};

enum { PRETRAIN_KIND_BERT = 0, PRETRAIN_KIND_GPT = 1 };

typedef struct pretrain_loader pretrain_loader_t; /* opaque */

/* A view of one batch tensor: at most 2-D, row-major, contiguous. `device` is -1 for host memory,
 * else the CUDA device index. Valid until the batch is released. */
typedef struct {
  const char* name; /* "input_ids", "tokens", … */
  void* data;
  int32_t dtype;    /* PRETRAIN_DTYPE_* */
  int32_t ndim;     /* 1 or 2 */
  int64_t shape[2]; /* shape[1] is 0 for 1-D tensors */
  int32_t device;
  size_t bytes;
} pretrain_tensor_t;

#define PRETRAIN_MAX_TENSORS 16

/* One batch. BERT: input_ids, segment_ids, input_mask [size, seq_len]; masked_lm_positions,
 * masked_lm_ids [size, max_predictions]; mlm_labels [size, seq_len] (the id at masked positions,
 * -1 elsewhere); next_sentence_labels [size]. Packed BERT shards (K instances per row) make
 * next_sentence_labels [size, K] (-1: no instance) and add position_ids, sequence_ids
 * [size, seq_len] (1..k: the token's instance, 0: padding) and next_sentence_positions [size, K]
 * (each instance's [CLS]). GPT: tokens, targets [size, seq_len]. */
typedef struct {
  int64_t size;   /* rows; the last batch of an epoch may be short */
  uint64_t epoch;
  uint64_t index; /* this rank's batch number within the epoch */
  int32_t kind;   /* PRETRAIN_KIND_* */
  int32_t num_tensors;
  pretrain_tensor_t tensors[PRETRAIN_MAX_TENSORS];
  void* internal; /* holds the ring slot; NULL once released */
} pretrain_batch_t;

typedef struct {
  uint64_t batches, samples;
  double seconds; /* since the first next() */
  double samples_per_second;
  double wait_seconds; /* time next() spent waiting for a batch */
  double wait_ms_per_batch;
  double read_seconds; /* worker time reading and collating, summed over workers */
} pretrain_loader_stats_t;

typedef struct {
  int32_t kind;
  int64_t batch_size; /* per rank */
  int64_t seq_len;
  int64_t max_predictions; /* BERT */
  int64_t vocab_size;      /* 0 when unknown */
  uint64_t samples_per_epoch; /* over all ranks */
  uint64_t batches_per_epoch; /* this rank's */
} pretrain_loader_info_t;

/* The message of the last failed call on this thread ("" when none). Valid until the next call
 * into this API on this thread. */
const char* pretrain_loader_last_error(void);

/* Opens the shards and starts prefetching. On failure *out is NULL. */
int pretrain_loader_create(const char* config_json, pretrain_loader_t** out);
/* Stops the pipeline (never hangs mid-epoch) once the last unreleased batch is released too.
 * NULL is a no-op. */
void pretrain_loader_destroy(pretrain_loader_t* loader);

/* Fills *batch with the next batch (PRETRAIN_OK), or says the epoch (PRETRAIN_END_OF_EPOCH) or the
 * whole run (PRETRAIN_FINISHED) is over; *batch is then empty. Errors of the workers (with file and
 * record) come out here. Holding `prefetch` unreleased batches and asking for another is an error
 * (it would wait forever). */
int pretrain_loader_next(pretrain_loader_t* loader, pretrain_batch_t* batch);
/* Gives the batch's ring slot back; the tensors' memory is no longer the caller's. Safe to call
 * twice, and on a zeroed or empty batch. */
void pretrain_batch_release(pretrain_batch_t* batch);
/* The tensor called `name`, or NULL when the batch has none. */
const pretrain_tensor_t* pretrain_batch_tensor(const pretrain_batch_t* batch, const char* name);

/* The loader's state as a JSON string (epoch, samples consumed, seed, fingerprint): where the
 * consumer is, prefetched batches not counted. *json_out is malloc'ed: free it with
 * pretrain_string_free. */
int pretrain_loader_state(const pretrain_loader_t* loader, char** json_out);
/* Continues from a state string: the batches that follow are those an uninterrupted run gives
 * after the state was taken. A malformed state or one from another run (other shards, seed,
 * global batch) is a PRETRAIN_USAGE_ERROR or PRETRAIN_ERROR with the reason. */
int pretrain_loader_restore(pretrain_loader_t* loader, const char* state_json);

int pretrain_loader_stats(const pretrain_loader_t* loader, pretrain_loader_stats_t* out);
int pretrain_loader_info(const pretrain_loader_t* loader, pretrain_loader_info_t* out);
/* The id of a special token from the shards' manifest ("[MASK]", "[CLS]", "eod", …), or -1. */
int64_t pretrain_loader_special_id(const pretrain_loader_t* loader, const char* token);
/* The special ids as a JSON object {"[CLS]": 101, …}; free with pretrain_string_free. */
int pretrain_loader_special_ids(const pretrain_loader_t* loader, char** json_out);
/* The configuration in effect, every option included, as JSON; free with pretrain_string_free. */
int pretrain_loader_config(const pretrain_loader_t* loader, char** json_out);

void pretrain_string_free(char* s);

#ifdef __cplusplus
}
#endif

#endif /* PRETRAIN_LOADER_C_API_H */
