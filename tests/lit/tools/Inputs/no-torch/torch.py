# Put first on PYTHONPATH by kiln-bench-torch.test: `import torch` fails
# here as it does where PyTorch is not installed.
raise ImportError("torch hidden by kiln-bench-torch.test")
