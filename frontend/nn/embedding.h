// nn::Embedding, as torch.nn.Embedding: a lookup table of `num` vectors of
// `dim` elements, indexed by integer tensors (kiln::embedding), initialized
// from N(0, 1) as in PyTorch.
#pragma once

#include <cstdint>

#include "frontend/nn/module.h"

namespace kiln::nn {

class EmbeddingImpl : public Module {
 public:
  /// Parameter "weight" [numEmbeddings, embeddingDim], f32, ~ N(0, 1) from
  /// the default generator.
  EmbeddingImpl(int64_t numEmbeddings, int64_t embeddingDim);

  /// Draws the weight anew from N(0, 1), as PyTorch's reset_parameters.
  void resetParameters(Generator& generator = defaultGenerator());
  /// indices (i64 or i32, any shape) to indices' shape followed by embeddingDim.
  Tensor forward(const Tensor& indices) override;

  const int64_t numEmbeddings;
  const int64_t embeddingDim;
  Tensor weight;  ///< [numEmbeddings, embeddingDim]
};
KILN_MODULE(Embedding);

}  // namespace kiln::nn
