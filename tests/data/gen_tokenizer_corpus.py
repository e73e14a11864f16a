#!/usr/bin/env python3
"""Writes tests/data/tokenizer_corpus.jsonl: the strings the tokenizer parity test feeds to both
zinc and llama.cpp. One JSON object a line: {"text": str} for valid UTF-8, {"hex": str} for raw
bytes that are not. Deterministic (fixed seed); rerun only to extend the corpus.

Excluded on purpose: 4-byte sequences that decode above U+10FFFF (e.g. F4 90 80 80, F7 BF BF BF):
llama.cpp's BPE path throws std::invalid_argument on them and aborts the process, so there is no
oracle answer (zinc turns their lead byte into U+FFFD; see docs/tokenizers.md).
"""
import json
import random
import sys
from pathlib import Path

rng = random.Random(20261129)
T = []  # str or bytes


def add(*xs):
    T.extend(xs)


# English prose, contractions, casing
add("Hello world", "Hello, world!", " Hello world", "  leading spaces", "trailing spaces   ",
    "The quick brown fox jumps over the lazy dog.",
    "It's, I'm, you're, we've, they'll, he'd, don't, can't, won't.",
    "IT'S LOUD. I'M HERE. YOU'RE LATE. WE'VE GONE. THEY'LL SEE. HE'D KNOW.",
    "'s 't 're 've 'm 'll 'd", "rock 'n' roll", "O'Neill's dog's bone", "'''triple quotes'''",
    "Mr. Smith went to Washington D.C. on Jan. 5th, 2024.",
    "A sentence.\nAnother sentence.\n\nA new paragraph.",
    "Supercalifragilisticexpialidocious antidisestablishmentarianism",
    "e-mail: john.doe+test@example.com, url: https://example.org/path?q=1&r=2#frag",
    "Question? Answer! Ellipsis... Dash — en–dash. Quote “curly” ‘single’.",
    "ALL CAPS SENTENCE WITH NUMBERS 123 AND SYMBOLS #$%",
    "camelCaseIdentifier snake_case_identifier kebab-case-identifier PascalCase",
    "a", "I", " ", "  ", "\n", "\t", "", "0", "00", "000", "0000",
    "Hello\u00a0world", "non\u2011breaking\u2009thin\u202fspaces", "zero\u200bwidth\u200cjoin\u200d",
    "The year 1999 and the number 3.14159 and -42 and 1e10 and 0x1F.",
    "Numbers: 1 12 123 1234 12345 123456 1234567 12345678 123456789 1234567890",
    "31415926535897932384626433832795028841971693993751058209749445923078164062862",
    "1,000,000 and 1.000.000 and 1 000 000 and 1_000_000", "$100.00 €50 £20 ¥1000 ₹500",
    "Phone: +1 (555) 123-4567", "IPv4 192.168.0.1 and IPv6 fe80::1ff:fe23:4567:890a",
    "Dates 2024-01-31T12:34:56Z and 12/31/1999", "50% off! 3x faster; 2nd place; 1st; 100th",
    "½ ⅓ ¼ ² ³ ¹ ⁴ Ⅻ ⅻ ① ② ③", "Arabic-Indic digits ٠١٢٣٤٥٦٧٨٩ and Devanagari ०१२३४५६७८९",
    "full-width ０１２３ ＡＢＣ ａｂｃ", "Roman numerals MMXXIV",
    )

# Code in several languages
add("def add(a, b):\n    return a + b\n",
    "class Foo:\n\tdef __init__(self):\n\t\tself.x = 1\n",
    "for (int i = 0; i < n; ++i) {\n    sum += a[i] * b[i];\n}\n",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }\n",
    "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!(\"{:?}\", v);\n}\n",
    "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n",
    "const f = async (x) => { await g(x?.y ?? 0); return `t ${x}`; };",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;",
    "<html><body><div class=\"a\">Hi &amp; bye</div></body></html>",
    "{\"key\": [1, 2.5, true, null, {\"nested\": \"value\"}]}",
    "x <<= 2; y >>= 3; z **= 4; w //= 5; a != b; c == d; e <= f; g >= h; i && j || !k",
    "std::vector<std::unique_ptr<Foo>> v; auto [a, b] = f(); template <class T>",
    "#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do echo \"$f\"; done\n",
    "    indented by four\n        by eight\n\t\ttabbed twice\n",
    "if x:\n    pass\nelif y:\n    ...\nelse:\n    raise ValueError('bad')\n",
    "matrix = [[1, 2, 3],\n          [4, 5, 6]]\n", "# comment\n// comment\n/* block */\n-- sql comment\n",
    "a=b+c-d*e/f%g^h&i|j~k", "@decorator\ndef f(*args, **kwargs): ...", "λx.x + 1 ≤ ∀y∈ℕ: y ≥ 0",
    "print(\"Hello, \\\"escaped\\\" world\\n\")", "regex = r'^\\s*(\\d+)\\s*$'",
    "`backticks` and ```code fences```", "~/path/to/file.txt C:\\Windows\\System32",
    )

# Whitespace runs
add("a  b   c    d     e", "a\tb\t\tc\t\t\td", "a\nb\n\nc\n\n\nd", "a\r\nb\r\n\r\nc",
    " \n \n ", "\n\n\n\n\n\n\n\n", "\t\t\t\t", "   \t\n\r  \t x", "x" + " " * 50 + "y",
    " " * 17, "\n" * 33, "\t" * 40, "word \n word\t\n\tword", "end with newline\n",
    "end with spaces and newline  \n", "\r\r\r", "\u3000ideographic\u3000space",
    "\x0b vertical tab \x0c form feed", "line\u2028separator\u2029paragraph", "\u0085next line",
    "mixed \t \n \r\n \u00a0 \u2003 done", "  \n  x", "x  \n  ", "a \n\n b",
    )

# CJK, other scripts, combining marks
add("日本語のテキストです。", "中文文本测试，标点符号！", "한국어 텍스트입니다.", "漢字かなカナ混じり文",
    "我爱北京天安门", "東京都渋谷区 1-2-3", "ひらがな カタカナ ｶﾀｶﾅ",
    "العربية نص تجريبي", "مرحبا بالعالم ١٢٣", "עברית טקסט לבדיקה", "שלום עולם",
    "हिन्दी पाठ परीक्षण", "नमस्ते दुनिया", "ภาษาไทย ทดสอบ", "สวัสดีชาวโลก",
    "Русский текст для проверки", "Ελληνικά κείμενο", "Ünïcödé äöü ß ÄÖÜ", "naïve café résumé",
    "e\u0301 a\u0300 o\u0308 n\u0303", "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334a\u0341lgo",
    "\u1100\u1161\u11a8 (conjoining jamo)", "ﬁ ﬂ ligatures", "Tiếng Việt có dấu",
    "ქართული ენა", "Հայերեն", "አማርኛ", "ᏣᎳᎩ", "𐌰𐌱𐌲 gothic", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕞𝕒𝕥𝕙",
    "mixed 日本 and English and 한국 and العربية", "দুই বাংলা", "தமிழ்", "తెలుగు", "ಕನ್ನಡ", "മലയാളം",
    "\U0002EBF0\U0002EBF1 Ext-I", "\u2ffc\u2ffd\u31ef new in 15.1", "\u0cf3 Kannada 15.0",
    )

# Emoji
add("😀😃😄😁", "I ❤️ NY", "👍🏽 👋🏿", "👨‍👩‍👧‍👦 family", "🏳️‍🌈 flag", "🇺🇸🇬🇧🇯🇵 flags",
    "🧑‍💻 coding", "❤️‍🔥", "☺︎ text vs ☺️ emoji", "1️⃣ 2️⃣ #️⃣", "🤷‍♀️🤦‍♂️", "emoji at end 🎉",
    "🎉🎉🎉🎉🎉🎉🎉🎉", "🏴󠁧󠁢󠁳󠁣󠁴󠁿 Scotland", "a😀b😀c", "(╯°□°)╯︵ ┻━┻", "¯\\_(ツ)_/¯",
    )

# Literal special-token text
add("<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_start|>system\nYou are helpful.<|im_end|>\n",
    "<|im_start|>user\nHi there!<|im_end|>\n<|im_start|>assistant\n",
    "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n", "<start_of_turn>", "<end_of_turn>",
    "<bos><eos><pad><unk><mask>", "<bos>text", "text<eos>", "<s></s>", "</s>", "<unused0> <unused123>",
    "<|im_start|><|im_start|>", "<|im_end|>\n\n<|im_start|>", "x<|endoftext|>y", "<|im_start", "im_start|>",
    "<|im_start|>user<|im_end|><|endoftext|>", "<fim_prefix>def f():<fim_suffix>\n<fim_middle>",
    "<repo_name>zinc<file_sep>main.cpp<reponame>", "<start_of_image><end_of_image>", "[multimodal]",
    "<|im_start|>  spaced  <|im_end|>", "\n<start_of_turn>\n", "<<|im_start|>>", "<|<|im_end|>|>",
    "<start_of_turn><end_of_turn><start_of_turn>",
    )

# Mixed
add("Résumé: 5 years @ Google (2019–2024) — built ML pipelines 🚀\n",
    "Price: ¥1,234.56 (税込) — 送料無料!", "The formula E=mc² (Einstein, 1905) ≈ 9×10¹⁶ J/kg",
    "user@例え.jp → https://例え.jp/パス?q=値", "混合 text with 数字 123 and emoji 😀 and tabs\tok",
    "<|im_start|>user\n日本語で答えて 😀<|im_end|>", "Lorem ipsum dolor sit amet, consectetur adipiscing elit.",
    )

# Invalid UTF-8 (never above U+10FFFF, see the module doc)
add(b"\xff", b"\xfe\xff", b"\x80", b"\x80\x80\x80", b"abc\xffdef", b"\xc3", b"\xc3(", b"\xe2\x82",
    b"\xe2\x82(", b"\xf0\x9f\x98", b"\xf0\x9f\x98x", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80",
    b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf8\x88\x80\x80\x80", b"\xfc\x84\x80\x80\x80\x80",
    b"Hello \xff world", b"\xc3\xa9\xc3", b"mixed \xe6\x97\xa5\xe6\x9c valid", b"\x00nul\x00byte",
    b"\xef\xbb\xbfBOM at start", b"tail \xf0\x90\x80", b"<|im_start|>\xff<|im_end|>", b"\xa0\xa1\xa2",
    b"\xf0\x80\x80\x80", b"\xf4\x8f\xbf\xbf max", b"  \x80  \x81  ", b"\x7f DEL \x1b ESC \x01",
    )

# Random valid strings from a mixed alphabet, and random bytes (kept off the >U+10FFFF forms)
alphabet = list("abcXYZ019 \t\n.,;'\"!?-_()[]{}<>|$+=^~`@#%&*/\\") + list("éüñßøあア漢한ع€—…😀🎉") + [
    "\u0301", "\u00a0", "\u3000", "\u2028", "٣", "五", "\u200d", "'s", "'LL", "<|im_end|>", "<end_of_turn>"]
for _ in range(45):
    n = rng.randint(1, 40)
    add("".join(rng.choice(alphabet) for _ in range(n)))
for _ in range(15):
    n = rng.randint(1, 24)
    b = bytearray(rng.randint(0, 255) for _ in range(n))
    for i in range(len(b)):  # F5..F7 leads and F4 9x.. could decode above U+10FFFF: avoid them
        if b[i] >= 0xF4:
            b[i] = rng.choice([0x41, 0x80, 0xC3, 0xE2])
    add(bytes(b))

out = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).with_name("tokenizer_corpus.jsonl"))
seen = set()
with open(out, "w", encoding="utf-8") as f:
    for t in T:
        raw = t if isinstance(t, bytes) else t.encode("utf-8")
        if raw in seen:
            continue
        seen.add(raw)
        try:
            obj = {"text": raw.decode("utf-8")}
        except UnicodeDecodeError:
            obj = {"hex": raw.hex()}
        f.write(json.dumps(obj, ensure_ascii=False) + "\n")
print(f"{len(seen)} strings -> {out}")
