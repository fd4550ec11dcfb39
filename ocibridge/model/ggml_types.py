"""ggml's type tables: GGUF ``general.file_type`` values and tensor type codes → names; and
GGUF's magic, here so that telling a GGUF file apart loads no header reader.

Kept here rather than taken from the optional ``gguf`` package so that the quantization written
into a config is the same on every machine, whatever is installed (docs/reproducibility.md).
Values are ggml's (``llama_ftype`` and ``ggml_type``); a code missing here gives no name.
"""

from __future__ import annotations

#: the first four bytes of a GGUF file
GGUF_MAGIC = b"GGUF"

#: ``general.file_type`` → name, as llama.cpp prints it (``MOSTLY_``/``ALL_`` prefixes dropped).
FILE_TYPES: dict[int, str] = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
    11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
    17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS",
    23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M",
    30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE",
    39: "NVFP4", 40: "Q1_0", 1024: "GUESSED",
}

#: ggml tensor type code → name.
TENSOR_TYPES: dict[int, str] = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 9: "Q8_1",
    10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K", 16: "IQ2_XXS",
    17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S",
    23: "IQ4_XS", 24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64", 29: "IQ1_M", 30: "BF16",
    34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4", 40: "NVFP4", 41: "Q1_0",
}

#: ggml tensor type code → (elements per block, bytes per block): a tensor of ``n`` elements
#: (``n`` a multiple of the block) holds ``n // block * bytes`` bytes. Values are ggml's
#: (``ggml_type_traits``), the same as the ``gguf`` package's ``GGML_QUANT_SIZES``.
TYPE_SIZES: dict[int, tuple[int, int]] = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
    9: (32, 40), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210),
    15: (256, 292), 16: (256, 66), 17: (256, 74), 18: (256, 98), 19: (256, 50), 20: (32, 18),
    21: (256, 110), 22: (256, 82), 23: (256, 136), 24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8),
    28: (1, 8), 29: (256, 56), 30: (1, 2), 34: (256, 54), 35: (256, 66), 39: (32, 17),
    40: (64, 36), 41: (128, 18),
}

#: ggml types numpy has a dtype for (little-endian files; the rest are blocks: read bytes)
NUMPY_TYPES: dict[int, str] = {0: "float32", 1: "float16", 24: "int8", 25: "int16", 26: "int32",
                               27: "int64", 28: "float64"}
