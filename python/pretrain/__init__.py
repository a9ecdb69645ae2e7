"""The pretraining suite from Python: our shards' loader and our tokenizers.

    from pretrain.loader import Loader          # batches as numpy arrays, no copy
    from pretrain.tokenizer import Tokenizer    # WordPiece, GPT-2 BPE, SentencePiece

`pip install .` at the project root installs this package (and `pretrain_loader`, the loader's
module under its first name); in a build tree it is <build>/python/.
"""
from pretrain import loader, tokenizer  # noqa: F401

__all__ = ["loader", "tokenizer"]
