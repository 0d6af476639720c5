"""Minimal safetensors reader and writer for F32, F16 and BF16 tensors.

Written here because the Python `safetensors` package is not installed on the build machines.
The format (https://github.com/huggingface/safetensors): an 8-byte little-endian header
length N, then N bytes of JSON mapping each tensor name to {"dtype", "shape",
"data_offsets": [begin, end]} (offsets relative to the end of the header) plus an optional
"__metadata__" object of strings, then the raw little-endian tensor data. The header is
padded with spaces to a multiple of 8 bytes, as the reference writer does.

Unlike `safetensors.torch.save_file`, shared tensors (tied weights) are accepted and their
data is written once per name, the way `torch.save(model.state_dict())` keeps both names.
"""
import json
import struct

import numpy as np
import torch

# safetensors dtype name -> (torch dtype, numpy dtype used for the raw bytes)
DTYPES = {
    "F32": (torch.float32, np.dtype("<f4")),
    "F16": (torch.float16, np.dtype("<f2")),
    "BF16": (torch.bfloat16, np.dtype("<u2")),  # raw bits; numpy has no bfloat16
}


def _tensor_bytes(tensor, dtype_name):
    torch_dtype, np_dtype = DTYPES[dtype_name]
    t = tensor.detach().to(torch_dtype).contiguous().cpu()
    if dtype_name == "BF16":
        # int16 view keeps the bits; reinterpret as unsigned little-endian for a stable dump
        array = t.view(torch.int16).numpy().view(np.uint16).astype(np_dtype)
    else:
        array = t.numpy().astype(np_dtype)
    return array.tobytes()


def save_file(named_tensors, path, dtype_name, metadata=None):
    """Writes the (name, tensor) pairs, in order, all converted to dtype_name.

    A 0-d tensor is stored with shape []. Returns the number of bytes written.
    """
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs = []
    offset = 0
    for name, tensor in named_tensors:
        if name in header:
            raise ValueError(f"duplicate tensor name {name}")
        blob = _tensor_bytes(tensor, dtype_name)
        header[name] = {
            "dtype": dtype_name,
            "shape": list(tensor.shape),
            "data_offsets": [offset, offset + len(blob)],
        }
        blobs.append(blob)
        offset += len(blob)
    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    header_bytes += b" " * (-len(header_bytes) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)))
        f.write(header_bytes)
        for blob in blobs:
            f.write(blob)
    return 8 + len(header_bytes) + offset


def load_file(path):
    """Reads a file written in F32/F16/BF16. Returns ({name: float32 tensor}, {name: dtype name},
    metadata). Checks that every tensor's byte range matches its shape and lies in the file."""
    with open(path, "rb") as f:
        data = f.read()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_len].decode("utf-8"))
    body = data[8 + header_len:]
    metadata = header.pop("__metadata__", {})
    tensors, dtypes = {}, {}
    for name, info in header.items():
        dtype_name = info["dtype"]
        torch_dtype, np_dtype = DTYPES[dtype_name]
        begin, end = info["data_offsets"]
        count = int(np.prod(info["shape"], dtype=np.int64))
        if end - begin != count * np_dtype.itemsize or end > len(body):
            raise ValueError(f"{path}: tensor {name}: byte range {begin}..{end} does not fit")
        array = np.frombuffer(body[begin:end], dtype=np_dtype).copy()
        if dtype_name == "BF16":
            t = torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
        else:
            t = torch.from_numpy(array)
        tensors[name] = t.to(torch.float32).reshape(info["shape"])
        dtypes[name] = dtype_name
    return tensors, dtypes, metadata
