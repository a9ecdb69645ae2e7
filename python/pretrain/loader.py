"""pretrain.loader: training batches from pretraining shards (BERT HDF5, Megatron .bin/.idx, llm.c
.bin) as numpy arrays without copies. The module itself is `pretrain_loader` (its first name, which
scripts and tests keep importing); this is the same objects under the package's name.

    from pretrain.loader import Loader
    for batch in Loader("shards/bert", batch_size=32, seed=1):
        input_ids = torch.from_numpy(batch["input_ids"])

See help(Loader) for the options.
"""
from pretrain_loader import DeviceArray, EpochIterator, Loader

__all__ = ["Loader", "DeviceArray", "EpochIterator"]
