"""The inputs both peers read: what d9m saved with --save-outputs for unsorted_segment_sum, as
NumPy arrays with TensorFlow's semantics applied (negative segment ids dropped)."""
import json

import numpy as np


def load(folder):
    """folder = <save-outputs>/unsorted_segment_sum/<config>; returns (data, ids, num_segments)."""
    config = json.load(open(folder + "/config.json"))
    data = np.load(folder + "/inputs/data.npy")
    ids = np.load(folder + "/inputs/segment_ids.npy")
    keep = ids >= 0  # TensorFlow drops negative ids
    return data[keep], ids[keep], config["params"]["num_segments"]
