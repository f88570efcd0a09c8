"""Our HDF5 graph format is readable with plain h5py (docs/hdf5-format.md).

Usage: test_h5_readable.py <adgnn binary>. Generates a graph with the binary, reads it with h5py
and numpy only, and checks the layout and its invariants.
"""
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np


def text(value) -> str:
    """A string attribute: fixed-length ones (what adgnn writes) come back as bytes."""
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def main() -> int:
    adgnn = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "g.h5")
        subprocess.run([adgnn, "data", "generate", "--preset", "demo", "--seed", "5",
                        "--nodes", "20000", "-o", path], check=True, capture_output=True)
        with h5py.File(path, "r") as f:
            assert text(f.attrs["format"]) == "adgnn-graph", f.attrs["format"]
            assert text(f.attrs["name"]) == "demo", f.attrs["name"]
            # The 1.10 file format: superblock 3, checksummed metadata; every dataset checksummed.
            assert f.id.get_create_plist().get_version()[0] >= 3
            assert text(f.attrs["checksums"]) == "every chunk"
            assert f["labels"].fletcher32 or f["labels"].compression == "gzip"
            assert int(f.attrs["format_version"]) == 1
            n = int(f.attrs["num_nodes"])
            assert n == 20000
            indptr = f["graph/indptr"][()]
            indices = f["graph/indices"][()]
            assert indptr.dtype == np.int64 and indices.dtype == np.int32
            assert indptr.shape == (n + 1,) and indptr[-1] == indices.shape[0]
            assert indices.min() >= 0 and indices.max() < n
            assert text(f["features"].attrs["layout"]) == "dense"
            x = f["features/values"][()]
            assert x.shape == (n, int(f["features"].attrs["cols"])) and x.dtype == np.float32
            assert np.isfinite(x).all()
            y = f["labels"][()]
            assert y.shape == (n,) and y.min() >= 0 and y.max() < int(f.attrs["num_classes"])
            tr, va, te = (f["splits/random/" + k][()] for k in ("train", "val", "test"))
            assert tr.shape == (1, n) and ((tr + va + te) == 1).all()
            # The generated graph is undirected and stored in both directions.
            rows = np.repeat(np.arange(n), np.diff(indptr))
            fwd = set(zip(rows.tolist(), indices.tolist()))
            assert all((v, u) in fwd for u, v in list(fwd)[:5000])
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
