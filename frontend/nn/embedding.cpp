// nn::Embedding (frontend/nn/embedding.h).
#include "frontend/nn/embedding.h"

#include "frontend/indexing.h"
#include "frontend/nn/init.h"
#include "runtime/error.h"

namespace kiln::nn {

EmbeddingImpl::EmbeddingImpl(int64_t numEmbeddings_, int64_t embeddingDim_)
    : Module("Embedding"), numEmbeddings(numEmbeddings_), embeddingDim(embeddingDim_) {
  KILN_CHECK(numEmbeddings >= 0 && embeddingDim >= 0,
             "Embedding: expected sizes >= 0, got numEmbeddings={}, embeddingDim={}", numEmbeddings, embeddingDim);
  weight = registerParameter("weight", zeros({numEmbeddings, embeddingDim}));
  resetParameters();
}

void EmbeddingImpl::resetParameters(Generator& generator) { init::normal_(weight, 0.0, 1.0, generator); }

Tensor EmbeddingImpl::forward(const Tensor& indices) { return embedding(weight, indices); }

}  // namespace kiln::nn
