"""A small OpenAI-compatible chat-completions server on 127.0.0.1 that replays scripted assistant turns.

- ``script``: phase -> list of turns (a key ``"<phase>@<attempt>"`` overrides the phase's list for that attempt, so
  re-entering a phase after a gate failure can get its own turns; ``"<phase>@<attempt>#<visit>"`` the visit-th
  fresh conversation of that attempt, for a phase re-entered with its attempt unchanged, e.g. config after a G4
  failure that was classified to data). A turn is ``{"content": str, "tool_calls":
  [{"name": ..., "arguments": {...}}]}``; a turn without tool calls means "phase done". The phase and attempt are read
  from the node prompt (``# Phase: <phase> — migrating `x` (attempt N of M)``, prompts/templates/_macros.j2); the
  turn index is the number of assistant turns with tool calls already in the conversation, so the server is a pure
  function of the request except for the two fault injections below. Past the end of a list: "phase done".
- ``fail_first``: the first N requests get HTTP 503 (transport retry).
- ``garbage_first``: the next N requests get HTTP 200 with a body that is not JSON (a proxy's HTML page),
  labelled alternately as HTML and as JSON.
- a turn with ``"malformed": True`` is first sent once with its first call's arguments cut to invalid JSON.
- requests without tools (the classify fallback) get ``classify_reply`` (a list: one per such request, in order,
  the last one repeated).
- like OpenAI, a conversation where an assistant turn's tool calls are not answered by tool messages is a 400.
Every request body is kept in ``requests``; responses carry ``usage`` token counts (4 characters per token).
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PHASE_RE = re.compile(r"# Phase: (\w+)\b.*?\(attempt (\d+) of \d+\)")


def tokens_of(text: str) -> int:
    return max(1, len(text) // 4)


def sequence_error(messages: list[dict[str, Any]]) -> str | None:
    """OpenAI's rule: every tool call of an assistant turn is answered by the tool messages right after it."""
    for i, msg in enumerate(messages):
        calls = (msg.get("tool_calls") or []) if msg.get("role") == "assistant" else []
        if not calls:
            continue
        answered = set()
        for nxt in messages[i + 1:]:
            if nxt.get("role") != "tool":
                break
            answered.add(nxt.get("tool_call_id"))
        missing = [c["id"] for c in calls if c["id"] not in answered]
        if missing:
            return (f"An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                    f"'tool_call_id'. The following tool_call_ids did not have response messages: {missing}")
    for msg in messages:
        if msg.get("role") == "tool" and not msg.get("tool_call_id"):
            return "tool message without tool_call_id"
    return None


class ScriptedChatServer:
    def __init__(self, script: dict[str, list[dict[str, Any]]], *, fail_first: int = 0, garbage_first: int = 0,
                 classify_reply: str | list[str] = "config", model: str = "scripted"):
        self.script = script
        self.fail_remaining = fail_first
        self.garbage_remaining = garbage_first
        self.classify_reply = classify_reply
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.statuses: list[int] = []
        self.malformed_sent: list[tuple[str, int, int]] = []
        self.classify_requests = 0
        self.visits: dict[str, int] = {}  # "<phase>@<attempt>" -> how often a fresh conversation of it began
        self._calls = 0
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> "ScriptedChatServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    # -- the scripted model ---------------------------------------------------------------------------------------
    def _turn(self, messages: list[dict[str, Any]]) -> tuple[str, int, int, dict[str, Any]]:
        prompt = next((str(m.get("content")) for m in messages if m.get("role") == "user"), "")
        found = PHASE_RE.search(prompt)
        phase, attempt = (found.group(1), int(found.group(2))) if found else ("?", 1)
        key = f"{phase}@{attempt}"
        if not any(m.get("role") in ("assistant", "tool") for m in messages):
            self.visits[key] = self.visits.get(key, 0) + 1  # a fresh conversation: the phase is (re-)entered
        visit = self.visits.get(key, 1)
        turns = self.script.get(f"{key}#{visit}") if visit > 1 else None
        turns = turns if turns is not None else self.script.get(key, self.script.get(phase, []))
        index = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
        turn = turns[index] if index < len(turns) else {"content": f"{phase}: nothing left to do."}
        return phase, attempt, index, turn

    def _completion(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        if not body.get("tools"):
            replies = [self.classify_reply] if isinstance(self.classify_reply, str) else self.classify_reply
            content, tool_calls = replies[min(self.classify_requests, len(replies) - 1)], []
            self.classify_requests += 1
        else:
            phase, attempt, index, turn = self._turn(messages)
            content = turn.get("content", "")
            calls = turn.get("tool_calls") or []
            broken = turn.get("malformed") and (phase, attempt, index) not in self.malformed_sent and calls
            if broken:
                self.malformed_sent.append((phase, attempt, index))
            tool_calls = []
            for n, c in enumerate(calls):
                self._calls += 1
                args = json.dumps(c["arguments"])
                if broken and n == 0:
                    args = args[: max(1, len(args) // 2)]  # cut mid-way: not valid JSON
                tool_calls.append({"id": f"call_{self._calls:04d}", "type": "function",
                                   "function": {"name": c["name"], "arguments": args}})
        message: dict[str, Any] = {"role": "assistant", "content": content or None}
        if tool_calls:
            message["tool_calls"] = tool_calls
        prompt_tokens = tokens_of(json.dumps(messages))
        completion_tokens = tokens_of(json.dumps(message))
        return {
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": 0,
            "model": body.get("model", self.model),
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": "tool_calls" if tool_calls else "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }

    def respond(self, path: str, raw: bytes) -> tuple[int, dict[str, Any]]:
        with self._lock:
            if not path.rstrip("/").endswith("/chat/completions"):
                return 404, {"error": {"message": f"no route {path}", "type": "invalid_request_error"}}
            body = json.loads(raw or b"{}")
            self.requests.append(body)
            if self.fail_remaining > 0:
                self.fail_remaining -= 1
                return 503, {"error": {"message": "model is loading", "type": "server_error"}}
            problem = sequence_error(body.get("messages") or [])
            if problem:
                return 400, {"error": {"message": problem, "type": "invalid_request_error"}}
            return 200, self._completion(body)

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, payload = server.respond(self.path, raw)
                server.statuses.append(status)
                data = json.dumps(payload).encode()
                kind = "application/json"
                with server._lock:
                    if status == 200 and server.garbage_remaining > 0:
                        server.garbage_remaining -= 1  # alternately labelled HTML and (wrongly) JSON
                        kind = "text/html" if server.garbage_remaining % 2 else "application/json"
                        data = b"<html><body>502 upstream hiccup</body></html>"
                        server.statuses[-1] = -200  # marks a garbage 200 in the record
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:  # keep pytest output clean
                pass

        return Handler
