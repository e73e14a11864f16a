"""Quality checks on generated text, the same for both engines: an output that is empty, loops
(repeated n-grams), or leaks chat control tokens is flagged, and flagged outputs are excluded from
the scenario summaries (they are still in the raw JSON with their flags).

Loop rule (documented in docs/benchmarks.md): with W the output's whitespace-separated words,
  - at least 24 words and fewer than half of its word 4-grams distinct, or
  - at least 64 characters with fewer than half of its character 16-grams distinct (catches
    loops of short tokens, "12:14:14.14.14" lines, that make few words), or
  - the text ends in a run of one block of 1..80 characters repeated at least 4 times, the run
    at least 16 characters long and covering at least min(240 characters, half the text)
    (catches loops without spaces: "=====", "1212", "abcabcabc").
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


MIN_RUN = 16
CHAR_N = 16
CHAR_MIN_LEN = 64


def distinct_char_ratio(text, n=CHAR_N):
    grams = [text[i:i + n] for i in range(len(text) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 1.0


def periodic_suffix(text, p):
    """Length of the longest suffix of text that is p-periodic (text[i] == text[i - p])."""
    n = len(text)
    i = n - 1
    while i - p >= 0 and text[i] == text[i - p]:
        i -= 1
    return min(n, n - 1 - i + p)


def tail_period(text, tail=TAIL_CHARS, max_period=MAX_PERIOD, min_repeats=MIN_REPEATS):
    """Smallest period p (1..max_period) of a looping ending: the longest p-periodic suffix holds
    at least min_repeats blocks, MIN_RUN characters, and min(tail, half the text); None if
    none."""
    need = min(tail, len(text) / 2)
    for p in range(1, max_period + 1):
        run = periodic_suffix(text, p)
        if run >= max(min_repeats * p, MIN_RUN, need):
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
    elif len(text) >= CHAR_MIN_LEN and distinct_char_ratio(text) < DISTINCT_MIN:
        flags.append("loop")
    elif tail_period(text) is not None:
        flags.append("loop")
    for tok in CONTROL_TOKENS:
        if tok in text:
            flags.append(f"control-token:{tok}")
    return flags
