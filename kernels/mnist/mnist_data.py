# mnist_data.py: the MNIST files, read and checked: the IDX reader mnist_torch.py and loss_curve.py load
# the data set with (the same checks as the CUDA side's loader; docs/mnist/data.md). Not a program: a
# module mnist_torch.py imports.
import gzip
import math
import os
import struct
from pathlib import Path

import numpy as np

FILES = {
    "train_images": "train-images-idx3-ubyte", "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte", "test_labels": "t10k-labels-idx1-ubyte",
}


class IdxError(Exception):
    pass


# --8<-- [start:loader]
def read_idx(path: Path, magic: int, count: int, dims: tuple) -> np.ndarray:
    """Reads one IDX file (gzipped or raw), checking its magic number, shape and size."""
    candidates = [path.with_name(path.name + ".gz"), path]
    found = next((p for p in candidates if p.is_file()), None)
    if found is None:
        raise IdxError(f"{path.name}: not found (looked for {' and '.join(str(p) for p in candidates)}); "
                       f"set --data-dir or MNIST_DIR to the folder holding the MNIST files")
    opener = gzip.open if found.suffix == ".gz" else open
    try:
        with opener(found, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as e:
        raise IdxError(f"{found}: cannot read ({e}); is the download complete?") from e
    ndim = 1 + len(dims)
    if len(data) < 4 + 4 * ndim:
        raise IdxError(f"{found}: {len(data)} bytes, too short for an IDX header")
    got_magic = struct.unpack(">I", data[:4])[0]
    if got_magic != magic:
        raise IdxError(f"{found}: magic number 0x{got_magic:08x}, expected 0x{magic:08x}: not this IDX file")
    shape = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
    if shape != (count, *dims):
        raise IdxError(f"{found}: shape {shape}, expected {(count, *dims)}")
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != math.prod(shape):
        raise IdxError(f"{found}: {body.size} data bytes, expected {math.prod(shape)}: truncated or padded")
    return body.reshape(shape)


def load_mnist(data_dir: Path) -> dict:
    """The four arrays as uint8; labels checked to lie in 0..9."""
    out = {}
    for key, count in (("train", 60000), ("test", 10000)):
        out[f"{key}_images"] = read_idx(data_dir / FILES[f"{key}_images"], 0x803, count, (28, 28))
        labels = read_idx(data_dir / FILES[f"{key}_labels"], 0x801, count, ())
        if labels.max() > 9:
            raise IdxError(f"{FILES[key + '_labels']}: label {labels.max()} out of range 0..9")
        out[f"{key}_labels"] = labels
    return out
# --8<-- [end:loader]


def data_dir_from(arg: str | None) -> Path:
    return Path(arg or os.environ.get("MNIST_DIR") or "data/mnist")
