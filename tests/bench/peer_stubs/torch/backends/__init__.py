import types

mkldnn = types.SimpleNamespace(is_available=lambda: False)
mkl = types.SimpleNamespace(is_available=lambda: False)
