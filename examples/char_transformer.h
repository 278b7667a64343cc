// What examples/train_transformer.cpp trains: a small decoder-only
// transformer (GPT-2's pre-norm layout) over the bytes of a text file, and
// the data set of fixed windows of that text it reads.
//
//   tokens [B, T] -> token embedding + position embedding
//     -> layers x (x + Attn(LN(x)), then x + MLP(LN(x)))   causal, with dropout
//     -> LN -> Linear(d, 256) -> logits [B, T, 256]
//
// The vocabulary is the 256 byte values, so any file is a corpus and no
// tokenizer is needed. The default corpus is /usr/share/common-licenses/GPL-3
// (35 KB of English), which Debian's base-files package ships on every
// Debian system; `generated` makes a text from a small grammar instead.
#pragma once
#include <kiln/frontend/kiln.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace chargpt {

struct Config {
  int64_t vocab = 256;
  int64_t seq = 128;  ///< context length: tokens per example
  int64_t d = 128;
  int64_t heads = 4;
  int64_t layers = 4;
  double dropout = 0.1;
  /// Recompute each layer in backward instead of keeping its activations
  /// (kiln::checkpoint).
  bool checkpoint = false;
};

/// The corpus: the bytes of `path`, or of a generated text when `path` is
/// "generated". Throws kiln::Error naming the file when it cannot be read
/// or is too short for one training and one validation example.
inline std::vector<uint8_t> loadText(const std::string& path, int64_t seq) {
  std::vector<uint8_t> bytes;
  if (path == "generated") {
    // Sentences from a small grammar, seeded: the same text on every machine.
    static const char* const subjects[] = {"the kiln", "a tensor", "the compiler", "every kernel", "the device"};
    static const char* const verbs[] = {"fuses", "reads", "writes", "compiles", "schedules", "frees"};
    static const char* const objects[] = {"the graph", "a buffer", "each value", "the loop", "its gradient"};
    std::mt19937 rng(7);
    std::string text;
    while (text.size() < 40000) {
      text += subjects[rng() % 5];
      text += ' ';
      text += verbs[rng() % 6];
      text += ' ';
      text += objects[rng() % 5];
      text += rng() % 4 == 0 ? ".\n" : ". ";
    }
    bytes.assign(text.begin(), text.end());
  } else {
    std::ifstream in(path, std::ios::binary);
    KILN_CHECK(in.good(), "train_transformer: cannot read the text file {}", path);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // 90% for training and 10% for validation, each at least one window.
  KILN_CHECK(static_cast<int64_t>(bytes.size()) >= 20 * (seq + 1),
             "train_transformer: {} has {} bytes; a context of {} needs at least {}", path, bytes.size(), seq,
             20 * (seq + 1));
  return bytes;
}

/// Windows of seq + 1 bytes of a text, every `stride` bytes: example i is
/// (bytes [s, s + seq), bytes [s + 1, s + seq + 1)) with s = i * stride, the
/// input and the next byte at each position, as i64. Stride 1 makes every
/// offset an example, so a shuffled epoch reads windows at random offsets
/// (nanoGPT's sampling, without replacement); stride seq tiles the text.
/// get() reads shared const bytes only, so the loader's workers may call
/// it at once.
class TextWindows : public kiln::data::Dataset {
 public:
  TextWindows(std::shared_ptr<const std::vector<uint8_t>> text, size_t begin, size_t end, int64_t seq, int64_t stride)
      : text_(std::move(text)),
        begin_(begin),
        seq_(seq),
        stride_(stride),
        count_((static_cast<int64_t>(end - begin) - seq - 1) / stride + 1) {}
  kiln::data::Example get(int64_t index) const override {
    const size_t start = begin_ + static_cast<size_t>(index * stride_);
    std::vector<int64_t> window(text_->begin() + static_cast<ptrdiff_t>(start),
                                text_->begin() + static_cast<ptrdiff_t>(start) + seq_ + 1);
    std::vector<int64_t> input(window.begin(), window.end() - 1), next(window.begin() + 1, window.end());
    return {kiln::fromVector(input, {seq_}, kiln::Device::cpu()), kiln::fromVector(next, {seq_}, kiln::Device::cpu())};
  }
  int64_t size() const override { return count_; }

 private:
  std::shared_ptr<const std::vector<uint8_t>> text_;
  size_t begin_;
  int64_t seq_, stride_, count_;
};

/// One pre-norm transformer layer with causal self-attention.
class BlockImpl : public kiln::nn::Module {
 public:
  explicit BlockImpl(const Config& c)
      : Module("Block"),
        heads_(c.heads),
        dropout_(c.dropout),
        ln1(registerModule("ln1", kiln::nn::LayerNorm(c.d))),
        qkv(registerModule("qkv", kiln::nn::Linear(c.d, 3 * c.d))),
        proj(registerModule("proj", kiln::nn::Linear(c.d, c.d))),
        ln2(registerModule("ln2", kiln::nn::LayerNorm(c.d))),
        fc1(registerModule("fc1", kiln::nn::Linear(c.d, 4 * c.d))),
        fc2(registerModule("fc2", kiln::nn::Linear(4 * c.d, c.d))),
        drop(registerModule("drop", kiln::nn::Dropout(c.dropout))) {}

  /// x [B, T, d] to [B, T, d].
  kiln::Tensor forward(const kiln::Tensor& x) override {
    const int64_t b = x.size(0), t = x.size(1), d = x.size(2), dh = d / heads_;
    const kiln::Tensor all = qkv(ln1(x));  // [B, T, 3d]
    // q, k, v: [B, heads, T, dh] views of all's thirds.
    auto head = [&](int64_t part) { return all.narrow(2, part * d, d).view({b, t, heads_, dh}).transpose(1, 2); };
    kiln::AttentionOptions attention;
    attention.isCausal = true;
    attention.dropoutP = isTraining() ? dropout_ : 0.0;
    const kiln::Tensor o = kiln::scaledDotProductAttention(head(0), head(1), head(2), attention);
    const kiln::Tensor h = x + drop(proj(o.transpose(1, 2).reshape({b, t, d})));
    return h + drop(fc2(kiln::gelu(fc1(ln2(h)))));
  }

 private:
  int64_t heads_;
  double dropout_;

 public:
  kiln::nn::LayerNorm ln1;
  kiln::nn::Linear qkv, proj;
  kiln::nn::LayerNorm ln2;
  kiln::nn::Linear fc1, fc2;
  kiln::nn::Dropout drop;
};
KILN_MODULE(Block);

class CharTransformerImpl : public kiln::nn::Module {
 public:
  /// Parameters drawn from kiln's default generator (kiln::manualSeed).
  explicit CharTransformerImpl(const Config& c)
      : Module("CharTransformer"),
        config(c),
        tokens(registerModule("tokens", kiln::nn::Embedding(c.vocab, c.d))),
        positions(registerModule("positions", kiln::nn::Embedding(c.seq, c.d))),
        blocks(registerModule("blocks", kiln::nn::Sequential())),
        lnF(registerModule("ln_f", kiln::nn::LayerNorm(c.d))),
        head(registerModule("head", kiln::nn::Linear(c.d, c.vocab))) {
    KILN_CHECK(c.heads > 0 && c.d % c.heads == 0, "CharTransformer: d {} is not a multiple of heads {}", c.d, c.heads);
    for (int64_t i = 0; i < c.layers; ++i) blocks->push_back(Block(c));
    // GPT-2's N(0, 0.02) for the embeddings rather than N(0, 1).
    kiln::NoGradGuard noGrad;
    tokens->weight.mul_(0.02);
    positions->weight.mul_(0.02);
  }

  /// tokens [B, T] (i64, T <= seq) to logits [B, T, vocab].
  kiln::Tensor forward(const kiln::Tensor& input) override {
    const int64_t t = input.size(1);
    kiln::Tensor h = tokens(input) + positions->weight.narrow(0, 0, t);
    for (const auto& block : *blocks) {
      auto run = [&block](const kiln::Tensor& in) { return block->forward(in); };
      h = config.checkpoint && isTraining() ? kiln::checkpoint(run, h) : run(h);
    }
    return head(lnF(h));
  }

  /// The mean cross-entropy of predicting `next` [B, T] from `input` [B, T].
  kiln::Tensor loss(const kiln::Tensor& input, const kiln::Tensor& next) {
    const kiln::Tensor logits = forward(input);
    const int64_t n = logits.size(0) * logits.size(1);
    return kiln::crossEntropy(logits.reshape({n, config.vocab}), next.reshape({n}));
  }

  const Config config;
  kiln::nn::Embedding tokens, positions;
  kiln::nn::Sequential blocks;
  kiln::nn::LayerNorm lnF;
  kiln::nn::Linear head;
};
KILN_MODULE(CharTransformer);

}  // namespace chargpt
