"""A small asyncio OpenAI-API client for benchmarks (aiohttp): one streamed request, timed on the
client's monotonic clock. Works with any server that speaks OpenAI's SSE format (zinc serve,
llama.cpp's llama-server).

A RequestResult records: send time, the arrival time of every content chunk, the text, the usage
the server reported in its final chunk (stream_options.include_usage), and any server-side timing
object (llama-server's `timings`, zinc's if it sends one). From those come TTFT, TPOT, ITL and the
end-to-end time (see stats.py).
"""
import asyncio
import json
import time

import aiohttp


class RequestResult(dict):
    """A plain dict (JSON-ready) with the fields documented in `stream_request`."""


def _content_of(chunk, chat):
    choices = chunk.get("choices") or []
    if not choices:
        return None, None
    c = choices[0]
    if chat:
        text = (c.get("delta") or {}).get("content")
    else:
        text = c.get("text")
    return text, c.get("finish_reason")


async def stream_request(session, base_url, body, chat=True, timeout_s=600.0, t_origin=None):
    """POST body (stream forced on, usage requested) to /v1/chat/completions (chat) or
    /v1/completions. Returns a RequestResult with:
      ok, status, error, t_send (s since t_origin), ttft_s, e2e_s, chunk_times_s (each content
      chunk's arrival, relative to the send), itl_s (gaps), text, finish_reason, usage,
      prompt_tokens, completion_tokens (usage's, else the number of content chunks),
      completion_tokens_source ('usage' or 'chunks'), server_timings.
    Never raises for HTTP or stream errors: they come back as ok=False with `error`."""
    body = dict(body)
    body["stream"] = True
    body.setdefault("stream_options", {"include_usage": True})
    url = base_url.rstrip("/") + ("/v1/chat/completions" if chat else "/v1/completions")
    t_origin = time.monotonic() if t_origin is None else t_origin
    r = RequestResult(ok=False, status=None, error=None, t_send=None, ttft_s=None, e2e_s=None,
                      chunk_times_s=[], itl_s=[], text="", finish_reason=None, usage=None,
                      prompt_tokens=None, completion_tokens=None, completion_tokens_source=None,
                      server_timings=None)
    parts = []
    t0 = time.monotonic()
    r["t_send"] = t0 - t_origin
    try:
        async with session.post(url, json=body,
                                timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            r["status"] = resp.status
            if resp.status != 200:
                r["error"] = (await resp.text())[:500]
                return r
            buf = b""
            done = False
            async for data in resp.content.iter_any():
                now = time.monotonic()
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    line = line.strip()
                    if not line.startswith(b"data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == b"[DONE]":
                        done = True
                        continue
                    chunk = json.loads(payload)
                    if "error" in chunk:
                        r["error"] = json.dumps(chunk["error"])[:500]
                        continue
                    text, fin = _content_of(chunk, chat)
                    if text:
                        r["chunk_times_s"].append(now - t0)
                        parts.append(text)
                    if fin:
                        r["finish_reason"] = fin
                    if chunk.get("usage"):
                        r["usage"] = chunk["usage"]
                    if chunk.get("timings"):
                        r["server_timings"] = chunk["timings"]
            r["e2e_s"] = time.monotonic() - t0
            if not done and r["error"] is None:
                r["error"] = "stream ended without data: [DONE]"
    except (aiohttp.ClientError, asyncio.TimeoutError, json.JSONDecodeError) as e:
        r["error"] = f"{type(e).__name__}: {e}"
        return r
    r["text"] = "".join(parts)
    ct = r["chunk_times_s"]
    r["ttft_s"] = ct[0] if ct else None
    r["itl_s"] = [b - a for a, b in zip(ct, ct[1:])]
    u = r["usage"] or {}
    r["prompt_tokens"] = u.get("prompt_tokens")
    if u.get("completion_tokens") is not None:
        r["completion_tokens"] = u["completion_tokens"]
        r["completion_tokens_source"] = "usage"
    else:
        r["completion_tokens"] = len(ct)
        r["completion_tokens_source"] = "chunks"
    r["ok"] = r["error"] is None
    return r


async def get_json(session, base_url, path, timeout_s=10.0):
    """GET base_url+path as JSON; (status, body or None)."""
    try:
        async with session.get(base_url.rstrip("/") + path,
                               timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            try:
                return resp.status, await resp.json(content_type=None)
            except (json.JSONDecodeError, aiohttp.ContentTypeError):
                return resp.status, None
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
        return None, None


def new_session(limit):
    """A ClientSession with up to `limit` concurrent connections and no read timeout of its own.
    One connection per request (force_close): a kept-alive connection that the server has closed
    in the meantime fails the next request's write (seen with llama-server), and a loopback
    connect costs well under a millisecond, the same for both engines."""
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=limit, force_close=True),
                                 timeout=aiohttp.ClientTimeout(total=None))
