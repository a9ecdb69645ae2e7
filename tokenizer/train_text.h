// The text the tokenizer trainers read: a source calls the sink once per document paragraph or
// line, in order. The trainers need nothing else, so they depend on common only; train-tokenizer
// builds the source from document shards or plain text files.
#pragma once
#include <functional>
#include <string_view>

namespace pretrain {

using TextSink = std::function<void(std::string_view text)>;
using TextSource = std::function<void(const TextSink& sink)>;

}  // namespace pretrain
