"""Texts the embedding tests (tests/py/test_embeddings.py) and their goldens
(scripts/make-embedding-goldens.py) share: plain English, punctuation and symbols, accents and
case (the BERT normalizer), a CJK sentence (single-character words), digits, an unknown-ish word
split into pieces, and a long paragraph (~200 tokens)."""

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello, World! The café costs $5.50 (tax included).",
    "ÉCOLE Über naïve façade — résumé",
    "机器学习是人工智能的一个分支。",
    "Call 555-0123 before 10:30pm on 2024-06-01.",
    "Pneumonoultramicroscopicsilicovolcanoconiosis is a word.",
    " ".join(["Embeddings map text to vectors so that similar meanings lie close together;"
              " search, clustering and retrieval-augmented generation rely on them."] * 6),
]
