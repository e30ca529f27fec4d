"""The values the command line offers, kept here so that building the parser (`--help`, a usage error) imports no
model stack. Each mirrors the library's own constant; `tests/cli/test_choices.py` checks that they agree."""

BACKENDS = ("torch", "onnx", "openvino")  # contextembed.backends.runtime.BACKENDS
CHUNKERS = ("sentences", "paragraphs", "markdown", "tokens")  # contextembed.chunking.CHUNKERS
DTYPES = ("float32", "bfloat16", "float16", "auto")  # contextembed.encoder.DTYPES
PRECISIONS = ("float32", "int8", "uint8", "binary", "ubinary")  # contextembed.quantization.PRECISIONS
EXPORT_FORMATS = ("onnx", "openvino")  # contextembed.backends.export.EXPORT_FORMATS
QUANTIZATIONS = ("int8",)  # contextembed.backends.export.QUANTIZATIONS
DATASET_LAYOUTS = ("context-bench", "conteb", "beir")  # contextembed.evaluation.datasets.DATASET_LAYOUTS
COMMIT_TOKENS = 262_144  # contextembed.stores.sync.COMMIT_TOKENS
