#!/usr/bin/env bash
# e2e.resnet18_torchvision: kiln's ResNet-18 against torchvision's, where
# Python has torch, torchvision and safetensors (a skip, status 77,
# elsewhere): scripts/resnet_reference.py writes torchvision's model, input
# and outputs, and ResNet.Resnet18MatchesTorchvision loads and compares them.
#   resnet_torchvision.sh E2E_TESTS SCRIPT WORKDIR
set -euo pipefail
e2e=$1 script=$2 work=$3
if ! python3 -c "import torch, torchvision, safetensors" 2>/dev/null; then
  echo "resnet_torchvision: python3 lacks torch, torchvision or safetensors: skipped"
  exit 77
fi
mkdir -p "$work"
python3 "$script" "$work/resnet18_reference.safetensors"
KILN_RESNET18_REFERENCE="$work/resnet18_reference.safetensors" \
  "$e2e" --gtest_filter=ResNet.Resnet18MatchesTorchvision 2>&1 | tee "$work/log"
grep -q "\[  PASSED  \] 1 test" "$work/log"
