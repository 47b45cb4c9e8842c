"""A file relay: an OpenAI-compatible chat server on 127.0.0.1 whose answers come from a player through files.

    python scripts/llm_relay.py --dir /work/relay/internvl -- msmigrate run spec.yaml

A dev tool for measuring the LLM policy with a capable model that has no HTTP endpoint of its own (an agent that
can read and write files). The relay starts the server, runs the command after ``--`` with
``MSMIGRATE_LLM_BASE_URL`` pointing at it, and then, for request n (1-based, 4 digits), in the relay dir D:

- writes ``D/req-NNNN.json`` (the full request body) and ``D/req-NNNN.md`` (a readable rendering: every message with
  role, content and tool calls; the tool schemas in full on the first request and whenever they change, names only
  otherwise), then waits for ``D/resp-NNNN.json``;
- the player writes ``{"content": "<text or null>", "tool_calls": [{"name": "<tool>", "arguments": {...}}]}``
  (atomically: ``.tmp`` then ``mv``); a malformed answer is moved aside to ``resp-NNNN.rejected-K.json``, the reason
  goes to ``D/err-NNNN.txt``, and the relay waits for a new ``resp-NNNN.json``;
- the relay adds ids, wraps the answer as a ``chat.completion`` with usage (characters / 4: the relay has no
  tokenizer) and replies.

``D/READY`` appears once the server is up and the command has started (its text says what runs); ``D/DONE`` when
the command ends (exit status, request count, prompt characters and tokens). The player sees only D. The protocol
is /work/RELAY_PROTOCOL.md's; the test is tests/test_llm_relay.py.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

CHARS_PER_TOKEN = 4  # no tokenizer here: the usage the relay reports is an estimate, and says so in DONE


def tokens_of(chars: int) -> int:
    return max(1, chars // CHARS_PER_TOKEN)


def tool_names(body: dict[str, Any]) -> list[str]:
    return [t.get("function", {}).get("name", "") for t in body.get("tools") or []]


def render_content(content: Any) -> str:
    if content is None:
        return "(none)"
    if isinstance(content, list):  # OpenAI content parts
        return "\n".join(str(p.get("text", p)) if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def render_request(n: int, body: dict[str, Any], previous_tools: list[Any] | None) -> str:
    """The readable copy of request ``n``; tool schemas in full only when they differ from the previous request's."""
    tools = body.get("tools") or []
    lines = [f"# Request {n:04d}", "",
             f"Answer in resp-{n:04d}.json: "
             '{"content": "<text or null>", "tool_calls": [{"name": "<tool>", "arguments": {...}}]}', ""]
    if not tools:
        lines += ["Tools: none offered (answer with content only).", ""]
    elif tools != previous_tools:
        lines += ["## Tools (full schemas; later requests list names only until they change)", ""]
        for t in tools:
            fn = t.get("function", {})
            lines += [f"### {fn.get('name')}", "", fn.get("description") or "", "",
                      "```json", json.dumps(fn.get("parameters") or {}, indent=1), "```", ""]
    else:
        lines += ["Tools (unchanged since the previous request): " + ", ".join(tool_names(body)), ""]
    for i, msg in enumerate(body.get("messages") or [], 1):
        role = msg.get("role", "?")
        head = f"## [{i}] {role}"
        if role == "tool":
            head += f" (answer to {msg.get('tool_call_id')})"
        lines += [head, "", render_content(msg.get("content")), ""]
        for call in msg.get("tool_calls") or []:
            fn = call.get("function", {})
            lines += [f"-> tool call {call.get('id')}: {fn.get('name')}", "```json", str(fn.get("arguments")),
                      "```", ""]
    return "\n".join(lines)


def answer_error(answer: Any, offered: list[str]) -> str | None:
    """Why a player's answer cannot be sent back as a completion, or None."""
    if not isinstance(answer, dict):
        return "the answer must be a JSON object {\"content\": ..., \"tool_calls\": [...]}"
    unknown = set(answer) - {"content", "tool_calls"}
    if unknown:
        return f"unknown keys {sorted(unknown)}: only content and tool_calls"
    if answer.get("content") is not None and not isinstance(answer["content"], str):
        return "content must be a string or null"
    calls = answer.get("tool_calls") or []
    if not isinstance(calls, list):
        return "tool_calls must be a list"
    for k, call in enumerate(calls):
        if not isinstance(call, dict) or set(call) - {"name", "arguments"}:
            return f"tool_calls[{k}] must be an object with name and arguments only"
        if call.get("name") not in offered:
            return f"tool_calls[{k}]: {call.get('name')!r} is not an offered tool; offered: {offered}"
        if not isinstance(call.get("arguments", {}), dict):
            return f"tool_calls[{k}].arguments must be a JSON object (not a string)"
    if not calls and not answer.get("content"):
        return "an answer needs content or at least one tool call"
    return None


class Relay:
    def __init__(self, folder: Path, poll_s: float = 0.5):
        self.dir = folder
        self.poll_s = poll_s
        self.count = 0
        self.prompt_chars = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self._previous_tools: list[Any] | None = None
        self._lock = threading.Lock()  # one request at a time: the player answers in order
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def wait_answer(self, n: int, offered: list[str]) -> dict[str, Any]:
        path, rejected = self.dir / f"resp-{n:04d}.json", 0
        while True:
            if path.is_file():
                try:
                    answer: Any = json.loads(path.read_text(encoding="utf-8"))
                    problem = answer_error(answer, offered)
                except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                    problem = f"not valid JSON: {exc}"
                if problem is None:
                    return answer
                rejected += 1
                path.rename(self.dir / f"resp-{n:04d}.rejected-{rejected}.json")
                (self.dir / f"err-{n:04d}.txt").write_text(
                    f"resp-{n:04d}.json rejected (moved to resp-{n:04d}.rejected-{rejected}.json): {problem}\n"
                    f"Write a corrected resp-{n:04d}.json.\n", encoding="utf-8")
            time.sleep(self.poll_s)

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.count += 1
            n = self.count
            (self.dir / f"req-{n:04d}.json").write_text(json.dumps(body, indent=1), encoding="utf-8")
            tmp = self.dir / f"req-{n:04d}.md.tmp"
            tmp.write_text(render_request(n, body, self._previous_tools), encoding="utf-8")
            tmp.rename(self.dir / f"req-{n:04d}.md")
            self._previous_tools = body.get("tools") or []
            answer = self.wait_answer(n, tool_names(body))
            calls = [{"id": f"call_{n:04d}_{k}", "type": "function",
                      "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments") or {})}}
                     for k, c in enumerate(answer.get("tool_calls") or [])]
            message: dict[str, Any] = {"role": "assistant", "content": answer.get("content")}
            if calls:
                message["tool_calls"] = calls
            chars = len(json.dumps(body.get("messages") or [])) + len(json.dumps(body.get("tools") or []))
            prompt, completion = tokens_of(chars), tokens_of(len(json.dumps(message)))
            self.prompt_chars += chars
            self.prompt_tokens += prompt
            self.completion_tokens += completion
            return {"id": f"chatcmpl-relay-{n}", "object": "chat.completion", "created": int(time.time()),
                    "model": body.get("model", "relay"),
                    "choices": [{"index": 0, "message": message, "logprobs": None,
                                 "finish_reason": "tool_calls" if calls else "stop"}],
                    "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                              "total_tokens": prompt + completion}}

    def _handler(self):
        relay = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    status, payload = 404, {"error": {"message": f"no route {self.path}"}}
                else:
                    try:
                        body = json.loads(raw or b"{}")
                    except json.JSONDecodeError as exc:
                        status, payload = 400, {"error": {"message": f"body is not JSON: {exc}"}}
                    else:
                        status, payload = 200, relay.complete(body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", type=Path, required=True, help="the relay dir the player reads and writes")
    ap.add_argument("--label", default="", help="what READY says is being run (default: the command)")
    ap.add_argument("--poll", type=float, default=0.5, help="seconds between looks for an answer file")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run against the relay")
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("give the command to run after --")
    args.dir.mkdir(parents=True, exist_ok=True)
    if any(args.dir.iterdir()):
        ap.error(f"{args.dir} is not empty: use a fresh relay dir per run")
    relay = Relay(args.dir, args.poll)
    relay.start()
    env = {**os.environ, "MSMIGRATE_LLM_BASE_URL": relay.base_url}
    started = time.time()
    proc = subprocess.Popen(command, env=env)
    (args.dir / "READY").write_text(
        f"{args.label or ' '.join(command)}\nrelay: {relay.base_url} (pid {proc.pid}); started "
        f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(started))}\n", encoding="utf-8")
    code = proc.wait()
    relay.stop()
    done = {"exit_status": code, "requests": relay.count, "prompt_chars": relay.prompt_chars,
            "prompt_tokens": relay.prompt_tokens, "completion_tokens": relay.completion_tokens,
            "tokens_counted_as": f"characters / {CHARS_PER_TOKEN}", "wall_s": round(time.time() - started, 1)}
    (args.dir / "DONE").write_text(json.dumps(done, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(done), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
