#!/usr/bin/env python3
"""Writes torchvision's ResNet-18 and its outputs as a safetensors file, for
the e2e test ResNet.Resnet18MatchesTorchvision (tests/e2e/resnet_test.cpp),
which loads the state dict into kiln's tools::resnet18() and compares:

  scripts/resnet_reference.py /tmp/resnet18_reference.safetensors
  KILN_RESNET18_REFERENCE=/tmp/resnet18_reference.safetensors \\
      build/bin/e2e_tests --gtest_filter='ResNet.*'

Needs torch and torchvision (no weights are downloaded: the model is
torchvision's random initialization, with running statistics made
non-trivial so that evaluation mode uses them). The file holds the state
dict under torchvision's names, and `input.x` [2, 3, 64, 64],
`output.eval` (evaluation mode), `output.train` (training mode, batch
statistics) and `after_train.<name>` (the batch norms' running statistics
after that training-mode call).
"""
import sys

import torch
import torchvision
from safetensors.torch import save_file


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "resnet18_reference.safetensors"
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.normal_(0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0, 0.1)
    tensors = {k: v.clone().contiguous() for k, v in model.state_dict().items()}
    x = torch.randn(2, 3, 64, 64)
    tensors["input.x"] = x
    model.eval()
    with torch.no_grad():
        tensors["output.eval"] = model(x)
        model.train()
        tensors["output.train"] = model(x)
    for k, v in model.state_dict().items():
        if "running" in k:
            tensors["after_train." + k] = v.clone().contiguous()
    save_file(tensors, path)
    print(f"wrote {path}: {len(tensors)} tensors (torch {torch.__version__}, torchvision {torchvision.__version__})")


if __name__ == "__main__":
    main()
