"""pretrain.tokenizer: the suite's tokenizers (the `tokenize` command's, same ids), in C++.

    from pretrain.tokenizer import Tokenizer
    tok = Tokenizer("vocab.txt")          # vocab.txt, encoder.json/vocab.json, tokenizer.json, *.model
    ids = tok.encode("Hello world")       # list[int]
    many = tok.encode_batch(lines)        # list[list[int]], on oneTBB workers, the GIL released
    text = tok.decode(ids)

See help(Tokenizer) for what loads and the options.
"""
from pretrain._tokenizer import Tokenizer

__all__ = ["Tokenizer"]
