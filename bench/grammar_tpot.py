"""TPOT of a streamed chat request with and without a JSON schema on a running `zinc serve`.

    python bench/grammar_tpot.py URL [N_RUNS] [TEMPERATURE] [--top-k K] [--repetition-penalty P]

TPOT = (time of the last token - time of the first) / (tokens - 1), from the SSE chunks, median
over N_RUNS requests each way (seeded, max_tokens 128), the free and the schema request taken in
turn (the machine may be shared: alternating spreads its noise over both). The schema has long
length-bounded strings, so most tokens are inside a string, each character a new grammar
position. The first schema request of the run is reported apart (`first_ms`): it fills the
server's mask cache for the schema, which the later ones (same schema) find; a server that has
served the schema before starts warm. --top-k 0 turns top-k off (the sampler keeps every token
above min-p / top-p); --repetition-penalty adds that penalty (over the last 64 tokens).

    python bench/grammar_tpot.py URL [N_RUNS] [TEMPERATURE] --tools-baseline URL_B

instead times one request with `tools` (tool_choice auto) and a prose prompt (ignore_eos, 128
tokens) on URL and on URL_B in turn: URL a server whose auto replies carry the lazy call grammar
(awaiting its trigger while the model writes text), URL_B the same model on a build from before
it (73983fa). Same prompt, same seeds: the same text, so the ratio is the awaiting matcher's cost
per token.
"""
import argparse
import json
import statistics
import time
import urllib.request

SCHEMA = {"type": "object",
          "properties": {"story": {"type": "string", "minLength": 300, "maxLength": 400},
                         "title": {"type": "string", "maxLength": 60}, "year": {"type": "integer"}},
          "required": ["title", "year", "story"], "additionalProperties": False}


def run(url, extra, prompt, sampling, seed):
    body = {"messages": [{"role": "user", "content": prompt}], "seed": seed,
            "max_tokens": 128, "stream": True, **sampling, **extra}
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    times = []
    with urllib.request.urlopen(req) as r:
        for line in r:
            line = line.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            ch = json.loads(line[6:])
            if ch.get("choices") and ch["choices"][0]["delta"].get("content"):
                times.append(time.monotonic())
    return (times[-1] - times[0]) / (len(times) - 1) if len(times) > 1 else float("nan"), len(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("runs", nargs="?", type=int, default=5)
    ap.add_argument("temperature", nargs="?", type=float, default=0.0)
    ap.add_argument("--top-k", type=int, default=None)
    ap.add_argument("--repetition-penalty", type=float, default=None)
    ap.add_argument("--tools-baseline", metavar="URL_B",
                    help="time a tools (auto) request on URL against URL_B (see above)")
    a = ap.parse_args()
    sampling = {"temperature": a.temperature}
    if a.top_k is not None:
        sampling["top_k"] = a.top_k
    if a.repetition_penalty is not None:
        sampling["repetition_penalty"] = a.repetition_penalty
    if a.tools_baseline:
        return tools_ab(a, sampling)
    prompt = "Write a short story about a lighthouse keeper, as JSON with title, year and story."
    fmt = {"response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": SCHEMA}}}
    first = run(a.url, fmt, prompt, sampling, 0)
    runs = {"free": [], "json_schema": []}
    for i in range(a.runs):
        for name, extra in (("free", {}), ("json_schema", fmt)):
            runs[name].append(run(a.url, extra, prompt, sampling, 1 + i))
    out = {name: {"tpot_ms": 1e3 * statistics.median(r[0] for r in rs),
                  "chunks": [r[1] for r in rs]} for name, rs in runs.items()}
    out["json_schema"]["first_ms"] = 1e3 * first[0]
    out["sampling"] = sampling
    out["ratio"] = out["json_schema"]["tpot_ms"] / out["free"]["tpot_ms"]
    print(json.dumps(out))


TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "required": ["city", "unit"],
                   "properties": {"city": {"type": "string", "maxLength": 20},
                                  "unit": {"enum": ["c", "f"]}}}}}]


def tools_ab(a, sampling):
    prompt = "Write a short story about a lighthouse keeper."
    extra = {"tools": TOOLS, "ignore_eos": True}
    urls = {"lazy": a.url, "baseline": a.tools_baseline}
    runs = {"lazy": [], "baseline": []}
    for i in range(a.runs):  # alternating which goes first
        for name in (("lazy", "baseline") if i % 2 == 0 else ("baseline", "lazy")):
            runs[name].append(run(urls[name], extra, prompt, sampling, 1 + i))
    out = {name: {"tpot_ms": 1e3 * statistics.median(r[0] for r in rs),
                  "chunks": [r[1] for r in rs]} for name, rs in runs.items()}
    out["sampling"] = sampling
    out["ratio"] = out["lazy"]["tpot_ms"] / out["baseline"]["tpot_ms"]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
