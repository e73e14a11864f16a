"""Quality checks on generated text, the same for both engines: an output that is empty, loops
(repeated n-grams), or leaks chat control tokens is flagged, and flagged outputs are excluded from
the scenario summaries (they are still in the raw JSON with their flags).

Loop rule (documented in docs/benchmarks.md): with W the output's whitespace-separated words,
  - at least 24 words and fewer than half of its word 4-grams distinct, or
  - the last 240 characters are one block of 1..80 characters repeated at least 4 times
    (catches loops without spaces: "=====", "1111", "abcabcabc").
"""
CONTROL_TOKENS = ("<|im_end|>", "<|im_start|>", "<|endoftext|>", "<|eot_id|>",
                  "<|start_header_id|>", "<|end_header_id|>", "<end_of_turn>", "<start_of_turn>",
                  "<|end|>", "<|assistant|>", "<|user|>", "<|system|>")

MIN_WORDS = 24
NGRAM = 4
DISTINCT_MIN = 0.5
TAIL_CHARS = 240
MAX_PERIOD = 80
MIN_REPEATS = 4


def distinct_ngram_ratio(words, n=NGRAM):
    grams = [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
    if not grams:
        return 1.0
    return len(set(grams)) / len(grams)


def tail_period(text, tail=TAIL_CHARS, max_period=MAX_PERIOD, min_repeats=MIN_REPEATS):
    """Smallest period p (1..max_period) such that the last `tail` characters (or the whole text
    when shorter, but at least min_repeats * p characters) are p-periodic; None if none."""
    t = text[-tail:]
    for p in range(1, max_period + 1):
        if len(t) < min_repeats * p:
            break
        if all(t[i] == t[i - p] for i in range(p, len(t))):
            return p
    return None


def check(text):
    """List of flags for one output: [] when it passes. Flags: 'empty', 'loop', and
    'control-token:<tok>' per leaked token."""
    flags = []
    if text is None or not text.strip():
        return ["empty"]
    words = text.split()
    if len(words) >= MIN_WORDS and distinct_ngram_ratio(words) < DISTINCT_MIN:
        flags.append("loop")
    elif len(text) >= MIN_REPEATS and tail_period(text) is not None and len(text.strip()) >= 16:
        flags.append("loop")
    for tok in CONTROL_TOKENS:
        if tok in text:
            flags.append(f"control-token:{tok}")
    return flags
