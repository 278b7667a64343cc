// Compile an elementwise chain with broadcasting and check it against eager.
#include <kiln/frontend/kiln.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  kiln::Tensor x = kiln::randn({1024, 512}), b = kiln::randn({512});  // b broadcasts over rows
  auto f = [](const kiln::Tensor& x, const kiln::Tensor& b) { return kiln::sigmoid(kiln::relu(x * 2.0 + b) - 0.5); };
  auto compiled = kiln::compile(f);  // traced, fused and JIT-compiled on the first call
  std::vector<float> e = f(x, b).toVector(), c = compiled(x, b).toVector();
  float maxDiff = 0;
  for (size_t i = 0; i < e.size(); ++i) maxDiff = std::max(maxDiff, std::abs(e[i] - c[i]));
  std::printf("kernels: %d\nmax abs difference: %g\n", compiled.lastNumKernels(), maxDiff);
  std::printf("compiled == eager: %s\n", e == c ? "yes" : "no");
  return e == c ? 0 : 1;
}
