"""TPOT of a streamed chat request with and without a JSON schema on a running `zinc serve`.

    python bench/grammar_tpot.py http://127.0.0.1:8080 [N_RUNS] [TEMPERATURE]

TPOT = (time of the last token - time of the first) / (tokens - 1), from the SSE chunks, median
over N_RUNS requests each way (seeded, max_tokens 128; at temperature 0 the matcher mostly
checks the argmax only, above 0 it computes the whole vocabulary's mask every token). The schema run uses a
schema with long free strings so most tokens are inside strings (the matcher's busiest state).
"""
import json
import statistics
import sys
import time
import urllib.request

SCHEMA = {"type": "object",
          "properties": {"story": {"type": "string", "minLength": 300, "maxLength": 400},
                         "title": {"type": "string", "maxLength": 60}, "year": {"type": "integer"}},
          "required": ["title", "year", "story"], "additionalProperties": False}


def run(url, extra, prompt, temperature):
    body = {"messages": [{"role": "user", "content": prompt}], "temperature": temperature,
            "seed": 1,
            "max_tokens": 128, "stream": True, **extra}
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
    url = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    temperature = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    prompt = "Write a short story about a lighthouse keeper, as JSON with title, year and story."
    fmt = {"response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": SCHEMA}}}
    out = {}
    for name, extra in (("free", {}), ("json_schema", fmt)):
        runs = [run(url, extra, prompt, temperature) for _ in range(n)]
        out[name] = {"tpot_ms": 1e3 * statistics.median(r[0] for r in runs),
                     "chunks": [r[1] for r in runs]}
    out["temperature"] = temperature
    out["ratio"] = out["json_schema"]["tpot_ms"] / out["free"]["tpot_ms"]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
