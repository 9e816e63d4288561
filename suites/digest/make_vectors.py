#!/usr/bin/env python3
"""Generates d9m's test vectors independently of the C++ code: d9m-digest-v1 with the Python
`xxhash` package (PyPI), and CounterRng with a plain Python SplitMix64. Run it and commit the
output (vectors.json); the unit tests compare the C++ implementations with it.

    pip install xxhash && python3 suites/digest/make_vectors.py > suites/digest/vectors.json
"""
import hashlib
import json
import struct

import xxhash

LEAF = 4096
MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def pattern(n):
    """The test buffer: byte i = (i * 31 + (i >> 8) * 7 + 11) mod 256."""
    return bytes(((i * 31 + (i >> 8) * 7 + 11) & 0xFF) for i in range(n))


def digest_v1(buf):
    leaves = b"".join(struct.pack("<Q", xxhash.xxh3_64_intdigest(buf[i:i + LEAF]))
                      for i in range(0, len(buf), LEAF))
    return xxhash.xxh3_128_hexdigest(leaves)


def mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def rng_bits(seed, stream, i):
    key = mix((seed + GOLDEN * (stream + 1)) & MASK)
    return mix((key + GOLDEN * (i + 1)) & MASK)


def zipf_thresholds(n):
    cumulative, total = [], 0.0
    for k in range(n):
        total += 1.0 / (k + 1)
        cumulative.append(total)
    return [int(c / total * 2.0**63) for c in cumulative]


def zipf_ids(seed, stream, n, count):
    """kernels/common/fill.h zipf_integers: cumulative 1/(k+1) in double, thresholds
    floor(c_k / c_{n-1} * 2^63), draw i the least k with (bits(i) >> 1) < t_k."""
    cumulative, total = [], 0.0
    for k in range(n):
        total += 1.0 / (k + 1)
        cumulative.append(total)
    thresholds = [int(c / total * 2.0**63) for c in cumulative]
    ids = []
    for i in range(count):
        u = rng_bits(seed, stream, i) >> 1
        ids.append(next(k for k, t in enumerate(thresholds) if u < t))
    return ids


lengths = [0, 1, 3, 4095, 4096, 4097, 8192, 65553, 3 * (1 << 20) + 5, 8 * (1 << 20)]
out = {
    "schema": "d9m.test-vectors/1",
    "pattern": "byte i = (i * 31 + (i >> 8) * 7 + 11) mod 256",
    "digest_v1": [{"length": n, "digest": digest_v1(pattern(n))} for n in lengths],
    "counter_rng": [{"seed": s, "stream": st, "index": i, "bits": "%016x" % rng_bits(s, st, i)}
                    for s, st, i in [(0, 0, 0), (1, 0, 0), (1, 0, 1), (1, 2, 1000), (2**63 + 5, 7, 123456789)]],
    # The thresholds themselves, bit for bit: the draws alone would pass thresholds computed otherwise.
    "zipf_thresholds": [{"n": n, "sha256_le_u64": hashlib.sha256(struct.pack("<%dQ" % n, *t)).hexdigest(),
                         "some": {str(k): str(t[k]) for k in (0, 1, n // 2, n - 2, n - 1) if 0 <= k < n}}
                        for n, t in ((n, zipf_thresholds(n)) for n in (2, 10, 30522, 1000003))],
    "zipf_ids": [{"seed": s, "stream": st, "n": n, "ids": zipf_ids(s, st, n, 64)}
                 for s, st, n in [(1, 1, 1), (1, 1, 2), (7, 0, 10), (3, 2, 30522)]],
}
print(json.dumps(out, indent=1))
